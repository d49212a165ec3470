"""The official ``anthropic`` SDK as the oracle of the Anthropic messages wire (a dev dependency only).

Requests: every body ``AnthropicMessages`` sends is checked strictly (no unknown key at any depth,
no missing required key, every literal in its set) against the SDK's request types
``MessageCreateParamsStreaming`` / ``MessageCreateParamsNonStreaming``: a representative set, then
random transcripts (Hypothesis).

Responses: streams built from the SDK's own event models (``model_dump_json()``) go through loom and
through the SDK's own SSE decoder and accumulator (``accumulate_event``, what ``MessageStream``
uses); text, tool calls, thinking blocks with signatures, stop reason, usage and id must agree,
except where loom differs on purpose (``docs/providers.md``, "Anthropic messages").
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic._streaming import SSEDecoder
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import (
    InputJSONDelta,
    MessageDeltaUsage,
    OutputTokensDetails,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import Message as SDKMessage
from anthropic.types import Usage as SDKUsage
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
from anthropic.types.raw_message_delta_event import Delta
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, ToolSpec
from loom_nb.providers import AnthropicMessages
from tests.providers.typed_dict_check import violations

KEY = "sk-ant-oracle-0a1b2c3d4e5f"
#: loom's stop-reason vocabulary (the OpenAI one); reasons not listed pass through unchanged.
STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
STOP["refusal"] = "refusal"  # kept: a refusal is not an answer (the same on every wire)
#: Top-level keys loom sends that the SDK's types (API version 2026-10-21) do not have; loom pins
#: ``anthropic-version: 2023-06-01``, which takes them. Documented in docs/providers.md.
OLDER_VERSION_KEYS = {"temperature"}


# --------------------------------------------------------------------------------------------------
# requests


def sdk_violations(body: dict[str, Any]) -> list[str]:
    """What the SDK's request types refuse in ``body`` (the streaming or non-streaming params)."""
    params = MessageCreateParamsStreaming if body.get("stream") is True else MessageCreateParamsNonStreaming
    return violations(body, params)


async def sent_body(request: ModelRequest, **options: Any) -> dict[str, Any]:
    """The JSON body ``AnthropicMessages`` sends for ``request``."""
    bodies: list[dict[str, Any]] = []

    def handle(r: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(r.content))
        return httpx.Response(200, json={"content": [], "stop_reason": "end_turn"})

    model = AnthropicMessages("claude-test", api_key=KEY, transport=httpx.MockTransport(handle), **options)
    await model.complete(request)
    return bodies[0]


