"""The HTTP model providers: SSE reader, request building, streaming, errors and secrets.

The behavioural suite runs against ``provider_server`` (a real HTTP server on 127.0.0.1) once per
wire format (OpenAI chat completions, Anthropic messages), streamed and not; request building and
header parsing use ``httpx.MockTransport``. Nothing here reaches beyond 127.0.0.1.
"""

from __future__ import annotations

import email.utils
import json
import pickle
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError, ProviderStreamCut, ProviderTimeout, UsageError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, ToolSpec, Usage
from loom_nb.providers import AnthropicMessages, ModelProvider, OpenAIChat
from loom_nb.providers.http import HTTPProvider, error_detail, parse_arguments, parse_retry_after
from loom_nb.providers.sse import SSEDecoder, SSEEvent, aiter_sse, aiter_sse_bytes, loads
from tests.providers.provider_server import (
    Call,
    Cut,
    Fail,
    Hang,
    Malformed,
    ProviderServer,
    Raw,
    Reply,
    StreamError,
    free_port,
)

KEY = "sk-test-SECRET-0123456789abcdef"
WEATHER = ToolSpec(
    name="weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
ASK = ModelRequest(messages=(Message.system("Be brief."), Message.user("Weather in Paris and Oslo?")))


@pytest.fixture(params=["openai", "anthropic"])
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(wire: str, base: str, **kw: Any) -> HTTPProvider:
    kw.setdefault("api_key", KEY)
    if wire == "openai":
        return OpenAIChat("gpt-test", base_url=base + "/v1", **kw)
    return AnthropicMessages("claude-test", base_url=base, **kw)


def server_path(wire: str) -> str:
    return "/v1/chat/completions" if wire == "openai" else "/v1/messages"


def terminal(wire: str) -> str:
    return "data: [DONE]" if wire == "openai" else "message_stop"


def two_calls() -> Reply:
    return Reply(
        text=["Checking ", "both."],
        calls=[
            Call("call_a", "weather", ['{"ci', 'ty": "Pa', 'ris"}']),
            Call("call_b", "weather", ['{"city"', ': "Oslo"}']),
        ],
        usage=(40, 25),
    )


# --------------------------------------------------------------------------------------------------
# SSE reader


async def _lines(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def _collect(it: AsyncIterator[SSEEvent]) -> list[SSEEvent]:
    return [e async for e in it]


async def test_sse_events_data_comments_and_dispatch() -> None:
    lines = [
        ": a comment",
        "event: greeting",
        "data: hello",
        "data:world",
        "data",
        "id: 7",
        "",
        "",  # a blank line with no data dispatches nothing
        "event: ignored-without-data",
        "",
        "data: [DONE]",
        "",
        "data: unfinished",  # no blank line: never dispatched
    ]
    events = await _collect(aiter_sse(_lines(lines)))
    assert events == [SSEEvent("greeting", "hello\nworld\n", "7"), SSEEvent("message", "[DONE]", "7")]
    assert [e.is_done for e in events] == [False, True]


async def test_sse_accepts_bytes_lines_with_terminators_and_a_bom() -> None:
    lines = [b"\xef\xbb\xbfdata: caf\xc3\xa9\r\n", b"\r\n", "event: x\n", "data:  two spaces\n", "\n"]
    events = await _collect(aiter_sse(_lines(lines)))
    assert events == [SSEEvent("message", "café"), SSEEvent("x", " two spaces")]


def test_sse_decoder_ignores_unknown_fields_and_ids_with_nul() -> None:
    d = SSEDecoder()
    for line in ["retry: 10", "foo: bar", "id: a\0b", "data: 1"]:
        assert d.decode(line) is None
    assert d.decode("") == SSEEvent("message", "1", None)


STREAM = (
    'event: a\r\ndata: {"t": "x\u2028y\u0085z"}\r\n\r\n: ping\rdata: line1\rdata: line2\r\rdata: é€😀\n\n'
).encode()
EXPECTED = [
    SSEEvent("a", '{"t": "x\u2028y\u0085z"}'),
    SSEEvent("message", "line1\nline2"),
    SSEEvent("message", "é€😀"),
]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, len(STREAM)])
async def test_sse_bytes_any_chunking_gives_the_same_events(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert await _collect(aiter_sse_bytes(_lines(chunks))) == EXPECTED


async def test_sse_bytes_splits_only_on_cr_lf() -> None:
    # httpx's aiter_lines would split this data line at U+2028 and U+0085.
    events = await _collect(aiter_sse_bytes(_lines([STREAM])))
    assert json.loads(events[0].data) == {"t": "x\u2028y\u0085z"}


async def test_sse_bytes_crlf_split_across_chunks_is_one_line_end() -> None:
    chunks = [b"data: a\r", b"\n\r", b"\ndata: b\r", b"\r"]
    assert await _collect(aiter_sse_bytes(_lines(chunks))) == [
        SSEEvent("message", "a"),
        SSEEvent("message", "b"),
    ]


LINE_KINDS = [
    "data: a",
    "data:b",
    "data",
    "data: ",
    "event: e",
    "event:",
    ": c",
    "",
    "id: 1",
    "retry: 5",
    "x: y",
]


@given(st.lists(st.sampled_from(LINE_KINDS), max_size=30))
def test_decode_lines_matches_decode_line_by_line(lines: list[str]) -> None:
    one, many = SSEDecoder(), SSEDecoder()
    expected = [e for e in map(one.decode, lines) if e is not None]
    assert many.decode_lines(lines) == expected


def test_loads_agrees_with_json() -> None:
    for text in ['{"a": [1, 2.5, "x"]}', '  {"a": 1}', '{"a": 1}  ', "[1]", '"s"']:
        assert loads(text) == json.loads(text)
    for bad in ['{"a": ', '{"a": 1} {"b": 2}', "", "nan-ish"]:
        with pytest.raises(json.JSONDecodeError):
            loads(bad)


# --------------------------------------------------------------------------------------------------
# helpers: retry-after, error bodies, arguments


def test_parse_retry_after_seconds_ms_and_dates() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": " 1.5 "}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "tomorrow"}) is None
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(httpx.Headers({"Retry-After": "4"})) == 4.0


def test_error_detail_reads_each_providers_error_shape() -> None:
    openai = '{"error": {"message": "Rate limit reached", "type": "requests", "code": null}}'
    assert error_detail(openai) == "requests: Rate limit reached"
    anthropic = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    assert error_detail(anthropic) == "overloaded_error: Overloaded"
    assert error_detail('{"error": "model \\"x\\" not found"}') == 'model "x" not found'
    assert error_detail('{"detail": "Not Found"}') == "Not Found"
    assert error_detail("<html>\n <b>502 Bad Gateway</b>\n</html>") == "<html> <b>502 Bad Gateway</b> </html>"
    assert error_detail("x" * 1000).endswith("…")
    assert len(error_detail("x" * 1000)) == 300


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments("[1, 2]") == ({}, "[1, 2]")
    assert parse_arguments('{"a": ') == ({}, '{"a": ')


# --------------------------------------------------------------------------------------------------
# request building and headers (MockTransport)


class Capture:
    """A MockTransport handler that records requests and answers with a fixed response."""

    def __init__(self, respond: Callable[[httpx.Request], httpx.Response]) -> None:
        self.requests: list[httpx.Request] = []
        self._respond = respond
        self.transport = httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self._respond(request)

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)


