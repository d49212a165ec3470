"""``AnthropicMessages``: Anthropic's messages API over httpx."""

from __future__ import annotations

import json
from typing import Any

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from loom_nb.providers.http import HTTPProvider, error_detail, error_status, excerpt, parse_arguments
from loom_nb.providers.sse import SSEEvent, loads

API_VERSION = "2023-06-01"

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


class AnthropicMessages(HTTPProvider):
    """A Claude model behind ``POST {base_url}/v1/messages``.

    System messages are joined into the ``system`` field; tool calls travel as ``tool_use`` blocks
    and their results as ``tool_result`` blocks (consecutive results share one user message).
    Stop reasons are mapped to the OpenAI vocabulary (``end_turn`` → ``stop``, ``tool_use`` →
    ``tool_calls``, ``max_tokens`` → ``length``). Input usage counts cache reads and writes too.

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
    """

    name = "anthropic"
    env_var = "ANTHROPIC_API_KEY"
    path = "/v1/messages"
    terminal = "message_stop"
    default_base_url = "https://api.anthropic.com"
    default_max_tokens = 4096

    def _auth_headers(self, key: str) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self.max_tokens,
            "messages": _messages(request.messages),
        }
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
        for block in data["content"]:
            kind = block.get("type")
            if kind == "text":
                texts.append(block["text"])
            elif kind == "tool_use":
                calls.append(_tool_call(block, block.get("input")))
        usage = data.get("usage") or {}
        return ModelResponse(
            message=Message(role="assistant", text="".join(texts), tool_calls=tuple(calls)),
            usage=Usage(input_tokens=_input_tokens(usage), output_tokens=_int(usage.get("output_tokens"))),
            finish_reason=_stop(data.get("stop_reason")),
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
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
                "content": m.text,
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
        if m.role == "assistant" and m.tool_calls:
            content: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
            content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def _tool_call(block: dict[str, Any], arguments: Any) -> ToolCall:
    if isinstance(arguments, dict):
        return ToolCall(id=block["id"], name=block["name"], arguments=arguments)
    return ToolCall(id=block["id"], name=block["name"], raw_arguments=json.dumps(arguments))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _input_tokens(usage: dict[str, Any]) -> int:
    return (
        _int(usage.get("input_tokens"))
        + _int(usage.get("cache_creation_input_tokens"))
        + _int(usage.get("cache_read_input_tokens"))
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
    __slots__ = ("block", "json", "kind", "text")

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block
        self.kind = block.get("type")
        self.text: list[str] = []
        self.json: list[str] = []


class _AnthropicStream:
    """Assembles messages-API events: content blocks by index, usage, stop reason."""

    __slots__ = ("blocks", "done", "input_tokens", "output_tokens", "response_id", "stop_reason")

    def __init__(self) -> None:
        self.done = False
        self.blocks: dict[int, _Block] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.response_id: str | None = None

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
                text = delta["text"]
                block.text.append(text)
                return text if isinstance(text, str) else None
            if dtype == "input_json_delta":
                block.json.append(delta["partial_json"])
            return None
        if kind == "content_block_start":
            self.blocks[data["index"]] = _Block(data["content_block"])
        elif kind == "message_start":
            message = data["message"]
            self.response_id = message.get("id")
            usage = message.get("usage") or {}
            self.input_tokens = _input_tokens(usage)
            self.output_tokens = _int(usage.get("output_tokens"))
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.stop_reason = reason
            usage = data.get("usage") or {}
            if "output_tokens" in usage:
                self.output_tokens = _int(usage["output_tokens"])
            if "input_tokens" in usage:  # newer API versions repeat the (cumulative) input usage here
                self.input_tokens = max(self.input_tokens, _input_tokens(usage))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _error(data, event.data)
        # ping, content_block_stop and event types added later carry nothing to keep.
        return None

    def result(self) -> ModelResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "text":
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
            message=Message(role="assistant", text="".join(texts), tool_calls=tuple(calls)),
            usage=Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens),
            finish_reason=_stop(self.stop_reason),
            response_id=self.response_id if isinstance(self.response_id, str) else None,
        )