CALL_A = ToolCall(id="toolu_a", name="weather", arguments={"city": "Oslo", "days": [1, 2]})
CALL_B = ToolCall(id="toolu_b", name="now", raw_arguments="{not json")
THOUGHT = ReasoningBlock(text="Two calls.", signature="c2lnbmF0dXJl")
HIDDEN = ReasoningBlock(type="redacted_thinking", data="ZW5jcnlwdGVk")
TRANSCRIPT = ModelRequest(
    messages=(
        Message.system("Be brief."),
        Message.user("Weather?"),
        Message(role="assistant", text="Checking.", tool_calls=(CALL_A, CALL_B), reasoning=(THOUGHT, HIDDEN)),
        Message.tool(CALL_A, "12C"),
        Message.tool(CALL_B, "arguments were not JSON", is_error=True),
        Message.user("And tomorrow?"),
        Message.assistant("Rain."),
        Message.user("Thanks."),
    ),
    tools=(
        ToolSpec(
            name="weather",
            description="The weather.",
            parameters={
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(name="now"),
    ),
    max_tokens=3000,
)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    "thinking", [None, {"type": "enabled", "budget_tokens": 2048}, {"type": "adaptive"}, {"type": "disabled"}]
)
async def test_representative_bodies_have_nothing_the_sdk_types_refuse(
    stream: bool, thinking: dict[str, Any] | None
) -> None:
    body = await sent_body(TRANSCRIPT, stream=stream, thinking=thinking)
    assert sdk_violations(body) == []
    # The set really is representative: every block kind loom sends is in it.
    kinds = {b["type"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]}
    assert kinds == {"thinking", "redacted_thinking", "text", "tool_use", "tool_result"}
    assert {"system", "tools", "max_tokens"} <= body.keys() and body.get("stream", False) is stream
    assert any(b.get("is_error") for m in body["messages"] for b in m["content"] if isinstance(b, dict))
    assert ("thinking" in body) is (thinking is not None)


async def test_temperature_is_the_one_key_beyond_the_sdk_types() -> None:
    body = await sent_body(TRANSCRIPT.model_copy(update={"temperature": 0.2}))
    found = sdk_violations(body)
    assert len(found) == 1 and found[0].startswith("$: unknown key 'temperature' for MessageCreateParamsStreaming")
    assert set(body) - set(MessageCreateParamsStreaming.__annotations__) == OLDER_VERSION_KEYS


def test_the_checker_refuses_an_unknown_nested_key_and_other_mismatches() -> None:
    good = {
        "model": "claude-test",
        "max_tokens": 100,
        "stream": True,
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "t", "signature": "s"},
                    {"type": "tool_use", "id": "t1", "name": "n", "input": {"a": 1}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ],
        "tools": [{"name": "n", "input_schema": {"type": "object", "properties": {}}}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
    }
    assert sdk_violations(good) == []

    def broken(path: list[Any], key: str, value: Any) -> list[str]:
        body = copy.deepcopy(good)
        target: Any = body
        for step in path:
            target = target[step]
        target[key] = value
        return sdk_violations(body)

    found = broken(["messages", 1, "content", 0], "cache", True)
    assert found == [
        "$.messages[1].content[0]: unknown key 'cache' for ThinkingBlockParam (known: signature, thinking, type)"
    ]
    assert broken(["messages", 2, "content", 0], "is_eror", True)[0].startswith(
        "$.messages[2].content[0]: unknown key 'is_eror' for ToolResultBlockParam"
    )
    assert broken(["tools", 0], "parameters", {})[0].startswith("$.tools[0]: unknown key 'parameters' for ToolParam")
    assert broken(["thinking"], "budget", 1)[0].startswith("$.thinking: unknown key 'budget'")
    assert broken([], "temprature", 1)[0].startswith("$: unknown key 'temprature'")
    no_signature = copy.deepcopy(good)
    del no_signature["messages"][1]["content"][0]["signature"]
    assert sdk_violations(no_signature) == [
        "$.messages[1].content[0]: missing required key 'signature' of ThinkingBlockParam"
    ]
    assert broken(["messages", 1, "content", 1], "type", "tool_call")  # a literal outside its set
    assert broken(["messages", 0], "content", 5)  # neither a string nor blocks
    assert broken([], "max_tokens", "100") == ["$.max_tokens: '100' is not a int"]


names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(names, json_values, max_size=3)
reasoning_blocks = st.one_of(
    st.builds(ReasoningBlock, text=st.text(max_size=20), signature=st.text(min_size=1, max_size=12)),
    st.builds(ReasoningBlock, type=st.just("redacted_thinking"), data=st.text(min_size=1, max_size=12)),
    st.builds(ReasoningBlock, text=st.text(max_size=10)),  # no signature: not from this API, not sent
)


@st.composite
def transcripts(draw: st.DrawFn) -> ModelRequest:
    """Random transcripts: system, user and assistant turns, tool calls with their results."""
    messages: list[Message] = [Message.system(t) for t in draw(st.lists(st.text(max_size=10), max_size=2))]
    for turn in range(draw(st.integers(1, 4))):
        messages.append(Message.user(draw(st.text(max_size=12))))
        calls = tuple(
            ToolCall(id=f"toolu_{turn}_{j}", name=draw(names), arguments=draw(arguments))
            for j in range(draw(st.integers(0, 2)))
        )
        reasoning = tuple(draw(st.lists(reasoning_blocks, max_size=2)))
        messages.append(
            Message(role="assistant", text=draw(st.text(max_size=12)), tool_calls=calls, reasoning=reasoning)
        )
        messages += [Message.tool(c, draw(st.text(max_size=8)), is_error=draw(st.booleans())) for c in calls]
    tools = tuple(
        ToolSpec(name=n, description=d) for n, d in draw(st.lists(st.tuples(names, st.text(max_size=8)), max_size=2))
    )
    return ModelRequest(messages=tuple(messages), tools=tools, max_tokens=draw(st.none() | st.integers(4096, 9000)))


@settings(max_examples=60, deadline=None)
@given(
    request=transcripts(),
    stream=st.booleans(),
    thinking=st.sampled_from([None, {"type": "enabled", "budget_tokens": 1024}]),
)
@pytest.mark.slow
async def test_any_transcript_gives_a_body_the_sdk_types_accept(
    request: ModelRequest, stream: bool, thinking: dict[str, Any] | None
) -> None:
    assert sdk_violations(await sent_body(request, stream=stream, thinking=thinking)) == []


# --------------------------------------------------------------------------------------------------
# streams


def split(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at random places (every piece non-empty; no piece for empty text)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=4))) if len(text) > 1 else []
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


