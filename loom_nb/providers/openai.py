"""``OpenAIChat``: the chat completions API (OpenAI and compatible servers) over httpx."""

from __future__ import annotations

import json
from typing import Any, Literal, Unpack, get_args

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError, UsageError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from loom_nb.providers.http import HTTPOptions, HTTPProvider, error_detail, excerpt, parse_arguments
from loom_nb.providers.sse import SSEEvent, loads

_FINISH = {"function_call": "tool_calls"}
#: The ``reasoning_effort`` values the chat completions API takes (reasoning models).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class OpenAIChat(HTTPProvider):
    """A model behind ``POST {base_url}/chat/completions``: OpenAI, or a compatible local server.

    Tools are sent as JSON-schema function tools; parallel tool calls come back assembled by index.
    Streaming asks for ``stream_options.include_usage`` so the last chunk carries the token usage.
    Local servers (llama.cpp, vLLM, Ollama) take ``base_url="http://127.0.0.1:8000/v1"`` and, when
    they need no key, ``api_key=""``.

    Args:
        model: The model name, e.g. ``"gpt-4o-mini"``.
        base_url: The API root, up to and including ``/v1``.
        api_key: The key; None reads ``OPENAI_API_KEY`` at the first call; ``""`` sends no
            ``Authorization`` header.
        transport: An httpx transport (``httpx.MockTransport`` in tests), or None for the network.
        timeout: Seconds allowed to connect, and between two reads of the response.
        extra_headers: Headers added to every request (e.g. ``OpenAI-Organization``).
        stream: Stream the answer as server-sent events (True) or read one JSON body (False).
        max_tokens: The default output cap, sent as ``max_tokens`` (``ModelRequest.max_tokens``
            overrides it).
        reasoning_effort: Sent as the ``reasoning_effort`` field (``"low"``, ``"medium"``,
            ``"high"``...) for a reasoning model; None sends none.
    """

    name = "openai"
    env_var = "OPENAI_API_KEY"
    path = "/chat/completions"
    terminal = "data: [DONE]"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self, model: str, *, reasoning_effort: ReasoningEffort | None = None, **options: Unpack[HTTPOptions]
    ) -> None:
        super().__init__(model, **options)
        if reasoning_effort is not None and reasoning_effort not in get_args(ReasoningEffort):
            raise UsageError(
                f"OpenAIChat(reasoning_effort=...) must be one of {', '.join(get_args(ReasoningEffort))} "
                f"or None, got {reasoning_effort!r}"
            )
        self.reasoning_effort = reasoning_effort

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [_message(m) for m in request.messages if m.role == "system"]
            + [_message(m) for m in request.messages if m.role != "system"],
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        **({"description": t.description} if t.description else {}),
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        max_tokens = request.max_tokens if request.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _stream_state(self) -> _OpenAIStream:
        return _OpenAIStream()

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("error") is not None and not data.get("choices"):
            raise _in_stream_error(data, json.dumps(data))
        choices = data["choices"]
        if not choices:
            raise ProviderProtocolError(f"the response has no choices: {excerpt(json.dumps(data))!r}")
        choice = choices[0]
        message = choice["message"]
        text = message.get("content") or message.get("refusal") or ""
        calls: list[ToolCall] = []
        for j, tc in enumerate(message.get("tool_calls") or ()):
            fn = tc["function"]
            given = fn.get("arguments")
            # Some compatible servers send the arguments as an object rather than as JSON text.
            arguments, raw = (given, None) if isinstance(given, dict) else parse_arguments(given or "")
            calls.append(
                ToolCall(id=tc.get("id") or f"call_{j}", name=fn["name"], arguments=arguments, raw_arguments=raw)
            )
        reason = choice.get("finish_reason")
        return ModelResponse(
            message=Message(role="assistant", text=text, tool_calls=tuple(calls)),
            usage=_usage(data.get("usage")),
            finish_reason=_FINISH.get(reason, reason) if isinstance(reason, str) else None,
            response_id=data.get("id") if isinstance(data.get("id"), str) else None,
        )


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.text}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.text or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.raw_arguments
                        if c.raw_arguments is not None
                        else json.dumps(c.arguments, ensure_ascii=False),
                    },
                }
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.text}


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    return Usage(input_tokens=_int(data.get("prompt_tokens")), output_tokens=_int(data.get("completion_tokens")))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _in_stream_error(data: dict[str, Any], body: str) -> ProviderHTTPError:
    err = data.get("error")
    code = err.get("code") if isinstance(err, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return ProviderHTTPError(
        f"the OpenAI-compatible API reported an error: {error_detail(body)}", status_code=status, body=body
    )


class _PartialCall:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []


class _OpenAIStream:
    """Assembles ``chat.completion.chunk`` events: text, tool calls by index, usage, finish reason."""

    __slots__ = ("calls", "done", "finish", "response_id", "text", "usage")

    def __init__(self) -> None:
        self.done = False
        self.text: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.usage: Any = None
        self.finish: str | None = None
        self.response_id: str | None = None

    def feed(self, event: SSEEvent) -> str | None:
        data = event.data
        if data == "[DONE]":
            self.done = True
            return None
        chunk = loads(data)
        if chunk.get("error") is not None:
            raise _in_stream_error(chunk, data)
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        out: str | None = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            reason = choice.get("finish_reason")
            if reason:
                self.finish = _FINISH.get(reason, reason)
            delta = choice.get("delta")
            if not delta:
                continue
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._feed_calls(tool_calls)
            content = delta.get("content") or delta.get("refusal")
            if isinstance(content, str) and content:
                self.text.append(content)
                out = content
        return out

    def _feed_calls(self, tool_calls: list[Any]) -> None:
        for j, tc in enumerate(tool_calls):
            index = tc.get("index", j)
            call = self.calls.get(index)
            if call is None:
                call = self.calls[index] = _PartialCall()
            if tc.get("id") and not call.id:
                call.id = tc["id"]
            fn = tc.get("function")
            if fn:
                if fn.get("name") and not call.name:
                    call.name = fn["name"]
                args = fn.get("arguments")
                if args:
                    call.args.append(args)

    def result(self) -> ModelResponse:
        calls: list[ToolCall] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            raw = "".join(partial.args)
            if not partial.name:
                raise ProviderProtocolError(
                    f"tool call {index} in the stream has no function name (arguments {excerpt(raw)!r})"
                )
            arguments, raw_arguments = parse_arguments(raw)
            calls.append(
                ToolCall(
                    id=partial.id or f"call_{index}",
                    name=partial.name,
                    arguments=arguments,
                    raw_arguments=raw_arguments,
                )
            )
        return ModelResponse(
            message=Message(role="assistant", text="".join(self.text), tool_calls=tuple(calls)),
            usage=_usage(self.usage),
            finish_reason=self.finish,
            response_id=self.response_id,
        )
