"""``OpenAIResponses`` against the official SDK as the oracle.

Every request body loom builds is validated strictly against the SDK's ``ResponseCreateParams``
TypedDicts; streams and bodies are rendered from the SDK's own event and ``Response`` models and
read by both loom and the SDK's client (its stream accumulator included), with Hypothesis cutting
the text, the arguments and the bytes at random; errors, retries and cut streams behave as on the
other wires; reasoning items come back on the next turn; an ``Agent`` runs a tool loop with an
approval through it.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    Response,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseTextDeltaEvent,
)
from openai.types.responses.response_error import ResponseError

import loom_nb as loom
from loom_nb.agent.output import OutputSpec
from loom_nb.errors import ProviderHTTPError, ProviderProtocolError
from loom_nb.messages import Message, ModelRequest, ModelResponse, OutputFormat, ReasoningBlock, ToolCall, ToolSpec
from loom_nb.providers.http import ERROR_STATUS
from loom_nb.providers.redaction import MASK
from loom_nb.providers.responses import OpenAIResponses
from loom_nb.testing import FakeClock, SequentialIds
from tests.providers.responses_oracle import (
    ParamsError,
    SdkAnswer,
    SdkCall,
    answer_body,
    answer_bytes,
    check_params,
    sdk_body,
    sdk_events,
    sdk_final,
    sse_bytes,
    sse_transport,
)

KEY = "sk-test-responses-0123456789"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = ToolSpec(name="weather", description="The weather in a city.", parameters=CITY)
ASK = ModelRequest(messages=(Message.system("Be brief."), Message.user("Weather in Oslo?")), tools=(WEATHER,))


def provider(transport: httpx.AsyncBaseTransport, **options: Any) -> OpenAIResponses:
    return OpenAIResponses("gpt-test", api_key=KEY, transport=transport, **options)


def answer(status: int, body: str | bytes, ctype: str = "application/json", **headers: str) -> httpx.MockTransport:
    content = body.encode() if isinstance(body, str) else body
    return httpx.MockTransport(
        lambda r: httpx.Response(status, headers={"content-type": ctype, **headers}, content=content)
    )


def sdk_calls(final: Response) -> list[tuple[str, str, Any]]:
    return [(o.call_id, o.name, json.loads(o.arguments or "{}")) for o in final.output if o.type == "function_call"]


def loom_calls(response: ModelResponse) -> list[tuple[str, str, Any]]:
    return [(c.id, c.name, c.arguments) for c in response.message.tool_calls]


def sdk_finish(final: Response) -> str:
    if final.status == "incomplete":
        reason = final.incomplete_details.reason if final.incomplete_details else None
        return {"max_output_tokens": "length"}.get(reason or "", reason or "incomplete")
    return "tool_calls" if sdk_calls(final) else "stop"


def assert_matches_sdk(response: ModelResponse, final: Response) -> None:
    assert response.message.text == final.output_text
    assert loom_calls(response) == sdk_calls(final)
    assert response.finish_reason == sdk_finish(final)
    assert final.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        final.usage.input_tokens,
        final.usage.output_tokens,
    )
    assert response.response_id == final.id
    reasoning = [o for o in final.output if o.type == "reasoning"]
    items = [b.item for b in response.message.reasoning]
    assert all(b.type == "reasoning_item" for b in response.message.reasoning)
    assert [r["id"] for r in items if r] == [r.id for r in reasoning]
    assert [r.get("encrypted_content") for r in items if r] == [r.encrypted_content for r in reasoning]


# --------------------------------------------------------------------------------------------------
# request bodies, validated strictly against the SDK's types


def transcript_with_everything() -> ModelRequest:
    first = ToolCall(id="call_a", name="weather", arguments={"city": "Oslo"})
    broken = ToolCall(id="call_b", name="weather", raw_arguments='{"city": "Ber')
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two cities."}]}
    assistant = Message(
        role="assistant",
        text="Checking.",
        tool_calls=(first, broken),
        reasoning=(ReasoningBlock(type="reasoning_item", item=reasoning),),
    )
    return ModelRequest(
        messages=(
            Message.system("Be brief."),
            Message.system("Use Celsius."),
            Message.user("Weather in Oslo and Bergen?"),
            assistant,
            Message.tool(first, "12C", tainted=True),
            Message.tool(broken, "arguments are not JSON", is_error=True),
            Message.assistant(""),
            Message.user("And tomorrow?"),
        ),
        tools=(WEATHER, ToolSpec(name="clock")),
        max_tokens=256,
        temperature=0.2,
    )


TYPED = ModelRequest(
    messages=(Message.user("Weather in Oslo?"),),
    output=OutputFormat(name="Weather", json_schema=OutputSpec(list[int]).wire_schema),
)


@pytest.mark.parametrize("options", [{}, {"stream": False}, {"store": False}, {"max_tokens": 99}])
def test_every_request_body_passes_the_sdk_types_strictly(options: dict[str, Any]) -> None:
    model = provider(answer(200, "{}"), **options)
    for request in (ASK, transcript_with_everything(), ModelRequest(messages=(Message.user("hi"),)), TYPED):
        check_params(model._build_body(request))


def test_a_typed_answer_is_asked_for_as_a_strict_text_format() -> None:
    body = provider(answer(200, "{}"))._build_body(TYPED)
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "Weather", "schema": TYPED.output.json_schema, "strict": True}
    }


def test_the_body_carries_instructions_input_items_and_function_tools() -> None:
    body = provider(answer(200, "{}"))._build_body(transcript_with_everything())
    assert body["instructions"] == "Be brief.\n\nUse Celsius."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "Weather in Oslo and Bergen?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two cities."}]},
        {"type": "message", "role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "call_b", "name": "weather", "arguments": '{"city": "Ber'},
        {"type": "function_call_output", "call_id": "call_a", "output": "12C"},
        {"type": "function_call_output", "call_id": "call_b", "output": "arguments are not JSON"},
        {"type": "message", "role": "assistant", "content": ""},
        {"type": "message", "role": "user", "content": "And tomorrow?"},
    ]
    assert body["tools"][1] == {
        "type": "function",
        "name": "clock",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    }
    assert (body["max_output_tokens"], body["temperature"], body["stream"]) == (256, 0.2, True)
    assert "store" not in body and "include" not in body


def test_store_false_asks_for_encrypted_reasoning() -> None:
    body = provider(answer(200, "{}"), store=False, stream=False)._build_body(ASK)
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert "stream" not in body


def test_the_validator_rejects_unknown_keys_at_any_depth_missing_keys_and_wrong_types() -> None:
    good = provider(answer(200, "{}"))._build_body(transcript_with_everything())
    check_params(good)

    def broken(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        body = json.loads(json.dumps(good))
        edit(body)
        return body

    cases = [
        lambda b: b.update(max_tokens=5),  # chat-completions name, not a Responses field
        lambda b: b["tools"][0].update(function={"name": "x"}),  # chat-completions tool shape
        lambda b: b["input"][1]["summary"][0].update(bogus=1),  # three levels down
        lambda b: b["input"][3].update(tool_call_id="call_a"),
        lambda b: b["input"][3].pop("call_id"),
        lambda b: b["tools"][0].update(strict="no"),
        lambda b: b.update(max_output_tokens=True),
        lambda b: b["input"][0].update(role="robot"),
    ]
    for edit in cases:
        with pytest.raises(ParamsError):
            check_params(broken(edit))


# --------------------------------------------------------------------------------------------------
# streams and bodies rendered by the SDK, read by loom and by the SDK


def splits(text: str) -> st.SearchStrategy[list[str]]:
    """``text`` cut at random places into deltas (empty deltas allowed)."""
    return st.lists(st.integers(0, len(text)), max_size=6).map(
        lambda cuts: [text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True)]
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@st.composite
def answers(draw: st.DrawFn) -> SdkAnswer:
    text = draw(st.text(max_size=40))
    calls = []
    for j in range(draw(st.integers(0, 3))):
        arguments = json.dumps(draw(st.dictionaries(st.text(max_size=6), json_values, max_size=3)), ensure_ascii=False)
        name = draw(st.sampled_from(["weather", "search", "lookup_2"]))
        calls.append(SdkCall(f"call_{j}_{draw(st.integers(0, 999))}", name, draw(splits(arguments))))
    reasoning = draw(st.none() | st.text(max_size=12).flatmap(splits))
    incomplete = draw(st.sampled_from([None, None, "max_output_tokens", "content_filter"]))
    return SdkAnswer(
        text=draw(splits(text)) if text else [],
        calls=calls,
        reasoning=reasoning,
        usage=(draw(st.integers(0, 10**6)), draw(st.integers(0, 10**5))),
        incomplete=incomplete,
        final_output=draw(st.booleans()),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer_=answers(), cuts=st.lists(st.integers(0, 5000), max_size=8))
@pytest.mark.slow
async def test_a_stream_reads_as_the_sdk_reads_it(answer_: SdkAnswer, cuts: list[int]) -> None:
    data = answer_bytes(answer_)
    deltas: list[str] = []
    response = await provider(sse_transport(data, cuts)).complete(ASK, on_delta=deltas.append)
    final = await sdk_final(data, cuts)
    assert_matches_sdk(response, final)
    assert "".join(deltas) == "".join(answer_.text)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer_=answers())
async def test_a_body_reads_as_the_sdk_reads_it(answer_: SdkAnswer) -> None:
    data = answer_body(answer_)
    deltas: list[str] = []
    response = await provider(answer(200, data), stream=False).complete(ASK, on_delta=deltas.append)
    assert_matches_sdk(response, await sdk_body(data))
    assert "".join(deltas) == response.message.text


async def test_reasoning_summaries_are_not_streamed_as_text_and_unknown_events_are_ignored() -> None:
    events = sdk_events(SdkAnswer(text=["Hi"], reasoning=["secret ", "thoughts"]))
    data = sse_bytes(events) + b""
    data = data.replace(b"event: response.in_progress", b": keep-alive\nevent: response.in_progress", 1)
    data = b'event: response.future_thing\ndata: {"type": "response.future_thing", "x": 1}\n\n' + data
    deltas: list[str] = []
    response = await provider(sse_transport(data)).complete(ASK, on_delta=deltas.append)
    assert deltas == ["Hi"] and response.message.text == "Hi"
    block = response.message.reasoning[0]
    assert block.item is not None and block.item["summary"] == [{"type": "summary_text", "text": "secret thoughts"}]
    assert block.text == "secret thoughts"


async def test_the_reasoning_item_round_trips_through_the_journal_form() -> None:
    data = answer_bytes(SdkAnswer(calls=[SdkCall("call_1", "weather", ['{"city": "Oslo"}'])], reasoning=["r"]))
    response = await provider(sse_transport(data)).complete(ASK)
    journaled = json.loads(json.dumps(response.model_dump(mode="json", exclude_defaults=True)))
    again = ModelResponse.model_validate(journaled)
    assert again == response
    follow_up = ModelRequest(messages=(*ASK.messages, again.message, Message.tool(again.message.tool_calls[0], "12C")))
    body = provider(answer(200, "{}"))._build_body(follow_up)
    check_params(body)
    assert [i["type"] for i in body["input"]] == ["message", "reasoning", "function_call", "function_call_output"]
    assert body["input"][1]["encrypted_content"] == "gAAAA-opaque"


# --------------------------------------------------------------------------------------------------
# errors, retries, cut streams


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (500, True), (503, True), (400, False), (401, False)])
async def test_http_errors_are_typed_with_retry_after(status: int, retryable: bool) -> None:
    body = json.dumps({"error": {"message": "nope", "type": "some_error", "code": None}})
    transport = answer(status, body, **{"retry-after": "3"})
    with pytest.raises(ProviderHTTPError) as info:
        await provider(transport).complete(ASK)
    err = info.value
    assert (err.status_code, err.retryable, err.retry_after) == (status, retryable, 3.0)
    assert "nope" in str(err) and "/responses returned HTTP" in str(err)


@pytest.mark.parametrize(
    ("code", "status"),
    [("rate_limit_exceeded", 429), ("server_error", 500), ("invalid_prompt", 400), ("503", 503), (None, 500)],
)
async def test_an_error_event_is_a_typed_error_by_its_code(code: str | None, status: int) -> None:
    events = sdk_events(SdkAnswer(text=["Hel", "lo"]))[:5]
    error = ResponseErrorEvent(code=code, message="went wrong", param=None, sequence_number=5, type="error")
    with pytest.raises(ProviderHTTPError) as info:
        await provider(sse_transport(sse_bytes([*events, error]))).complete(ASK)
    assert info.value.status_code == status and info.value.retryable == (status >= 429)
    assert "went wrong" in str(info.value) and (code or "(no code)") in str(info.value)


async def test_a_failed_response_is_a_typed_error_streamed_or_not() -> None:
    events = sdk_events(SdkAnswer(text=["partial"]))
    failed = events[-1].response.model_copy(  # type: ignore[attr-defined]
        update={"status": "failed", "error": ResponseError(code="rate_limit_exceeded", message="too fast")}
    )
    event = ResponseFailedEvent(response=failed, sequence_number=99, type="response.failed")
    with pytest.raises(ProviderHTTPError, match="rate_limit_exceeded: too fast") as info:
        await provider(sse_transport(sse_bytes([*events[:-1], event]))).complete(ASK)
    assert info.value.status_code == 429 and info.value.retryable
    body = failed.model_copy(update={"error": ResponseError(code="invalid_prompt", message="no")})
    with pytest.raises(ProviderHTTPError, match="invalid_prompt") as info:
        await provider(answer(200, body.model_dump_json()), stream=False).complete(ASK)
    assert info.value.status_code == 400 and not info.value.retryable


def test_every_error_code_the_sdk_knows_has_a_status() -> None:
    codes = typing.get_args(ResponseError.model_fields["code"].annotation)
    assert codes and not set(codes) - set(ERROR_STATUS)


async def test_a_200_error_body_is_a_typed_error() -> None:
    body = json.dumps({"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}})
    with pytest.raises(ProviderHTTPError, match="insufficient_quota: quota") as info:
        await provider(answer(200, body), stream=False).complete(ASK)
    assert info.value.status_code == 402 and not info.value.retryable  # billing: waiting does not help


@pytest.mark.parametrize("keep", [0, 3, 7, -1])
async def test_a_stream_cut_before_its_terminal_event_raises(keep: int) -> None:
    events = sdk_events(SdkAnswer(text=["Hel", "lo"], calls=[SdkCall("c", "weather", ["{}"])]))
    data = sse_bytes(events[: keep if keep >= 0 else len(events) - 1])
    with pytest.raises(ProviderProtocolError, match=r"ended before response\.completed"):
        await provider(sse_transport(data)).complete(ASK)


async def test_a_malformed_event_and_a_nameless_call_are_protocol_errors() -> None:
    events = sdk_events(SdkAnswer(text=["Hi"]))
    data = sse_bytes(events).replace(b'"delta":"Hi"', b'"delta":"Hi', 1)
    with pytest.raises(ProviderProtocolError, match="malformed JSON in event"):
        await provider(sse_transport(data)).complete(ASK)
    delta = ResponseTextDeltaEvent(
        content_index=0,
        delta="x",
        item_id="m",
        logprobs=[],
        output_index=0,
        sequence_number=0,
        type="response.output_text.delta",
    )
    args = b'event: a\ndata: {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{}"}\n\n'
    done = b'event: d\ndata: {"type": "response.completed", "response": {"id": "r", "output": null}}\n\n'
    with pytest.raises(ProviderProtocolError, match="no call_id or name"):
        await provider(sse_transport(sse_bytes([delta]) + args + done)).complete(ASK)


async def test_an_incomplete_response_returns_what_came_with_its_reason() -> None:
    data = answer_bytes(SdkAnswer(text=["Once upon"], incomplete="max_output_tokens"))
    response = await provider(sse_transport(data)).complete(ASK)
    assert (response.message.text, response.finish_reason) == ("Once upon", "length")


async def test_the_key_in_an_error_event_is_redacted() -> None:
    error = ResponseErrorEvent(code="server_error", message=f"bad key {KEY}", sequence_number=0, type="error")
    with pytest.raises(ProviderHTTPError) as info:
        await provider(sse_transport(sse_bytes([error]))).complete(ASK)
    assert KEY not in str(info.value) and KEY not in info.value.body


async def test_the_key_in_text_arguments_reasoning_and_a_failed_response_is_redacted() -> None:
    half = len(KEY) // 2
    planted = SdkAnswer(
        text=["The key is ", KEY[:5], KEY[5:half], KEY[half:] + "."],
        calls=[SdkCall("call_k", "weather", ['{"city": "', KEY[:half], KEY[half:] + '"}'])],
        reasoning=[f"I saw {KEY}"],
    )
    deltas: list[str] = []
    response = await provider(sse_transport(answer_bytes(planted))).complete(ASK, on_delta=deltas.append)
    assert KEY not in response.model_dump_json() and KEY not in "".join(deltas)
    assert response.message.tool_calls[0].arguments == {"city": MASK}
    events = sdk_events(SdkAnswer(text=["x"]))
    failed = events[-1].response.model_copy(  # type: ignore[attr-defined]
        update={"status": "failed", "error": ResponseError(code="server_error", message=f"key {KEY} broke")}
    )
    event = ResponseFailedEvent(response=failed, sequence_number=9, type="response.failed")
    with pytest.raises(ProviderHTTPError) as info:
        await provider(sse_transport(sse_bytes([*events[:-1], event]))).complete(ASK)
    assert KEY not in str(info.value) and KEY not in info.value.body and MASK in str(info.value)


# --------------------------------------------------------------------------------------------------
# an agent tool loop: approval, tool, final answer


@loom.tool(needs_approval=True)
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"{city}: 12C, light rain"


async def test_an_agent_asks_approval_runs_the_tool_and_answers() -> None:
    script = [
        httpx.Response(429, headers={"retry-after": "0"}, json={"error": {"message": "slow down"}}),
        httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=answer_bytes(
                SdkAnswer(
                    text=["Let me ", "check."],
                    calls=[SdkCall("call_w", "weather", ['{"ci', 'ty": "Oslo"}'])],
                    reasoning=["Need the tool."],
                    usage=(30, 9),
                )
            ),
        ),
        httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=answer_bytes(SdkAnswer(text=["It is 12C ", "in Oslo."], usage=(55, 11), id="resp_0002")),
        ),
    ]
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/responses"
        bodies.append(json.loads(request.content))
        return script.pop(0)

    rt = loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())
    model = loom.OpenAIResponses("gpt-test", api_key=KEY, transport=httpx.MockTransport(handler))
    agent = loom.Agent(model=model, tools=[weather], system="Be brief.", name="responses-agent")
    run = agent.start("Weather in Oslo?", runtime=rt)
    await run.wait(until="paused")
    (gate,) = run.gates
    assert (gate.tool, gate.arguments) == ("weather", {"city": "Oslo"})
    gate.approve()
    result = await run
    assert result.output == "It is 12C in Oslo."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (85, 20)
    assert not script and len(bodies) == 3
    for body in bodies:
        check_params(body)
    assert bodies[0] == bodies[1]  # the 429 was retried with the same request
    last = bodies[2]
    assert last["instructions"] == "Be brief."
    assert [i["type"] for i in last["input"]] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert last["input"][1]["id"] == "rs_0001"
    assert last["input"][3] == {
        "type": "function_call",
        "call_id": "call_w",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
    }
    assert last["input"][4] == {"type": "function_call_output", "call_id": "call_w", "output": "Oslo: 12C, light rain"}
    assert (await rt.replay(run.id)).reproduced
    rt.close()
