"""Extended thinking on the Anthropic messages wire, and ``reasoning_effort`` on the OpenAI one.

``thinking`` and ``redacted_thinking`` blocks are model output: parsed from streams and bodies,
kept on the assistant message in order with their signatures, journaled with the model step,
sent back unchanged (before the text and tool calls) on the next request, and never streamed as
answer text. Messages without reasoning serialize exactly as they did before the field existed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import loom_nb as loom
from loom_nb.agent import rebuild_requests
from loom_nb.errors import UsageError
from loom_nb.journal import EventKind, canonical_json
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, Usage, message_bytes
from loom_nb.providers import AnthropicMessages, OpenAIChat
from loom_nb.providers.redaction import MASK
from loom_nb.testing import FakeClock, SequentialIds

KEY = "sk-ant-test-THINK-1a2b3c4d5e"
ASK = ModelRequest(messages=(Message.user("hi"),))
ENABLED = {"type": "enabled", "budget_tokens": 2048}
THOUGHT = ReasoningBlock(text="The user wants Oslo.", signature="sig-A==")
HIDDEN = ReasoningBlock(type="redacted_thinking", data="ENCRYPTED-b64==")


class Wire:
    """A MockTransport that answers each request with the next reply and keeps the JSON bodies."""

    def __init__(self, *replies: Callable[[], httpx.Response]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return self.replies.pop(0)()


def body_reply(doc: dict[str, Any]) -> Callable[[], httpx.Response]:
    return lambda: httpx.Response(200, json=doc)


def sse_reply(events: list[dict[str, Any]]) -> Callable[[], httpx.Response]:
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return lambda: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text.encode())


def block(index: int, content_block: dict[str, Any], *deltas: dict[str, Any]) -> list[dict[str, Any]]:
    """One content block's events: start, deltas, stop."""
    return [
        {"type": "content_block_start", "index": index, "content_block": content_block},
        *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
        {"type": "content_block_stop", "index": index},
    ]


