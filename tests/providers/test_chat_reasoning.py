"""Reasoning on the chat completions wire, in each shape compatible servers use
(``providers/chat_reasoning.py``): ``reasoning_content``, ``reasoning``, ``reasoning_details`` and
``thinking_blocks`` are kept on the assistant message, journaled, and sent back on the next turn
exactly as the server sent them, streamed or not; other wires' reasoning is never sent on this one.

Against ``provider_server`` (a real HTTP server on 127.0.0.1); the run through LiteLLM's proxy is
``test_litellm_reasoning.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

import loom_nb as loom
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall
from loom_nb.providers import OpenAIChat
from loom_nb.providers.chat_reasoning import ReasoningStream
from tests.providers.provider_server import Call, ProviderServer, Reply

SIGNED = [
    {"type": "thinking", "thinking": "The user wants the weather.", "signature": "sig-A1"},
    {"type": "redacted_thinking", "data": "ENCRYPTED=="},
]
SHAPES: dict[str, dict[str, Any]] = {
    "reasoning_content": {"reasoning_content": "Think of Paris."},
    "reasoning": {"reasoning": "Think of Paris."},
    "reasoning_details": {
        "reasoning_details": [
            {"type": "reasoning.text", "text": "Think of Paris.", "signature": "s1", "format": "anthropic-claude-v1"}
        ]
    },
    "thinking_blocks (LiteLLM)": {"reasoning_content": "The user wants the weather.", "thinking_blocks": SIGNED},
}
ASK = ModelRequest(messages=(Message.user("Weather in Paris?"),))


def chat(server: ProviderServer, **kw: Any) -> OpenAIChat:
    return OpenAIChat("gpt-test", base_url=server.url + "/v1", api_key="sk-test", **kw)


def followed_up(response: ModelResponse) -> ModelRequest:
    """The next turn's request: the answer, then the tool's result."""
    (call,) = response.message.tool_calls
    result = Message(role="tool", text="18C", tool_call_id=call.id)
    return ModelRequest(messages=(*ASK.messages, response.message, result))


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_shape_is_kept_and_sent_back_as_received(server: ProviderServer, shape: str) -> None:
    fields = SHAPES[shape]
    server.push(Reply(calls=[Call("call_1", "weather", ['{"city": "Paris"}'])], message_fields=fields))
    server.push(Reply(text=["18C in Paris."]))
    model = chat(server, stream=False)
    first = await model.complete(ASK)
    (block,) = first.message.reasoning
    assert block == ReasoningBlock(type="chat_reasoning", text=block.text, item=fields)
    assert block.text in ("Think of Paris.", "The user wants the weather.")
    await model.complete(followed_up(first))
    assistant = server.requests[1].body["messages"][1]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_1"
    assert {k: v for k, v in assistant.items() if k in fields} == fields


async def test_a_litellm_stream_assembles_the_signed_blocks(server: ProviderServer) -> None:
    """LiteLLM streams Anthropic thinking as ``reasoning_content`` pieces and ``thinking_blocks``
    pieces carrying their block's ``index``, the signature in a piece of its own."""
    deltas = [
        {
            "reasoning_content": "The user ",
            "thinking_blocks": [{"type": "thinking", "thinking": "The user ", "index": 0}],
        },
        {
            "reasoning_content": "wants it.",
            "thinking_blocks": [{"type": "thinking", "thinking": "wants it.", "index": 0}],
        },
        {
            "reasoning_content": "",
            "thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "sig-Z", "index": 0}],
        },
        {"thinking_blocks": [{"type": "redacted_thinking", "data": "ENC==", "index": 1}]},
    ]
    server.push(Reply(calls=[Call("call_1", "weather", ['{"city":', ' "Paris"}'])], extra_deltas=deltas))
    server.push(Reply(text=["18C."]))
    model = chat(server, stream=True)
    seen: list[str] = []
    first = await model.complete(ASK, on_delta=seen.append)
    assert seen == []  # reasoning is never streamed as answer text
    (block,) = first.message.reasoning
    assert block.text == "The user wants it."
    assert block.item == {
        "reasoning_content": "The user wants it.",
        "thinking_blocks": [
            {"type": "thinking", "thinking": "The user wants it.", "index": 0, "signature": "sig-Z"},
            {"type": "redacted_thinking", "data": "ENC==", "index": 1},
        ],
    }
    await model.complete(followed_up(first))
    assistant = server.requests[1].body["messages"][1]
    assert assistant["thinking_blocks"] == block.item["thinking_blocks"]
    assert assistant["reasoning_content"] == "The user wants it."


