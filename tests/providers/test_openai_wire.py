"""The OpenAI chat-completions wire, at parity with the official SDK where it matters to a run.

Each test pins one fix, on today's wire through ``httpx.MockTransport``: malformed tool arguments
are not echoed back, refusals are their own stop reason, streamed names are joined per call,
legacy ``function_call`` answers become a tool call, errors inside a 200 body are classified by
their code, ``max_completion_tokens`` is the default cap field, rate-limit reset headers give the
retry delay, an error tool result says so in its text, and provider messages are one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import loom_nb as loom
from loom_nb.errors import ProviderHTTPError, UsageError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ToolCall
from loom_nb.providers.http import ERROR_STATUS, error_detail, error_status, parse_duration, parse_retry_after
from loom_nb.providers.openai import MAX_TOKENS_FIELDS, OpenAIChat
from loom_nb.testing import FakeClock, SequentialIds

KEY = "sk-test-wire-0123456789abcdef"
ASK = ModelRequest(messages=(Message.user("Weather in Oslo?"),))
BROKEN = '{"city": "Oslo", "units": '


class Recorder:
    """A MockTransport handler: records each request body and answers from a list, in turn."""

    def __init__(self, *answers: Callable[[dict[str, Any]], httpx.Response]) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.answers = list(answers)
        self.transport = httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        return self.answers[min(len(self.bodies), len(self.answers)) - 1](body)


def body_reply(doc: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Any:
    return lambda _body: httpx.Response(status, json=doc, headers=headers)


def stream_reply(chunks: list[dict[str, Any]]) -> Any:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return lambda _body: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


def completion(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {"id": "chatcmpl-w", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-s", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def model(rec: Recorder, **kw: Any) -> OpenAIChat:
    kw.setdefault("stream", False)
    return OpenAIChat("gpt-test", api_key=KEY, transport=rec.transport, **kw)


# -- 1. malformed arguments ----------------------------------------------------------------------


async def test_malformed_arguments_are_sent_back_as_an_empty_object() -> None:
    rec = Recorder(body_reply(completion({"content": "ok"})))
    bad = ToolCall(id="c1", name="weather", raw_arguments=BROKEN)
    good = ToolCall(id="c2", name="weather", arguments={"city": "Oslo"})
    request = ModelRequest(messages=(*ASK.messages, Message.assistant("", [bad, good])))
    await model(rec).complete(request)
    sent = [c["function"]["arguments"] for c in rec.bodies[0]["messages"][1]["tool_calls"]]
    assert sent == ["{}", '{"city": "Oslo"}']


def strict_proxy(answers: list[dict[str, Any]]) -> Callable[[dict[str, Any]], httpx.Response]:
    """An OpenAI-compatible proxy in front of another model: it refuses tool-call arguments that are
    not a JSON object (HTTP 400, not retried), and otherwise answers from ``answers`` in turn."""

    def respond(body: dict[str, Any]) -> httpx.Response:
        for m in body["messages"]:
            for call in m.get("tool_calls") or ():
                try:
                    ok = isinstance(json.loads(call["function"]["arguments"]), dict)
                except ValueError:
                    ok = False
                if not ok:
                    error = {"message": "Failed to parse tool call arguments", "type": "invalid_request_error"}
                    return httpx.Response(400, json={"error": error})
        return httpx.Response(200, json=answers.pop(0))

    return respond


@loom.tool(idempotent=True)
def weather(city: str, units: str = "metric") -> str:
    """The weather in a city.

    Args:
        city: The city.
        units: metric or imperial.
    """
    return f"{city}: 12 ({units})"


async def test_an_agent_recovers_from_malformed_arguments_behind_a_strict_proxy() -> None:
    bad_call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": BROKEN}}
    rec = Recorder(
        strict_proxy(
            [
                completion({"content": None, "tool_calls": [bad_call]}, "tool_calls"),
                completion({"content": "It is 12 in Oslo."}),
            ]
        )
    )
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    agent = loom.Agent(model=model(rec), tools=[weather], name="strict-proxy")
    result = await agent.start("Weather in Oslo?", runtime=rt)
    rt.close()
    assert (result.output, result.stop_reason, result.turns) == ("It is 12 in Oslo.", "end_turn", 2)
    second = rec.bodies[1]["messages"]
    assert second[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    tool_result = second[2]
    assert tool_result["role"] == "tool" and tool_result["tool_call_id"] == "c1"
    # What was wrong (the text as received) reaches the model. The wording is journaled inline in the
    # next turn's input, so it stays as recorded runs have it (changing it would break their replay).
    assert BROKEN in tool_result["content"] or repr(BROKEN) in tool_result["content"]
    assert "are not a JSON object" in tool_result["content"]


# -- 2. refusals -----------------------------------------------------------------------------------

REFUSAL = "I can't help with that."


async def test_a_refusal_in_a_body_is_kept_apart_with_its_own_stop_reason() -> None:
    rec = Recorder(body_reply(completion({"role": "assistant", "content": None, "refusal": REFUSAL})))
    seen: list[str] = []
    resp = await model(rec).complete(ASK, on_delta=seen.append)
    assert resp.finish_reason == "refusal"
    assert (resp.message.text, resp.message.refusal) == ("", REFUSAL)
    assert seen == []  # deltas are answer text


async def test_a_streamed_refusal_is_kept_apart_and_not_streamed_as_text() -> None:
    chunks = [chunk({"role": "assistant", "refusal": ""}), chunk({"refusal": "I can't "})]
    chunks += [chunk({"refusal": "help with that."}), chunk({}, "stop")]
    seen: list[str] = []
    resp = await model(Recorder(stream_reply(chunks)), stream=True).complete(ASK, on_delta=seen.append)
    assert (resp.finish_reason, resp.message.text, resp.message.refusal, seen) == ("refusal", "", REFUSAL, [])


async def test_a_refusal_goes_back_in_the_assistant_messages_refusal_field() -> None:
    rec = Recorder(body_reply(completion({"content": "ok"})))
    history = (*ASK.messages, Message.assistant(refusal=REFUSAL), Message.user("Why not?"))
    await model(rec).complete(ModelRequest(messages=history))
    assert rec.bodies[0]["messages"][1] == {"role": "assistant", "content": None, "refusal": REFUSAL}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_that_quotes_the_key_is_redacted(stream: bool) -> None:
    said = f"I won't use {KEY}."
    if stream:
        reply = stream_reply([chunk({"refusal": said[:9]}), chunk({"refusal": said[9:]}), chunk({}, "stop")])
    else:
        reply = body_reply(completion({"content": None, "refusal": said}))
    resp = await model(Recorder(reply), stream=stream).complete(ASK)
    assert resp.message.refusal == "I won't use <redacted>."


def test_a_message_without_a_refusal_dumps_as_before() -> None:
    """Journals store full dumps of responses: a new field left unset must not appear in them."""
    plain = ModelResponse.text("hi").model_dump(mode="json")
    assert "refusal" not in plain["message"]
    assert plain["message"] == {
        "role": "assistant",
        "text": "hi",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
        "is_error": False,
        "tainted": False,
    }
    refused = ModelResponse.refused(REFUSAL)
    assert ModelResponse.model_validate(refused.model_dump(mode="json")) == refused
    assert ModelResponse.model_validate(plain).message.refusal is None


async def test_an_agent_whose_model_refuses_stops_with_stop_reason_refusal() -> None:
    rec = Recorder(body_reply(completion({"content": None, "refusal": REFUSAL})))
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    result = await loom.Agent(model=model(rec), name="refuser").start("Do the bad thing", runtime=rt)
    rt.close()
    assert (result.stop_reason, result.output, result.turns) == ("refusal", REFUSAL, 1)


# -- 3. names split across fragments ---------------------------------------------------------------


def call_delta(index: int, **fields: Any) -> dict[str, Any]:
    fn = {k: v for k, v in fields.items() if k in ("name", "arguments")}
    out: dict[str, Any] = {"index": index, "function": fn}
    if "id" in fields:
        out["id"] = fields["id"]
    return chunk({"tool_calls": [out]})


async def test_a_function_name_split_across_fragments_is_joined() -> None:
    chunks = [
        call_delta(0, id="call_w", name="get_", arguments=""),
        call_delta(0, name="weather"),
        call_delta(0, arguments='{"city": "Oslo"}'),
        chunk({}, "tool_calls"),
    ]
    resp = await model(Recorder(stream_reply(chunks)), stream=True).complete(ASK)
    assert resp.message.tool_calls == (ToolCall(id="call_w", name="get_weather", arguments={"city": "Oslo"}),)


async def test_a_name_and_id_resent_whole_in_every_chunk_are_not_doubled() -> None:
    chunks = [
        call_delta(0, id="call_w", name="weather", arguments='{"city": '),
        call_delta(0, id="call_w", name="weather", arguments='"Oslo"}'),
        chunk({}, "tool_calls"),
    ]
    resp = await model(Recorder(stream_reply(chunks)), stream=True).complete(ASK)
    assert resp.message.tool_calls == (ToolCall(id="call_w", name="weather", arguments={"city": "Oslo"}),)


# -- 4. legacy function_call -----------------------------------------------------------------------


async def test_a_legacy_function_call_body_is_one_tool_call() -> None:
    legacy = {"content": None, "function_call": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    resp = await model(Recorder(body_reply(completion(legacy, "function_call")))).complete(ASK)
    assert resp.finish_reason == "tool_calls"
    assert resp.message.tool_calls == (ToolCall(id="call_0", name="weather", arguments={"city": "Oslo"}),)


async def test_legacy_function_call_deltas_are_one_tool_call() -> None:
    chunks = [
        chunk({"role": "assistant", "content": None, "function_call": {"name": "wea", "arguments": ""}}),
        chunk({"function_call": {"name": "ther"}}),
        chunk({"function_call": {"arguments": '{"city"'}}),
        chunk({"function_call": {"arguments": ': "Oslo"}'}}),
        chunk({}, "function_call"),
    ]
    resp = await model(Recorder(stream_reply(chunks)), stream=True).complete(ASK)
    assert resp.finish_reason == "tool_calls"
    assert resp.message.tool_calls == (ToolCall(id="call_0", name="weather", arguments={"city": "Oslo"}),)


# -- 5. errors inside a 200 body or a stream -------------------------------------------------------

ERRORS = [
    ({"code": "invalid_api_key", "type": "invalid_request_error"}, 401),
    ({"code": None, "type": "authentication_error"}, 401),
    ({"code": "permission_denied"}, 403),
    ({"code": "model_not_found", "type": "invalid_request_error"}, 404),
    ({"code": "context_length_exceeded", "type": "invalid_request_error"}, 400),
    ({"code": "insufficient_quota", "type": "insufficient_quota"}, 402),
    ({"code": "rate_limit_exceeded", "type": "requests"}, 429),
    ({"code": None, "type": "server_error"}, 500),
    ({"code": "overloaded"}, 503),
    ({"code": 503, "type": "overloaded_error"}, 503),
    ({"code": "429"}, 429),
    ({"code": "something_new", "type": "also_new"}, 500),
]


@pytest.mark.parametrize(("error", "status"), ERRORS)
@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_reported_with_status_200_is_classified_by_code_and_type(
    error: dict[str, Any], status: int, stream: bool
) -> None:
    doc = {"error": {"message": "It went wrong.\nSee the docs.", **error}}
    reply = stream_reply([chunk({"content": "par"}), doc]) if stream else body_reply(doc)
    with pytest.raises(ProviderHTTPError) as info:
        await model(Recorder(reply), stream=stream).complete(ASK)
    assert info.value.status_code == status
    assert info.value.retryable == (status == 429 or status >= 500)
    assert str(info.value).endswith("It went wrong. See the docs.")


async def test_an_invalid_key_in_a_200_body_fails_the_run_without_a_retry() -> None:
    doc = {
        "error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}
    }
    rec = Recorder(body_reply(doc))
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    run = loom.Agent(model=model(rec), name="bad-key").start("hi", runtime=rt)
    with pytest.raises(ProviderHTTPError) as info:
        await run
    rt.close()
    assert info.value.status_code == 401 and len(rec.bodies) == 1


def test_the_classification_table_is_lower_case_and_anthropic_types_keep_their_status() -> None:
    assert all(key == key.lower() for key in ERROR_STATUS)
    anthropic = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403}
    anthropic |= {"not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429}
    anthropic |= {"api_error": 500, "timeout_error": 504, "overloaded_error": 529}
    assert {kind: error_status({"type": kind}) for kind in anthropic} == anthropic
    assert error_status("not an object") == 500 and error_status({"code": True}) == 500


# -- 6. max_completion_tokens ----------------------------------------------------------------------


@pytest.mark.parametrize("field", MAX_TOKENS_FIELDS)
async def test_the_output_cap_goes_in_the_chosen_field(field: str) -> None:
    rec = Recorder(body_reply(completion({"content": "ok"})))
    await model(rec, max_tokens=64, max_tokens_field=field).complete(ASK)
    await model(rec, max_tokens_field=field).complete(ModelRequest(messages=ASK.messages, max_tokens=7))
    assert [b.get(field) for b in rec.bodies] == [64, 7]
    assert [set(MAX_TOKENS_FIELDS) & set(b) for b in rec.bodies] == [{field}, {field}]


async def test_max_completion_tokens_is_the_default_field() -> None:
    rec = Recorder(body_reply(completion({"content": "ok"})))
    await model(rec, max_tokens=64).complete(ASK)
    assert rec.bodies[0]["max_completion_tokens"] == 64 and "max_tokens" not in rec.bodies[0]


def test_an_unknown_cap_field_is_a_usage_error_naming_the_choices() -> None:
    with pytest.raises(UsageError, match=r"max_tokens_field must be one of 'max_completion_tokens', 'max_tokens'"):
        OpenAIChat("m", api_key=KEY, max_tokens_field="max_output_tokens")


# -- 7. rate-limit reset headers -------------------------------------------------------------------


def test_parse_duration_reads_go_durations() -> None:
    cases = {"1s": 1.0, "6m0s": 360.0, "20ms": 0.02, "1h2m3.5s": 3723.5, "0.5s": 0.5, "2": 2.0, "150us": 0.00015}
    assert {text: parse_duration(text) for text in cases} == pytest.approx(cases)
    assert [parse_duration(t) for t in ("", "soon", "1x", "s", "-1s", "1s2", "m1s")] == [None] * 7


def test_rate_limit_reset_headers_apply_to_a_429_without_retry_after() -> None:
    both = {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}
    assert parse_retry_after(both, rate_limited=True) == pytest.approx(0.02)  # nothing says which: the sooner
    tokens_out = {**both, "x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "0"}
    assert parse_retry_after(tokens_out, rate_limited=True) == pytest.approx(0.02)
    requests_out = {**both, "x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "900"}
    assert parse_retry_after(requests_out, rate_limited=True) == pytest.approx(360.0)
    assert parse_retry_after({**both, "retry-after": "3"}, rate_limited=True) == 3.0
    assert parse_retry_after(both) is None  # not a 429: the headers come with every answer
    assert parse_retry_after({"x-ratelimit-reset-tokens": "later"}, rate_limited=True) is None


async def test_a_429_with_only_reset_headers_carries_retry_after() -> None:
    headers = {"x-ratelimit-reset-tokens": "1.5s", "x-ratelimit-remaining-tokens": "0"}
    doc = {"error": {"message": "Rate limit reached", "type": "tokens", "code": "rate_limit_exceeded"}}
    with pytest.raises(ProviderHTTPError) as info:
        await model(Recorder(body_reply(doc, 429, headers))).complete(ASK)
    assert (info.value.status_code, info.value.retryable, info.value.retry_after) == (429, True, 1.5)
    assert str(info.value).endswith("(retry after 1.5 s)")


# -- 8. is_error on the OpenAI wire ----------------------------------------------------------------


async def test_an_error_tool_result_says_it_is_an_error() -> None:
    call = ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})
    results = [
        Message.tool(call, "the service is down", is_error=True),
        Message.tool(call, "Error: the tool 'weather' failed: boom", is_error=True),
        Message.tool(call, "12 C"),
        Message.tool(call, "error rate: 3%"),  # not an error result: sent as is
    ]
    rec = Recorder(body_reply(completion({"content": "ok"})))
    await model(rec).complete(ModelRequest(messages=(*ASK.messages, Message.assistant("", [call]), *results)))
    assert [m["content"] for m in rec.bodies[0]["messages"][2:]] == [
        "Error: the service is down",
        "Error: the tool 'weather' failed: boom",
        "12 C",
        "error rate: 3%",
    ]


# -- 9. one-line error details ---------------------------------------------------------------------


def test_error_detail_folds_whitespace_into_one_line() -> None:
    body = json.dumps({"error": {"message": "Invalid schema:\n  - 'x' is required\r\n\tsee docs", "type": "bad"}})
    assert error_detail(body) == "bad: Invalid schema: - 'x' is required see docs"
    assert error_detail(json.dumps({"error": "line one\nline two"})) == "line one line two"
    assert error_detail(json.dumps({"detail": "a\n\nb"})) == "a b"


async def test_a_multi_line_http_error_message_is_one_line() -> None:
    doc = {"error": {"message": "Bad request.\nField 'messages' is invalid.", "type": "invalid_request_error"}}
    with pytest.raises(ProviderHTTPError) as info:
        await model(Recorder(body_reply(doc, 400))).complete(ASK)
    assert "\n" not in str(info.value)
    assert str(info.value).endswith("invalid_request_error: Bad request. Field 'messages' is invalid.")