def json_reply(doc: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Capture:
    return Capture(lambda request: httpx.Response(status, json=doc, headers=headers))


OPENAI_OK = {
    "id": "chatcmpl-1",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}

CALL_A = ToolCall(id="call_a", name="weather", arguments={"city": "Paris"})
CALL_B = ToolCall(id="call_b", name="weather", raw_arguments="{oops")
TRANSCRIPT = ModelRequest(
    messages=(
        Message.system("Be brief."),
        Message.user("Weather?"),
        Message.system("Use metric units."),
        Message.assistant("Checking.", [CALL_A, CALL_B]),
        Message.tool(CALL_A, "18 C"),
        Message.tool(CALL_B, "arguments were not JSON", is_error=True),
        Message.user("And tomorrow?"),
    ),
    tools=(WEATHER, ToolSpec(name="now")),
    max_tokens=100,
    temperature=0.2,
)


async def test_openai_request_body_for_a_tool_transcript() -> None:
    cap = json_reply(OPENAI_OK)
    model = OpenAIChat("gpt-test", api_key=KEY, transport=cap.transport, stream=False)
    await model.complete(TRANSCRIPT)
    assert str(cap.requests[0].url) == "https://api.openai.com/v1/chat/completions"
    assert cap.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": "Use metric units."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "weather", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "18 C"},
            {"role": "tool", "tool_call_id": "call_b", "content": "Error: arguments were not JSON"},
            {"role": "user", "content": "And tomorrow?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "weather",
                    "description": "The weather in a city.",
                    "parameters": WEATHER.parameters,
                },
            },
            {
                "type": "function",
                "function": {"name": "now", "parameters": {"type": "object", "properties": {}}},
            },
        ],
        "max_completion_tokens": 100,
        "temperature": 0.2,
    }