def test_stream_pieces_without_an_index_extend_the_block_they_continue() -> None:
    stream = ReasoningStream()
    stream.feed({"reasoning_details": [{"type": "reasoning.text", "text": "A"}]})
    stream.feed({"reasoning_details": [{"type": "reasoning.text", "text": "B", "signature": "s"}]})
    stream.feed({"reasoning": "x"})
    stream.feed({"reasoning": "y"})
    block = stream.block()
    assert block is not None
    assert block.item == {
        "reasoning": "xy",
        "reasoning_details": [{"type": "reasoning.text", "text": "AB", "signature": "s"}],
    }


async def test_answers_without_reasoning_send_nothing_new(server: ProviderServer) -> None:
    server.push(Reply(calls=[Call("call_1", "weather", ['{"city": "Paris"}'])]))
    server.push(Reply(text=["ok"]))
    model = chat(server, stream=True)
    first = await model.complete(ASK)
    assert first.message.reasoning == ()
    await model.complete(followed_up(first))
    assistant = server.requests[1].body["messages"][1]
    assert set(assistant) == {"role", "content", "tool_calls"}


async def test_other_wires_reasoning_is_not_sent_on_the_chat_wire(server: ProviderServer) -> None:
    server.push(Reply(text=["ok"]))
    anthropic_turn = Message(
        role="assistant",
        tool_calls=(ToolCall(id="t1", name="weather", arguments={}),),
        reasoning=(
            ReasoningBlock(text="hmm", signature="sig"),
            ReasoningBlock(type="reasoning_item", item={"id": "r"}),
        ),
    )
    request = ModelRequest(messages=(*ASK.messages, anthropic_turn, Message(role="tool", text="1", tool_call_id="t1")))
    await chat(server, stream=False).complete(request)
    assistant = server.requests[0].body["messages"][1]
    assert set(assistant) == {"role", "content", "tool_calls"}


@pytest.mark.parametrize("stream", [True, False])
def test_the_reasoning_is_journaled_with_the_model_step(server: ProviderServer, stream: bool) -> None:
    """The block is journaled with the model step's output, so a run resumed from the journal
    (another process, a restart) sends back the signed blocks its first turn received."""
    fields = SHAPES["thinking_blocks (LiteLLM)"]
    deltas = [{"reasoning_content": fields["reasoning_content"], "thinking_blocks": SIGNED}]
    server.push(
        Reply(
            calls=[Call("call_1", "weather", ['{"city": "Paris"}'])],
            message_fields={} if stream else fields,
            extra_deltas=deltas if stream else [],
        )
    )
    server.push(Reply(text=["18C in Paris."]))
    calls: list[str] = []

    def weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "18C"

    agent = loom.Agent(model=chat(server, stream=stream), tools=[loom.tool(weather)], name="reasoner")
    rt = loom.Runtime.open()
    run = agent.start("Weather in Paris?", runtime=rt)
    assert run.status == "completed" and run.result.output == "18C in Paris."
    assert server.requests[1].body["messages"][1]["thinking_blocks"] == SIGNED
    outputs = [
        e.data["output"]
        for e in rt.journal.read(run.id)
        if e.kind == "step_completed" and "message" in e.data["output"]
    ]
    journaled = ModelResponse.model_validate(outputs[0])
    assert journaled.message.reasoning == (
        ReasoningBlock(type="chat_reasoning", text=fields["reasoning_content"], item=fields),
    )
    assert journaled.model == "m-2026-01-01"
    assert calls == ["Paris"]
    rt.close()