signatures = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", min_size=1, max_size=24
)
optional_count = st.none() | st.integers(0, 500)


@st.composite
def sdk_streams(draw: st.DrawFn) -> list[Any]:
    """The events of one streamed message, as the SDK's own models: thinking and redacted thinking,
    answer text split at random, up to three tool calls with their JSON one character per delta."""
    blocks: list[tuple[Any, list[Any]]] = []
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            thinking = [
                ThinkingDelta(type="thinking_delta", thinking=p) for p in split(draw, draw(st.text(max_size=40)))
            ]
            signature = SignatureDelta(type="signature_delta", signature=draw(signatures))
            blocks.append((ThinkingBlock(type="thinking", thinking="", signature=""), [*thinking, signature]))
        else:
            blocks.append((RedactedThinkingBlock(type="redacted_thinking", data=draw(signatures)), []))
    if draw(st.booleans()):
        text = [TextDelta(type="text_delta", text=p) for p in split(draw, draw(st.text(min_size=1, max_size=60)))]
        blocks.append((TextBlock(type="text", text=""), text))
    for j in range(draw(st.integers(0, 3))):
        raw = json.dumps(draw(arguments), ensure_ascii=draw(st.booleans()))
        deltas = [InputJSONDelta(type="input_json_delta", partial_json=c) for c in raw]
        blocks.append((ToolUseBlock(type="tool_use", id=f"toolu_{j}", name=draw(names), input={}), deltas))
    start_usage = SDKUsage(
        input_tokens=draw(st.integers(0, 5000)),
        output_tokens=1,
        cache_creation_input_tokens=draw(optional_count),
        cache_read_input_tokens=draw(optional_count),
    )
    output = draw(st.integers(1, 4000))
    details = draw(st.none() | st.builds(OutputTokensDetails, thinking_tokens=st.integers(0, output)))
    usage = MessageDeltaUsage(
        output_tokens=output,
        input_tokens=draw(optional_count),
        cache_read_input_tokens=draw(optional_count),
        output_tokens_details=details,
    )
    reason = draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"]))
    msg_id = draw(st.from_regex(r"msg_[A-Za-z0-9]{4,12}", fullmatch=True))
    return assemble(msg_id, start_usage, blocks, reason, usage)


def assemble(
    msg_id: str, start_usage: SDKUsage, blocks: list[tuple[Any, list[Any]]], reason: str, usage: Any
) -> list[Any]:
    """A whole stream, as the API sends it: message_start, a ping, each block's start, deltas and
    stop, message_delta (stop reason and final usage), message_stop."""
    message = SDKMessage(
        id=msg_id,
        type="message",
        role="assistant",
        model="claude-test",
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=start_usage,
    )
    events: list[Any] = [RawMessageStartEvent(type="message_start", message=message), "ping"]
    for index, (block, deltas) in enumerate(blocks):
        events.append(RawContentBlockStartEvent(type="content_block_start", index=index, content_block=block))
        events += [RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=d) for d in deltas]
        events.append(RawContentBlockStopEvent(type="content_block_stop", index=index))
    delta = Delta(stop_reason=reason, stop_sequence="STOP" if reason == "stop_sequence" else None)
    events.append(RawMessageDeltaEvent(type="message_delta", delta=delta, usage=usage))
    events.append(RawMessageStopEvent(type="message_stop"))
    return events


def wire_bytes(events: list[Any]) -> bytes:
    """The SSE bytes of ``events`` (``"ping"`` is the API's keep-alive event)."""
    out = []
    for e in events:
        if e == "ping":
            out.append('event: ping\ndata: {"type": "ping"}\n\n')
        else:
            out.append(f"event: {e.type}\ndata: {e.model_dump_json()}\n\n")
    return "".join(out).encode()


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(data)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def sdk_accumulate(chunks: list[bytes]) -> Any:
    """The SDK's final message for these bytes: its SSE decoder, then ``accumulate_event`` per event
    (pings skipped, as the SDK's ``Stream`` does)."""
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for sse in SSEDecoder().iter_bytes(iter(chunks)):
        if sse.event == "ping":
            continue
        snapshot = accumulate_event(event=sse.json(), current_snapshot=snapshot, json_bufs=json_bufs)
    return snapshot