async def test_openai_streaming_body_asks_for_usage_and_assistant_without_text_sends_null() -> None:
    cap = Capture(lambda r: httpx.Response(200, json=OPENAI_OK))
    model = OpenAIChat("gpt-test", api_key=KEY, transport=cap.transport, max_tokens=50)
    request = ModelRequest(messages=(Message.user("hi"), Message.assistant("", [CALL_A])), model="other")
    await model.complete(request)
    body = cap.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "other" and body["max_completion_tokens"] == 50
    assert body["messages"][1]["content"] is None
    assert "tools" not in body and "temperature" not in body


async def test_anthropic_request_body_for_a_tool_transcript() -> None:
    cap = json_reply(ANTHROPIC_OK)
    model = AnthropicMessages("claude-test", api_key=KEY, transport=cap.transport, stream=False)
    await model.complete(TRANSCRIPT)
    assert str(cap.requests[0].url) == "https://api.anthropic.com/v1/messages"
    assert cap.body == {
        "model": "claude-test",
        "max_tokens": 100,
        "system": "Be brief.\n\nUse metric units.",
        "messages": [
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_a", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_b", "name": "weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_a", "content": "18 C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_b",
                        "content": "arguments were not JSON",
                        "is_error": True,
                    },
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        "tools": [
            {"name": "weather", "description": "The weather in a city.", "input_schema": WEATHER.parameters},
            {"name": "now", "input_schema": {"type": "object", "properties": {}}},
        ],
        "temperature": 0.2,
    }


async def test_anthropic_drops_an_empty_user_text_after_tool_results() -> None:
    cap = json_reply(ANTHROPIC_OK)
    model = AnthropicMessages("m", api_key=KEY, transport=cap.transport)
    messages = (
        Message.user("go"),
        Message.assistant("", [CALL_A]),
        Message.tool(CALL_A, "ok"),
        Message.user(""),
    )
    await model.complete(ModelRequest(messages=messages))
    assert cap.body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_a", "name": "weather", "input": {"city": "Paris"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_a", "content": "ok"}]},
    ]


async def test_anthropic_defaults_max_tokens_and_streams() -> None:
    cap = json_reply(ANTHROPIC_OK)
    model = AnthropicMessages("claude-test", api_key=KEY, transport=cap.transport)
    await model.complete(ModelRequest(messages=(Message.user("hi"),)))
    assert cap.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }


async def test_headers_auth_version_idempotency_and_extra() -> None:
    cap_o, cap_a = json_reply(OPENAI_OK), json_reply(ANTHROPIC_OK)
    extra = {"X-Team": "blue"}
    o = OpenAIChat("m", api_key=KEY, transport=cap_o.transport, extra_headers=extra, stream=False)
    a = AnthropicMessages("m", api_key=KEY, transport=cap_a.transport, extra_headers=extra, stream=False)
    await o.complete(ASK, idempotency_key="step-42")
    await a.complete(ASK, idempotency_key="step-43")
    ho, ha = cap_o.requests[0].headers, cap_a.requests[0].headers
    assert ho["authorization"] == f"Bearer {KEY}" and "x-api-key" not in ho
    assert ha["x-api-key"] == KEY and ha["anthropic-version"] == "2023-06-01" and "authorization" not in ha
    assert ho["idempotency-key"] == "step-42" and ha["idempotency-key"] == "step-43"
    assert ho["x-team"] == ha["x-team"] == "blue"
    assert ho["content-type"] == "application/json" and ho["accept"] == "application/json"
    await o.complete(ASK)
    assert "idempotency-key" not in cap_o.requests[1].headers