def thinking_stream(*, text: list[str], call: ToolCall | None, msg_id: str = "msg_1") -> list[dict[str, Any]]:
    """A stream with a thinking block (split), a redacted one, the answer text, and a tool call."""
    start = {"id": msg_id, "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 50}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    events += block(
        0,
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "thinking_delta", "thinking": "The user "},
        {"type": "thinking_delta", "thinking": "wants Oslo."},
        {"type": "signature_delta", "signature": THOUGHT.signature},
    )
    events += block(1, {"type": "redacted_thinking", "data": HIDDEN.data})
    events += block(2, {"type": "text", "text": ""}, *({"type": "text_delta", "text": t} for t in text))
    if call is not None:
        args = json.dumps(call.arguments)
        use = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events += block(3, use, *({"type": "input_json_delta", "partial_json": c} for c in args))
    usage = {"output_tokens": 90, "output_tokens_details": {"thinking_tokens": 60}}
    reason = "tool_use" if call else "end_turn"
    events += [{"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}, {"type": "message_stop"}]
    return events


# --------------------------------------------------------------------------------------------------
# configuration


def test_thinking_config_is_validated_with_the_fix_in_the_message() -> None:
    assert AnthropicMessages("m", thinking=ENABLED).thinking == ENABLED
    assert AnthropicMessages("m", thinking={"type": "adaptive"}).thinking == {"type": "adaptive"}
    assert AnthropicMessages("m").thinking is None
    with pytest.raises(UsageError, match=r"budget_tokens=4096 must be below max_tokens=4096 .*raise max_tokens"):
        AnthropicMessages("m", thinking={"type": "enabled", "budget_tokens": 4096})
    with pytest.raises(UsageError, match=r"budget_tokens=9000 must be below max_tokens=8000"):
        AnthropicMessages("m", max_tokens=8000, thinking={"type": "enabled", "budget_tokens": 9000})
    with pytest.raises(UsageError, match=r'needs "budget_tokens": an int of at least 1024 .*got 100'):
        AnthropicMessages("m", thinking={"type": "enabled", "budget_tokens": 100})
    with pytest.raises(UsageError, match=r"got None"):
        AnthropicMessages("m", thinking={"type": "enabled"})
    with pytest.raises(UsageError, match=r"must be a dict with a type of enabled, adaptive, disabled"):
        AnthropicMessages("m", thinking={"type": "on"})


async def test_thinking_is_sent_and_a_request_cap_at_or_below_the_budget_is_refused() -> None:
    wire = Wire(body_reply({"content": [], "stop_reason": "end_turn"}))
    model = AnthropicMessages("m", api_key=KEY, transport=wire.transport, stream=False, thinking=ENABLED)
    await model.complete(ASK)
    assert wire.bodies[0]["thinking"] == ENABLED and wire.bodies[0]["max_tokens"] == 4096
    capped = ASK.model_copy(update={"max_tokens": 2048})
    with pytest.raises(UsageError, match=r"budget_tokens=2048 must be below ModelRequest.max_tokens=2048"):
        await model.complete(capped)
    assert len(wire.bodies) == 1  # refused before anything was sent


# --------------------------------------------------------------------------------------------------
# parsing


async def test_a_stream_keeps_thinking_blocks_in_order_out_of_the_answer_deltas() -> None:
    call = ToolCall(id="toolu_1", name="weather", arguments={"city": "Oslo"})
    wire = Wire(sse_reply(thinking_stream(text=["Let me ", "check."], call=call)))
    seen: list[str] = []
    resp = await AnthropicMessages("m", api_key=KEY, transport=wire.transport).complete(ASK, on_delta=seen.append)
    assert seen == ["Let me ", "check."]
    assert resp == ModelResponse(
        message=Message(role="assistant", text="Let me check.", tool_calls=(call,), reasoning=(THOUGHT, HIDDEN)),
        usage=Usage(input_tokens=50, output_tokens=90, reasoning_tokens=60),
        finish_reason="tool_calls",
        response_id="msg_1",
    )


async def test_a_body_keeps_thinking_blocks_in_order() -> None:
    doc = {
        "id": "msg_2",
        "content": [
            {"type": "thinking", "thinking": THOUGHT.text, "signature": THOUGHT.signature},
            {"type": "redacted_thinking", "data": HIDDEN.data},
            {"type": "text", "text": "Sunny."},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 30}},
    }
    seen: list[str] = []
    model = AnthropicMessages("m", api_key=KEY, transport=Wire(body_reply(doc)).transport, stream=False)
    resp = await model.complete(ASK, on_delta=seen.append)
    assert resp.message == Message(role="assistant", text="Sunny.", reasoning=(THOUGHT, HIDDEN))
    assert resp.usage == Usage(input_tokens=5, output_tokens=40, reasoning_tokens=30)
    assert seen == ["Sunny."]


async def test_a_delta_of_another_blocks_kind_is_ignored_like_the_sdk_does() -> None:
    start = {"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1}}}
    events = [
        start,
        *block(0, {"type": "thinking", "thinking": ""}, {"type": "text_delta", "text": "not an answer"}),
        *block(1, {"type": "text", "text": ""}, {"type": "thinking_delta", "thinking": "x"}),
        {"type": "message_stop"},
    ]
    seen: list[str] = []
    resp = await AnthropicMessages("m", api_key=KEY, transport=Wire(sse_reply(events)).transport).complete(
        ASK, on_delta=seen.append
    )
    assert seen == [] and resp.message.text == "" and resp.message.reasoning == (ReasoningBlock(),)


async def test_a_key_in_thinking_text_is_redacted() -> None:
    doc = {
        "content": [{"type": "thinking", "thinking": f"the key is {KEY}", "signature": "s"}],
        "stop_reason": "end_turn",
    }
    model = AnthropicMessages("m", api_key=KEY, transport=Wire(body_reply(doc)).transport, stream=False)
    resp = await model.complete(ASK)
    assert resp.message.reasoning[0].text == f"the key is {MASK}"


# --------------------------------------------------------------------------------------------------
# sending back


async def test_reasoning_is_sent_back_unchanged_before_text_and_tool_use() -> None:
    call = ToolCall(id="toolu_1", name="weather", arguments={"city": "Oslo"})
    foreign = ReasoningBlock(text="no signature: not from this API")
    transcript = ModelRequest(
        messages=(
            Message.user("Weather?"),
            Message(role="assistant", text="Checking.", tool_calls=(call,), reasoning=(THOUGHT, foreign, HIDDEN)),
            Message.tool(call, "12C"),
            Message(role="assistant", text="It is 12C.", reasoning=(foreign,)),
            Message.user("Thanks"),
        ),
    )
    wire = Wire(body_reply({"content": [], "stop_reason": "end_turn"}))
    await AnthropicMessages("m", api_key=KEY, transport=wire.transport, stream=False).complete(transcript)
    assert wire.bodies[0]["messages"] == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT.text, "signature": THOUGHT.signature},
                {"type": "redacted_thinking", "data": HIDDEN.data},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12C"}]},
        {"role": "assistant", "content": "It is 12C."},  # nothing sendable: plain text, as before
        {"role": "user", "content": "Thanks"},
    ]


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"{city}: 12C"