async def loom_complete(chunks: list[bytes], *, stream: bool = True, body: Any = None) -> tuple[ModelResponse, str]:
    """loom's response for these bytes (or for a JSON ``body``), and the text it streamed."""

    async def content() -> AsyncIterator[bytes]:
        for c in chunks:
            yield c

    def handle(request: httpx.Request) -> httpx.Response:
        if body is not None:
            return httpx.Response(200, json=body)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content())

    deltas: list[str] = []
    model = AnthropicMessages("claude-test", api_key=KEY, transport=httpx.MockTransport(handle), stream=stream)
    response = await model.complete(ModelRequest(messages=(Message.user("hi"),)), on_delta=deltas.append)
    return response, "".join(deltas)


def assert_agrees_with_the_sdk(loom: ModelResponse, sdk: Any) -> None:
    """Field by field, loom's response against the SDK's accumulated message (differences on purpose
    spelled out: the stop-reason vocabulary, input usage counting cache writes and reads)."""
    content = sdk.content
    assert loom.message.text == "".join(b.text for b in content if b.type == "text")
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in loom.message.tool_calls] == [
        (b.id, b.name, b.input, None) for b in content if b.type == "tool_use"
    ]
    assert [(r.type, r.text, r.signature, r.data) for r in loom.message.reasoning] == [
        ("thinking", b.thinking, b.signature, "") if b.type == "thinking" else ("redacted_thinking", "", "", b.data)
        for b in content
        if b.type in ("thinking", "redacted_thinking")
    ]
    assert loom.finish_reason == STOP.get(sdk.stop_reason, sdk.stop_reason)
    u = sdk.usage
    assert loom.usage.input_tokens == u.input_tokens + (u.cache_creation_input_tokens or 0) + (
        u.cache_read_input_tokens or 0
    )
    assert loom.usage.output_tokens == u.output_tokens
    assert loom.usage.reasoning_tokens == (u.output_tokens_details.thinking_tokens if u.output_tokens_details else 0)
    assert loom.response_id == sdk.id


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=sdk_streams(), cuts=st.lists(st.integers(1, 4000), max_size=8))
@pytest.mark.slow
async def test_streams_assemble_as_the_sdk_accumulates_them(events: list[Any], cuts: list[int]) -> None:
    data = wire_bytes(events)
    chunks = chunked(data, cuts)
    sdk = sdk_accumulate(chunks)
    loom, streamed = await loom_complete(chunks)
    assert_agrees_with_the_sdk(loom, sdk)
    assert streamed == loom.message.text  # the answer only: thinking never reaches on_delta
    # The SDK's final message, read back as a non-streamed body, gives loom the same response.
    as_body, _ = await loom_complete([], stream=False, body=sdk.model_dump(mode="json"))
    assert as_body == loom


async def test_an_example_stream_with_every_block_kind() -> None:
    """One fixed stream, so a failure of the property above has a readable neighbour."""
    thinking = [ThinkingDelta(type="thinking_delta", thinking=t) for t in ("Hmm, ", "Oslo.")]
    blocks: list[tuple[Any, list[Any]]] = [
        (
            ThinkingBlock(type="thinking", thinking="", signature=""),
            [*thinking, SignatureDelta(type="signature_delta", signature="EqQB")],
        ),
        (RedactedThinkingBlock(type="redacted_thinking", data="ZZ"), []),
        (
            ToolUseBlock(type="tool_use", id="t", name="w", input={}),
            [InputJSONDelta(type="input_json_delta", partial_json=c) for c in '{"city": "Oslo"}'],
        ),
    ]
    events = assemble(
        "msg_1",
        SDKUsage(input_tokens=10, output_tokens=1, cache_read_input_tokens=90),
        blocks,
        "tool_use",
        MessageDeltaUsage(output_tokens=50, output_tokens_details=OutputTokensDetails(thinking_tokens=30)),
    )
    chunks = [wire_bytes(events)]
    sdk = sdk_accumulate(chunks)
    loom, streamed = await loom_complete(chunks)
    assert_agrees_with_the_sdk(loom, sdk)
    assert loom.message.reasoning == (
        ReasoningBlock(text="Hmm, Oslo.", signature="EqQB"),
        ReasoningBlock(type="redacted_thinking", data="ZZ"),
    )
    assert (loom.message.tool_calls[0].arguments, loom.finish_reason, streamed) == ({"city": "Oslo"}, "tool_calls", "")
    assert (loom.usage.input_tokens, loom.usage.output_tokens, loom.usage.reasoning_tokens) == (100, 50, 30)