async def test_empty_api_key_sends_no_credentials() -> None:
    cap_o, cap_a = json_reply(OPENAI_OK), json_reply(ANTHROPIC_OK)
    await OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="", transport=cap_o.transport).complete(ASK)
    await AnthropicMessages("m", api_key="", transport=cap_a.transport).complete(ASK)
    assert "authorization" not in cap_o.requests[0].headers
    assert "x-api-key" not in cap_a.requests[0].headers
    assert str(cap_o.requests[0].url) == "http://127.0.0.1:9/v1/chat/completions"


async def test_non_streaming_parse_and_finish_reason_mapping() -> None:
    doc = {
        "id": "msg_9",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Oslo"}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 9, "cache_read_input_tokens": 100},
    }
    seen: list[str] = []
    resp = await AnthropicMessages("m", api_key=KEY, transport=json_reply(doc).transport, stream=False).complete(
        ASK, on_delta=seen.append
    )
    call = ToolCall(id="t1", name="weather", arguments={"city": "Oslo"})
    assert resp == ModelResponse(
        message=Message(
            role="assistant", text="Let me look.", tool_calls=(call,), reasoning=(ReasoningBlock(text="hmm"),)
        ),
        usage=Usage(input_tokens=105, output_tokens=9),
        finish_reason="tool_calls",
        response_id="msg_9",
    )
    assert seen == ["Let me look."]
    for anthropic_reason, ours in [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("pause_turn", "pause_turn"),
    ]:
        cap = json_reply({**ANTHROPIC_OK, "stop_reason": anthropic_reason})
        r = await AnthropicMessages("m", api_key=KEY, transport=cap.transport, stream=False).complete(ASK)
        assert r.finish_reason == ours
    fn_call = {**OPENAI_OK, "choices": [{"message": {"content": None}, "finish_reason": "function_call"}]}
    r = await OpenAIChat("m", api_key=KEY, transport=json_reply(fn_call).transport, stream=False).complete(ASK)
    assert (r.finish_reason, r.message.text) == ("tool_calls", "")


async def test_openai_arguments_that_are_not_an_object_become_raw_arguments() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1]"}},
        {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{bad"}},
        {"id": "c3", "type": "function", "function": {"name": "f", "arguments": ""}},
        {"id": "c4", "type": "function", "function": {"name": "f", "arguments": {"as": "object"}}},
    ]
    doc = {
        "id": "x",
        "choices": [{"message": {"content": "", "tool_calls": calls}, "finish_reason": "tool_calls"}],
    }
    r = await OpenAIChat("m", api_key=KEY, transport=json_reply(doc).transport, stream=False).complete(ASK)
    assert r.message.tool_calls == (
        ToolCall(id="c1", name="f", raw_arguments="[1]"),
        ToolCall(id="c2", name="f", raw_arguments="{bad"),
        ToolCall(id="c3", name="f"),
        ToolCall(id="c4", name="f", arguments={"as": "object"}),
    )
    assert r.usage == Usage()


async def test_a_stream_request_answered_with_json_is_parsed_as_json() -> None:
    r = await OpenAIChat("m", api_key=KEY, transport=json_reply(OPENAI_OK).transport).complete(ASK)
    assert (r.message.text, r.response_id, r.usage) == (
        "ok",
        "chatcmpl-1",
        Usage(input_tokens=3, output_tokens=1),
    )


async def test_unexpected_json_shape_is_a_protocol_error() -> None:
    model = OpenAIChat("m", api_key=KEY, transport=json_reply({"id": "x", "choices": "nope"}).transport, stream=False)
    expected = r"""unexpected response shape .* \(TypeError: string indices .*\): '\{"id":"x","choices":"nope"\}'$"""
    with pytest.raises(ProviderProtocolError, match=expected):
        await model.complete(ASK)
    model = OpenAIChat("m", api_key=KEY, transport=json_reply({"id": "x", "choices": []}).transport, stream=False)
    with pytest.raises(ProviderProtocolError, match="the response has no choices"):
        await model.complete(ASK)


async def test_mock_transport_http_error_maps_status_and_retry_after_ms() -> None:
    cap = json_reply({"error": {"message": "Slow down", "type": "tokens"}}, 429, {"retry-after-ms": "1500"})
    with pytest.raises(ProviderHTTPError) as info:
        await OpenAIChat("m", api_key=KEY, transport=cap.transport).complete(ASK)
    err = info.value
    assert (err.status_code, err.retryable, err.retry_after) == (429, True, 1.5)
    assert str(err) == (
        "POST https://api.openai.com/v1/chat/completions returned HTTP 429: tokens: Slow down (retry after 1.5 s)"
    )


def sse_reply(text: str) -> Capture:
    headers = {"content-type": "text/event-stream"}
    return Capture(lambda request: httpx.Response(200, headers=headers, content=text.encode()))


def _ev(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


async def test_anthropic_stream_keeps_thinking_out_of_the_deltas_and_takes_input_from_block_start() -> None:
    start = {"id": "msg_t", "usage": {"input_tokens": 4, "output_tokens": 1}}
    stream = "".join(
        [
            _ev({"type": "message_start", "message": start}),
            _ev(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": ""},
                }
            ),
            _ev(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "thinking_delta", "thinking": "hm"},
                }
            ),
            _ev(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "s"},
                }
            ),
            _ev({"type": "content_block_stop", "index": 0}),
            _ev(
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": "t1", "name": "now", "input": {}},
                }
            ),
            _ev({"type": "content_block_stop", "index": 1}),
            _ev({"type": "some_future_event"}),
            _ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 6}}),
            _ev({"type": "message_stop"}),
        ]
    )
    seen: list[str] = []
    resp = await AnthropicMessages("m", api_key=KEY, transport=sse_reply(stream).transport).complete(
        ASK, on_delta=seen.append
    )
    thinking = (ReasoningBlock(text="hm", signature="s"),)
    assert resp == ModelResponse(
        message=Message(role="assistant", tool_calls=(ToolCall(id="t1", name="now"),), reasoning=thinking),
        usage=Usage(input_tokens=4, output_tokens=6),
        finish_reason="tool_calls",
        response_id="msg_t",
    )
    assert seen == []


