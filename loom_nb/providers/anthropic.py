"""``AnthropicMessages``: Anthropic's messages API over httpx."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Unpack

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError, UsageError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, Usage
from loom_nb.providers.http import (
    HTTPOptions,
    HTTPProvider,
    error_detail,
    error_status,
    excerpt,
    parse_arguments,
    text_or_none,
    token_count,
)
from loom_nb.providers.image_parts import anthropic_part
from loom_nb.providers.sse import SSEEvent, loads

API_VERSION = "2023-06-01"
#: The smallest ``budget_tokens`` the API accepts for extended thinking.
MIN_THINKING_BUDGET = 1024
_THINKING_TYPES = ("enabled", "adaptive", "disabled")

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}


class AnthropicMessages(HTTPProvider):
    """A Claude model behind ``POST {base_url}/v1/messages``.

    System messages are joined into the ``system`` field; tool calls travel as ``tool_use`` blocks
    and their results as ``tool_result`` blocks (consecutive results share one user message).
    Stop reasons are mapped to the OpenAI vocabulary (``end_turn`` → ``stop``, ``tool_use`` →
    ``tool_calls``, ``max_tokens`` → ``length``). Input usage counts cache reads and writes too.

    Extended thinking: the model's ``thinking`` blocks (with their signatures) and
    ``redacted_thinking`` blocks are kept on the assistant message (``Message.reasoning``), in order,
    and sent back unchanged, before its text and tool calls, on the next request, as the API requires
    in a tool loop. Their text is never streamed to ``on_delta`` (which carries the answer only).

    Args:
        model: The model name, e.g. ``"claude-sonnet-4-5"``.
        base_url: The API root (without ``/v1``).
        api_key: The key; None reads ``ANTHROPIC_API_KEY`` at the first call; ``""`` sends no
            ``x-api-key`` header (a proxy that adds it).
        transport: An httpx transport (``httpx.MockTransport`` in tests), or None for the network.
        timeout: Seconds allowed to connect, and between two reads of the response.
        max_tokens: The output cap the API requires (``ModelRequest.max_tokens`` overrides it).
        extra_headers: Headers added to every request (e.g. ``anthropic-beta``).
        stream: Stream the answer as server-sent events (True) or read one JSON body (False).
        thinking: Extended thinking, sent as the ``thinking`` field: ``{"type": "enabled",
            "budget_tokens": N}`` with ``1024 <= N < max_tokens``, or ``{"type": "adaptive"}`` /
            ``{"type": "disabled"}``; None sends no field (the model's default).
    """

    name = "anthropic"
    env_var = "ANTHROPIC_API_KEY"
    path = "/v1/messages"
    terminal = "message_stop"
    default_base_url = "https://api.anthropic.com"
    default_max_tokens = 4096

    def __init__(
        self, model: str, *, thinking: Mapping[str, Any] | None = None, **options: Unpack[HTTPOptions]
    ) -> None:
        super().__init__(model, **options)
        self.thinking = _thinking_config(thinking, self.max_tokens)

    def _auth_headers(self, key: str) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        if request.output is not None:
            raise UsageError(
                f"AnthropicMessages sends no native structured output (the schema {request.output.name!r}): "
                "give the agent output_mode='tool' (or 'auto', which picks it), so the answer comes through "
                "the final_result tool"
            )
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.max_tokens,
            "messages": _messages(request.messages),
        }
        if self.thinking is not None:
            if request.max_tokens is not None:
                _check_budget(self.thinking, request.max_tokens, "ModelRequest.max_tokens")
            body["thinking"] = dict(self.thinking)
        system = request.system
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": t.name,
                    **({"description": t.description} if t.description else {}),
                    "input_schema": t.parameters,
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if self.stream:
            body["stream"] = True
        return body

    def _stream_state(self) -> _AnthropicStream:
        return _AnthropicStream()

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("type") == "error":
            raise _error(data, json.dumps(data))
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningBlock] = []
        for block in data["content"]:
            kind = block.get("type")
            if kind == "text":
                texts.append(block["text"])
            elif kind == "tool_use":
                calls.append(_tool_call(block, block.get("input")))
            elif kind == "thinking":
                reasoning.append(
                    ReasoningBlock(text=block.get("thinking") or "", signature=block.get("signature") or "")
                )
            elif kind == "redacted_thinking":
                reasoning.append(ReasoningBlock(type="redacted_thinking", data=block["data"]))
        return ModelResponse(
            message=Message(role="assistant", text="".join(texts), tool_calls=tuple(calls), reasoning=tuple(reasoning)),
            usage=_usage(data.get("usage") or {}),
            finish_reason=_stop(data.get("stop_reason")),
            response_id=text_or_none(data.get("id")),
            model=text_or_none(data.get("model")),
        )


def _thinking_config(thinking: Mapping[str, Any] | None, max_tokens: int | None) -> dict[str, Any] | None:
    """``thinking`` checked and copied (None stays None)."""
    if thinking is None:
        return None
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind not in _THINKING_TYPES:
        raise UsageError(
            f"AnthropicMessages(thinking=...) must be a dict with a type of {', '.join(_THINKING_TYPES)}, "
            f'e.g. thinking={{"type": "enabled", "budget_tokens": 2048}}; got {thinking!r}'
        )
    config = dict(thinking)
    _check_budget(config, max_tokens, "max_tokens")
    return config


def _check_budget(thinking: Mapping[str, Any], max_tokens: int | None, where: str) -> None:
    """Refuse a thinking budget the API would refuse: not an int, below the minimum, or not below the cap."""
    if thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < MIN_THINKING_BUDGET:
        raise UsageError(
            f'thinking={{"type": "enabled", ...}} needs "budget_tokens": an int of at least {MIN_THINKING_BUDGET} '
            f"(the API's minimum); got {budget!r}"
        )
    if max_tokens is None or budget >= max_tokens:
        raise UsageError(
            f"the thinking budget_tokens={budget} must be below {where}={max_tokens} (thinking counts toward "
            f"the output cap): raise {where} or lower budget_tokens"
        )


def _messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user message of tool results
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id or "",
                "content": _tool_result_content(m),
            }
            if m.is_error:
                block["is_error"] = True
            if results is None:
                results = [block]
                out.append({"role": "user", "content": results})
            else:
                results.append(block)
            continue
        if m.role == "user" and results is not None:
            # Text after tool results joins their user turn (tool_result blocks must come first).
            if m.text:  # the API refuses empty text blocks
                results.append({"type": "text", "text": m.text})
            results = None
            continue
        results = None
        if m.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_content(m)})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def _tool_result_content(m: Message) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, and its images as image blocks when it has any."""
    if not m.images:
        return m.text
    text = [{"type": "text", "text": m.text}] if m.text else []
    return text + [anthropic_part(image) for image in m.images]


def _assistant_content(m: Message) -> str | list[dict[str, Any]]:
    """The content of an assistant turn: its reasoning blocks first, unchanged and in order, then its
    text, then its tool calls; plain text when it has only text."""
    content = [_reasoning_param(r) for r in m.reasoning if r.signature or r.data]
    text = m.text or m.refusal or ""  # a refusal from another wire goes back as what was said
    if not content and not m.tool_calls:
        return text
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
    return content


def _reasoning_param(block: ReasoningBlock) -> dict[str, Any]:
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    return {"type": "thinking", "thinking": block.text, "signature": block.signature}


def _tool_call(block: dict[str, Any], arguments: Any) -> ToolCall:
    if isinstance(arguments, dict):
        return ToolCall(id=block["id"], name=block["name"], arguments=arguments)
    return ToolCall(id=block["id"], name=block["name"], raw_arguments=json.dumps(arguments))


def _usage(usage: dict[str, Any]) -> Usage:
    """The API's usage object as ``Usage``: input counts cache writes and reads; reasoning is the
    ``thinking_tokens`` part of the output, when reported."""
    details = usage.get("output_tokens_details")
    return Usage(
        input_tokens=token_count(usage.get("input_tokens"))
        + token_count(usage.get("cache_creation_input_tokens"))
        + token_count(usage.get("cache_read_input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        reasoning_tokens=token_count(details.get("thinking_tokens")) if isinstance(details, dict) else 0,
    )


def _stop(reason: Any) -> str | None:
    return _STOP.get(reason, reason) if isinstance(reason, str) else None


def _error(data: dict[str, Any], body: str) -> ProviderHTTPError:
    # The status its error type stands for (one table for both wires: ``http.ERROR_STATUS``).
    return ProviderHTTPError(
        f"the Anthropic API reported an error: {error_detail(body)}",
        status_code=error_status(data.get("error")),
        body=body,
    )


class _Block:
    __slots__ = ("block", "json", "kind", "signature", "text")

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block
        self.kind = block.get("type")
        self.text: list[str] = []  # text, or thinking text
        self.json: list[str] = []
        self.signature: str | None = None


class _AnthropicStream:
    """Assembles messages-API events: content blocks by index, usage, stop reason."""

    __slots__ = ("blocks", "done", "model", "response_id", "stop_reason", "usage")

    def __init__(self) -> None:
        self.done = False
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None

    def feed(self, event: SSEEvent) -> str | None:
        data = loads(event.data)
        kind = data["type"]
        if kind == "content_block_delta":
            delta = data["delta"]
            block = self.blocks.get(data["index"])
            if block is None:
                raise ProviderProtocolError(
                    f"a content_block_delta for block {data['index']} came before its content_block_start: "
                    f"{excerpt(event.data)!r}"
                )
            dtype = delta.get("type")
            if dtype == "text_delta":
                if block.kind != "text":
                    return None
                text = delta["text"]
                block.text.append(text)
                return text if isinstance(text, str) else None
            if dtype == "input_json_delta":
                block.json.append(delta["partial_json"])
            elif dtype == "thinking_delta" and block.kind == "thinking":
                block.text.append(delta["thinking"])  # reasoning: kept, never streamed as answer text
            elif dtype == "signature_delta" and block.kind == "thinking":
                block.signature = delta["signature"]
            return None
        if kind == "content_block_start":
            self.blocks[data["index"]] = _Block(data["content_block"])
        elif kind == "message_start":
            message = data["message"]
            self.response_id = text_or_none(message.get("id"))
            self.model = text_or_none(message.get("model"))
            self.usage = dict(message.get("usage") or {})
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = reason
            # Cumulative counts: each one given (not null) replaces the message_start value.
            for name, value in (data.get("usage") or {}).items():
                if value is not None:
                    self.usage[name] = value
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _error(data, event.data)
        # ping, content_block_stop and event types added later carry nothing to keep.
        return None

    def result(self) -> ModelResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[ReasoningBlock] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "thinking":
                start = block.block
                text = (start.get("thinking") or "") + "".join(block.text)
                signature = block.signature if block.signature is not None else start.get("signature") or ""
                reasoning.append(ReasoningBlock(text=text, signature=signature))
            elif block.kind == "redacted_thinking":
                reasoning.append(ReasoningBlock(type="redacted_thinking", data=block.block["data"]))
            elif block.kind == "text":
                texts.append(block.block.get("text") or "")
                texts.extend(block.text)
            elif block.kind == "tool_use":
                if not block.block.get("id") or not block.block.get("name"):
                    raise ProviderProtocolError(f"tool_use block {index} has no id or name: {block.block!r}")
                if block.json:
                    arguments, raw = parse_arguments("".join(block.json))
                    calls.append(
                        ToolCall(
                            id=block.block["id"],
                            name=block.block["name"],
                            arguments=arguments,
                            raw_arguments=raw,
                        )
                    )
                else:
                    calls.append(_tool_call(block.block, block.block.get("input") or {}))
        return ModelResponse(
            message=Message(role="assistant", text="".join(texts), tool_calls=tuple(calls), reasoning=tuple(reasoning)),
            usage=_usage(self.usage),
            finish_reason=_stop(self.stop_reason),
            response_id=self.response_id,
            model=self.model,
        )
