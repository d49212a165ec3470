"""Reasoning tokens are counted on every wire, and a refusal is a refusal on every wire."""

from __future__ import annotations

import json
from typing import Any

import httpx

from loom_nb.messages import Message, ModelRequest
from loom_nb.providers import AnthropicMessages, OpenAIChat, OpenAIResponses

ASK = ModelRequest(messages=(Message.user("hi"),))


def answering(doc: dict[str, Any], seen: list[dict[str, Any]] | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        return httpx.Response(200, json=doc)

    return httpx.MockTransport(handler)


async def test_openai_chat_counts_reasoning_tokens() -> None:
    doc = {
        "id": "c1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 32}},
    }
    response = await OpenAIChat("m", api_key="", transport=answering(doc), stream=False).complete(ASK)
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (40, 32)


async def test_openai_responses_counts_reasoning_tokens() -> None:
    doc = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "42", "annotations": []}],
            },
        ],
        "usage": {"input_tokens": 5, "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 30}},
    }
    response = await OpenAIResponses("m", api_key="", transport=answering(doc), stream=False).complete(ASK)
    assert (response.message.text, response.usage.reasoning_tokens) == ("42", 30)


async def test_an_anthropic_refusal_is_a_refusal_and_goes_back_as_text() -> None:
    doc = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "I can't help with that."}],
        "stop_reason": "refusal",
        "usage": {"input_tokens": 3, "output_tokens": 6},
    }
    seen: list[dict[str, Any]] = []
    model = AnthropicMessages("m", api_key="", transport=answering(doc, seen), stream=False)
    response = await model.complete(ASK)
    assert response.finish_reason == "refusal"
    # A refusal recorded by another wire (no text, only Message.refusal) is sent as text, never as "".
    refused = Message.assistant(refusal="No.")
    await model.complete(ModelRequest(messages=(Message.user("hi"), refused, Message.user("why?"))))
    assert seen[-1]["messages"][1] == {"role": "assistant", "content": "No."}