async def test_anthropic_delta_before_its_block_start_is_a_protocol_error() -> None:
    delta = {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "x"}}
    stream = _ev({"type": "message_start", "message": {"id": "m"}}) + _ev(delta)
    model = AnthropicMessages("m", api_key=KEY, transport=sse_reply(stream).transport)
    with pytest.raises(ProviderProtocolError, match="a content_block_delta for block 2 came before its"):
        await model.complete(ASK)


async def test_openai_stream_tool_call_without_a_name_is_a_protocol_error() -> None:
    chunk = {
        "id": "c",
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}],
    }
    stream = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    model = OpenAIChat("m", api_key=KEY, transport=sse_reply(stream).transport)
    with pytest.raises(
        ProviderProtocolError, match=r"tool call 0 in the stream has no function name \(arguments '\{\}'\)"
    ):
        await model.complete(ASK)


async def test_openai_stream_ignores_other_choices_and_events_after_done() -> None:
    def chunk(index: int, text: str) -> str:
        return "data: " + json.dumps({"id": "c", "choices": [{"index": index, "delta": {"content": text}}]}) + "\n\n"

    stream = chunk(0, "kept") + chunk(1, "other choice") + "data: [DONE]\n\n" + chunk(0, " after done")
    resp = await OpenAIChat("m", api_key=KEY, transport=sse_reply(stream).transport).complete(ASK)
    assert (resp.message.text, resp.finish_reason, resp.usage) == ("kept", None, Usage())


async def test_an_empty_stream_is_a_retryable_cut_stream() -> None:
    model = OpenAIChat("m", api_key=KEY, transport=sse_reply(": nothing\n\n").transport)
    with pytest.raises(ProviderStreamCut, match=r"ended before data: \[DONE\] \(after no complete event\): ") as info:
        await model.complete(ASK)
    assert info.value.retryable


def test_providers_satisfy_the_protocol_and_validate_arguments() -> None:
    assert isinstance(OpenAIChat("m"), ModelProvider)
    assert isinstance(AnthropicMessages("m"), ModelProvider)
    assert (OpenAIChat("m").name, AnthropicMessages("m").name) == ("openai", "anthropic")
    with pytest.raises(UsageError, match="base_url must start with http:// or https://"):
        OpenAIChat("m", base_url="localhost:8000/v1")
    with pytest.raises(UsageError, match="needs a model name"):
        AnthropicMessages("")