async def test_an_agent_tool_loop_journals_thinking_and_sends_it_back() -> None:
    call = ToolCall(id="toolu_1", name="weather", arguments={"city": "Oslo"})
    wire = Wire(
        sse_reply(thinking_stream(text=["Checking."], call=call)),
        sse_reply(thinking_stream(text=["It is ", "12C."], call=None, msg_id="msg_2")),
    )
    rt = loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())
    deltas: list[str] = []
    rt.observe(on_delta=lambda _eid, _sid, text: deltas.append(text))
    model = AnthropicMessages("claude-test", api_key=KEY, transport=wire.transport, thinking=ENABLED)
    run = loom.Agent(model=model, tools=[weather], name="thinker").start("Weather in Oslo?", runtime=rt)
    result = await run
    assert result.output == "It is 12C."
    assert result.usage == Usage(input_tokens=100, output_tokens=180, reasoning_tokens=120)
    assert "".join(deltas) == "Checking.It is 12C."  # no thinking text in the answer stream

    sent_back = wire.bodies[1]["messages"][1]
    assert sent_back["role"] == "assistant"
    assert [b["type"] for b in sent_back["content"]] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert sent_back["content"][0] == {"type": "thinking", "thinking": THOUGHT.text, "signature": THOUGHT.signature}
    assert all(b["thinking"] == ENABLED for b in wire.bodies)

    events = rt.journal.read(run.id)
    done = next(e for e in events if e.kind == EventKind.STEP_COMPLETED and e.step_id == "#turn:0")
    journaled = done.data["output"]["message"]["reasoning"]
    assert journaled == [
        {"text": THOUGHT.text, "signature": THOUGHT.signature},
        {"type": "redacted_thinking", "data": HIDDEN.data},
    ]
    # The journal alone rebuilds the second request, thinking blocks included.
    rebuilt = rebuild_requests(events)["#turn:1"]
    assert rebuilt.messages[1].reasoning == (THOUGHT, HIDDEN)
    assert KEY not in repr(events)
    rt.close()


# --------------------------------------------------------------------------------------------------
# the journal's shapes stay as they were


def test_values_without_reasoning_serialize_as_before_the_fields_existed() -> None:
    call = ToolCall(id="c", name="n", arguments={"a": 1})
    message = Message.assistant("hi", [call])
    # The canonical form and size recorded before ``reasoning`` existed (compaction thresholds,
    # transcript-size warnings and input digests depend on them).
    assert canonical_json(message) == (
        '{"is_error":false,"name":null,"role":"assistant","tainted":false,"text":"hi","tool_call_id":null,'
        '"tool_calls":[{"arguments":{"a":1},"id":"c","name":"n","raw_arguments":null}]}'
    )
    assert message_bytes(message) == 175
    assert canonical_json(Usage(input_tokens=3, output_tokens=4)) == '{"cost":null,"input_tokens":3,"output_tokens":4}'
    thought = message.model_copy(update={"reasoning": (THOUGHT,)})
    assert json.loads(canonical_json(thought))["reasoning"] == [
        {"data": "", "signature": THOUGHT.signature, "text": THOUGHT.text, "type": "thinking"}
    ]
    dumped = thought.model_dump(mode="json", exclude_defaults=True)
    assert Message.model_validate(dumped) == thought


def test_usage_adds_reasoning_tokens() -> None:
    total = Usage(input_tokens=1, output_tokens=10, reasoning_tokens=4) + Usage(output_tokens=5, reasoning_tokens=2)
    assert total == Usage(input_tokens=1, output_tokens=15, reasoning_tokens=6)


# --------------------------------------------------------------------------------------------------
# OpenAI: reasoning_effort


async def test_openai_reasoning_effort_is_sent_as_the_body_field() -> None:
    ok = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    for effort in ("low", "medium", "high"):
        wire = Wire(body_reply(ok))
        model = OpenAIChat("o-test", api_key=KEY, transport=wire.transport, stream=False, reasoning_effort=effort)
        await model.complete(ASK)
        assert wire.bodies[0]["reasoning_effort"] == effort
    wire = Wire(body_reply(ok))
    await OpenAIChat("o-test", api_key=KEY, transport=wire.transport, stream=False).complete(ASK)
    assert "reasoning_effort" not in wire.bodies[0]
    with pytest.raises(UsageError, match=r"reasoning_effort=...\) must be one of none, minimal, low, .* got 'hgih'"):
        OpenAIChat("o-test", reasoning_effort="hgih")  # type: ignore[arg-type]