# --------------------------------------------------------------------------------------------------
# secrets


@pytest.mark.parametrize("cls", [OpenAIChat, AnthropicMessages])
def test_key_is_not_in_repr_or_vars(cls: type[HTTPProvider]) -> None:
    model = cls("m", api_key=KEY)  # type: ignore[call-arg]
    assert KEY not in repr(model)
    assert KEY not in str(vars(model))
    assert repr(model).startswith(f"{cls.__name__}(model='m', base_url=")


@pytest.mark.parametrize(("cls", "env"), [(OpenAIChat, "OPENAI_API_KEY"), (AnthropicMessages, "ANTHROPIC_API_KEY")])
async def test_missing_key_fails_at_the_first_call_naming_the_variable(
    cls: type[HTTPProvider], env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = json_reply(OPENAI_OK if cls is OpenAIChat else ANTHROPIC_OK)
    model = cls("m", transport=cap.transport)  # type: ignore[call-arg]
    with pytest.raises(UsageError, match=f"set the {env} environment variable"):
        await model.complete(ASK)
    assert cap.requests == []
    monkeypatch.setenv(env, KEY)
    await model.complete(ASK)
    headers = cap.requests[0].headers
    assert KEY in (headers.get("authorization", ""), headers.get("x-api-key", ""))[cls is AnthropicMessages]


@pytest.mark.parametrize("cls", [OpenAIChat, AnthropicMessages])
async def test_key_echoed_by_the_server_is_redacted_from_errors(cls: type[HTTPProvider]) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}}
    cap = json_reply(body, 401)
    model = cls("m", api_key=KEY, transport=cap.transport)  # type: ignore[call-arg]
    with pytest.raises(ProviderHTTPError) as info:
        await model.complete(ASK)
    err = info.value
    assert (err.status_code, err.retryable) == (401, False)
    assert "invalid_request_error: Incorrect API key provided: <redacted>." in str(err)
    assert KEY not in str(err) and KEY not in err.body and KEY not in repr(err)
    assert KEY.encode() not in pickle.dumps(err)
    assert KEY in cap.requests[0].headers.get("authorization", "") + cap.requests[0].headers.get("x-api-key", "")


# --------------------------------------------------------------------------------------------------
# behaviour against the local server, both wire formats


@pytest.mark.parametrize("stream", [True, False])
async def test_text_answer(server: ProviderServer, wire: str, stream: bool) -> None:
    deltas = [f"word{i} " for i in range(40)] + ["done."]
    server.push(Reply(text=deltas, usage=(17, 41), id="resp_text"))
    seen: list[str] = []
    model = make(wire, server.url, stream=stream)
    resp = await model.complete(ASK, on_delta=seen.append)
    assert resp == ModelResponse(
        message=Message.assistant("".join(deltas)),
        usage=Usage(input_tokens=17, output_tokens=41),
        finish_reason="stop",
        response_id="resp_text",
        model="m-2026-01-01",
    )
    assert seen == (deltas if stream else ["".join(deltas)])
    [req] = server.requests
    assert req.path == ("/v1/chat/completions" if wire == "openai" else "/v1/messages")
    assert req.body.get("stream", False) is stream
    if wire == "openai":
        assert req.headers["authorization"] == f"Bearer {KEY}"
        assert req.body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert ("stream_options" in req.body) is stream
    else:
        assert req.headers["x-api-key"] == KEY and req.headers["anthropic-version"] == "2023-06-01"
        assert req.body["system"] == "Be brief."
        assert req.body["messages"] == [{"role": "user", "content": "Weather in Paris and Oslo?"}]


@pytest.mark.parametrize("stream", [True, False])
async def test_parallel_tool_calls_with_split_arguments(server: ProviderServer, wire: str, stream: bool) -> None:
    server.push(two_calls())
    request = ModelRequest(messages=ASK.messages, tools=(WEATHER,))
    resp = await make(wire, server.url, stream=stream).complete(request)
    assert resp.message.text == "Checking both."
    assert resp.message.tool_calls == (
        ToolCall(id="call_a", name="weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="weather", arguments={"city": "Oslo"}),
    )
    assert (resp.finish_reason, resp.usage) == ("tool_calls", Usage(input_tokens=40, output_tokens=25))
    sent_tools = server.requests[0].body["tools"]
    assert [t["function"]["name"] if wire == "openai" else t["name"] for t in sent_tools] == ["weather"]


async def test_streamed_arguments_that_do_not_parse_become_raw(server: ProviderServer, wire: str) -> None:
    server.push(Reply(calls=[Call("c1", "weather", ['{"city": ', '"Par'])]))
    resp = await make(wire, server.url).complete(ASK)
    assert resp.message.tool_calls == (ToolCall(id="c1", name="weather", raw_arguments='{"city": "Par'),)


async def test_odd_chunking_crlf_and_unicode_survive_the_stream(server: ProviderServer, wire: str) -> None:
    deltas = ["caf", "é ", "€ ", "😀", " line\u2028sep", " nel\u0085!"]
    server.push(Reply(text=deltas, chunk_size=3, crlf=True))
    seen: list[str] = []
    resp = await make(wire, server.url).complete(ASK, on_delta=seen.append)
    assert resp.message.text == "".join(deltas)
    assert seen == deltas


async def test_rate_limit_with_retry_after_then_success(server: ProviderServer, wire: str) -> None:
    server.push(Fail(429, "Rate limit reached", "rate_limit_error", {"retry-after": "2"}), Reply(text=["ok"]))
    model = make(wire, server.url)
    with pytest.raises(ProviderHTTPError) as info:
        await model.complete(ASK)
    err = info.value
    assert (err.status_code, err.retryable, err.retry_after) == (429, True, 2.0)
    assert str(err).endswith("returned HTTP 429: rate_limit_error: Rate limit reached (retry after 2 s)")
    assert "Rate limit reached" in err.body
    resp = await model.complete(ASK)
    assert resp.message.text == "ok"
    assert len(server.requests) == 2


async def test_server_error_is_retryable(server: ProviderServer, wire: str) -> None:
    server.push(Fail(500, "The server had an error", "server_error"))
    with pytest.raises(ProviderHTTPError) as info:
        await make(wire, server.url).complete(ASK)
    assert (info.value.status_code, info.value.retryable, info.value.retry_after) == (500, True, None)
    assert str(info.value).endswith("returned HTTP 500: server_error: The server had an error")


async def test_non_json_gateway_error_keeps_its_text(server: ProviderServer, wire: str) -> None:
    server.push(Fail(502, "", raw_body="<html><h1>502 Bad Gateway</h1></html>"))
    with pytest.raises(ProviderHTTPError, match=r"returned HTTP 502: <html><h1>502 Bad Gateway</h1></html>$") as info:
        await make(wire, server.url).complete(ASK)
    assert info.value.retryable


async def test_client_error_is_not_retryable_and_carries_the_providers_message(
    server: ProviderServer, wire: str
) -> None:
    server.push(Fail(400, "max_tokens: must be at most 8192", "invalid_request_error"))
    with pytest.raises(ProviderHTTPError) as info:
        await make(wire, server.url).complete(ASK)
    err = info.value
    assert (err.status_code, err.retryable) == (400, False)
    assert str(err) == (
        f"POST {server.url}{server.requests[0].path} returned HTTP 400: "
        "invalid_request_error: max_tokens: must be at most 8192"
    )


async def test_stream_cut_mid_event_is_a_protocol_error(server: ProviderServer, wire: str) -> None:
    server.push(Cut(Reply(text=["alpha ", "beta ", "gamma"]), after=4))
    seen: list[str] = []
    with pytest.raises(ProviderProtocolError) as info:
        await make(wire, server.url).complete(ASK, on_delta=seen.append)
    message = str(info.value)
    assert f"ended before {terminal(wire)} (after " in message
    # The events before the cut were read and reported; the half event was not dispatched.
    if wire == "openai":
        assert seen == ["alpha ", "beta "]
        assert 'after 3 events, the last \'{"id": "resp_123"' in message and "beta" in message
    else:
        assert seen == ["alpha "]
        assert 'after 4 events, the last \'{"type": "content_block_delta"' in message and "alpha" in message


async def test_chunked_stream_cut_is_a_retryable_connection_error(server: ProviderServer, wire: str) -> None:
    server.push(Cut(Reply(text=["alpha ", "beta"]), after=3, chunked=True))
    with pytest.raises(ProviderTimeout) as info:
        await make(wire, server.url).complete(ASK)
    assert info.value.retryable
    message = str(info.value)
    assert f"the stream from {server.url}{server_path(wire)} was cut off (RemoteProtocolError: peer closed" in message
    # OpenAI: the role chunk and "alpha " (a comment line is no event); Anthropic: start, ping, block start.
    if wire == "openai":
        assert 'after 2 events, the last \'{"id": "resp_123"' in message and "alpha" in message
    else:
        assert 'after 3 events, the last \'{"type": "content_block_start"' in message


async def test_malformed_json_in_a_data_line(server: ProviderServer, wire: str) -> None:
    server.push(Malformed(Reply(text=["one ", "two"]), at=2))
    # Event 2 on the wire is OpenAI's first text chunk, Anthropic's content_block_start (after a ping).
    number, start = (
        (2, '{"id": "resp_123", "object": "chat') if wire == "openai" else (3, '{"type": "content_block_start"')
    )
    expected = f"malformed JSON in event {number} of the stream from {server.url}{server_path(wire)}: '{start}"
    with pytest.raises(ProviderProtocolError) as info:
        await make(wire, server.url).complete(ASK)
    assert str(info.value).startswith(expected)
    assert not info.value.retryable


async def test_in_stream_error_event(server: ProviderServer, wire: str) -> None:
    server.push(StreamError(Reply(text=["partial"]), after=3))
    with pytest.raises(ProviderHTTPError, match="reported an error: overloaded_error: Overloaded") as info:
        await make(wire, server.url).complete(ASK)
    assert info.value.status_code == (503 if wire == "openai" else 529)
    assert info.value.retryable


@pytest.mark.slow
async def test_timeout_is_retryable(server: ProviderServer, wire: str) -> None:
    server.push(Hang(10))
    with pytest.raises(ProviderTimeout, match=r"timed out after 0.2 s \(ReadTimeout\)") as info:
        await make(wire, server.url, timeout=0.2).complete(ASK)
    assert info.value.retryable


async def test_connection_refused_is_retryable(wire: str) -> None:
    model = make(wire, f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ProviderTimeout, match=r"failed: ConnectError: ") as info:
        await model.complete(ASK)
    assert info.value.retryable and KEY not in str(info.value)
    # The httpx error holds the request (and its key): it is not chained as the cause.
    assert info.value.__cause__ is None


async def test_a_200_that_is_neither_json_nor_a_stream(server: ProviderServer, wire: str) -> None:
    server.push(Raw("text/html", "<html>login page</html>"))
    with pytest.raises(ProviderProtocolError, match=r"not a JSON object \(content-type 'text/html'\)"):
        await make(wire, server.url, stream=False).complete(ASK)


async def test_pooled_client_reuses_one_connection(server: ProviderServer, wire: str) -> None:
    server.push(Reply(text=["a"]), Reply(text=["b"]))
    async with make(wire, server.url) as model:
        first = await model.complete(ASK)
        second = await model.complete(ASK)
    assert (first.message.text, second.message.text) == ("a", "b")
    assert model._client is None
    assert server.pending == 0
    assert server.requests[0].client_port == server.requests[1].client_port


async def test_idempotency_key_reaches_the_server(server: ProviderServer, wire: str) -> None:
    server.push(Reply(text=["ok"]))
    await make(wire, server.url, extra_headers={"X-Trace": "t1"}).complete(ASK, idempotency_key="run-7/step-3")
    assert server.requests[0].headers["idempotency-key"] == "run-7/step-3"
    assert server.requests[0].headers["x-trace"] == "t1"


async def test_caller_transport_is_not_closed(server: ProviderServer, wire: str) -> None:
    server.push(Reply(text=["a"]), Reply(text=["b"]))
    transport = httpx.AsyncHTTPTransport()
    try:
        model = make(wire, server.url, transport=transport)
        assert (await model.complete(ASK)).message.text == "a"
        assert (await model.complete(ASK)).message.text == "b"
        assert server.requests[0].client_port == server.requests[1].client_port
    finally:
        await transport.aclose()
