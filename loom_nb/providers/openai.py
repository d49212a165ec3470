"""``OpenAIChat``: the chat completions API (OpenAI and compatible servers) over httpx."""

from __future__ import annotations

import json
from typing import Any, Literal, Unpack, get_args

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError, UsageError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, Usage
from loom_nb.providers.chat_reasoning import ReasoningStream, fields_sent_back, reasoning_block
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
from loom_nb.providers.image_parts import chat_part
from loom_nb.providers.sse import SSEEvent, loads

_FINISH = {"function_call": "tool_calls"}
#: The request fields an output cap may be sent as (see ``OpenAIChat``).
MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")
#: Sent as the arguments of a call whose arguments did not parse (the API wants a JSON object).
EMPTY_ARGUMENTS = "{}"
#: Put before a tool result that reports an error: the wire has no ``is_error`` flag.
ERROR_PREFIX = "Error: "
#: The ``reasoning_effort`` values the chat completions API takes (reasoning models).
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]


class OpenAIChat(HTTPProvider):
    """A model behind ``POST {base_url}/chat/completions``: OpenAI, or a compatible local server.

    Tools are sent as JSON-schema function tools; parallel tool calls come back assembled by index
    (a legacy ``function_call`` comes back as one tool call). Streaming asks for
    ``stream_options.include_usage`` so the last chunk carries the token usage. A refusal comes back
    in ``Message.refusal`` with ``finish_reason="refusal"`` and goes back in the assistant
    message's ``refusal`` field. A typed answer (``ModelRequest.output``) is asked for as
    ``response_format`` with a strict JSON schema. Reasoning a compatible server puts on the
    assistant message (``reasoning_content``, ``reasoning``, ``reasoning_details``, LiteLLM's
    ``thinking_blocks``) is kept in ``Message.reasoning`` and sent back as it came
    (``providers/chat_reasoning.py``). Local servers (llama.cpp, vLLM, Ollama) take
    ``base_url="http://127.0.0.1:8000/v1"`` and, when they need no key, ``api_key=""``.

    What differs from the official SDK on purpose is listed in ``docs/providers.md``.

    The other keyword arguments are the ``HTTPProvider`` options: ``base_url`` (the API root, up to
    and including ``/v1``), ``api_key`` (None reads ``OPENAI_API_KEY`` at the first call; ``""`` sends
    no ``Authorization`` header), ``transport``, ``timeout``, ``extra_headers`` (e.g.
    ``OpenAI-Organization``), ``stream`` and ``max_tokens`` (the default output cap;
    ``ModelRequest.max_tokens`` overrides it).

    Args:
        model: The model name, e.g. ``"gpt-4o-mini"``.
        max_tokens_field: The request field the output cap is sent as: ``"max_completion_tokens"``
            (the default; what OpenAI's current models accept, reasoning models included) or
            ``"max_tokens"`` (the legacy field, for compatible servers that know only that one).
        reasoning_effort: Sent as the ``reasoning_effort`` field (``"low"``, ``"medium"``,
            ``"high"``...) for a reasoning model; None sends none.

    Raises:
        UsageError: ``max_tokens_field`` is not one of ``MAX_TOKENS_FIELDS``, ``reasoning_effort`` is
            not a known value, or an option is wrong.
    """

    name = "openai"
    env_var = "OPENAI_API_KEY"
    native_output = True
    path = "/chat/completions"
    terminal = "data: [DONE]"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        model: str,
        *,
        max_tokens_field: str = "max_completion_tokens",
        reasoning_effort: ReasoningEffort | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if max_tokens_field not in MAX_TOKENS_FIELDS:
            raise UsageError(
                f"max_tokens_field must be one of {', '.join(map(repr, MAX_TOKENS_FIELDS))}, got "
                f"{max_tokens_field!r}: use 'max_tokens' only for a server that rejects max_completion_tokens"
            )
        if reasoning_effort is not None and reasoning_effort not in get_args(ReasoningEffort):
            raise UsageError(
                f"OpenAIChat(reasoning_effort=...) must be one of {', '.join(get_args(ReasoningEffort))} "
                f"or None, got {reasoning_effort!r}"
            )
        super().__init__(model, **options)
        self.max_tokens_field = max_tokens_field
        self.reasoning_effort = reasoning_effort

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [_message(m) for m in request.messages if m.role == "system"]
            + _conversation([m for m in request.messages if m.role != "system"]),
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
        if request.output is not None:
            out = request.output
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": out.name, "schema": out.json_schema, "strict": out.strict},
            }
        max_tokens = request.max_tokens if request.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            body[self.max_tokens_field] = max_tokens
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
            raise _in_body_error(data, json.dumps(data))
        choices = data["choices"]
        if not choices:
            raise ProviderProtocolError(f"the response has no choices: {excerpt(json.dumps(data))!r}")
        choice = choices[0]
        message = choice["message"]
        calls: list[ToolCall] = []
        for j, tc in enumerate(message.get("tool_calls") or ()):
            calls.append(_tool_call(tc.get("id") or f"call_{j}", tc["function"]))
        legacy = message.get("function_call")
        if not calls and isinstance(legacy, dict) and legacy.get("name"):
            calls.append(_tool_call("call_0", legacy))
        refusal = message.get("refusal")
        return _response(
            text=message.get("content") or "",
            refusal=refusal if isinstance(refusal, str) and refusal else None,
            calls=calls,
            usage=data.get("usage"),
            reason=choice.get("finish_reason"),
            response_id=data.get("id"),
            model=data.get("model"),
            reasoning=reasoning_block(message),
        )


def _tool_call(call_id: str, fn: dict[str, Any]) -> ToolCall:
    given = fn.get("arguments")
    # Some compatible servers send the arguments as an object rather than as JSON text.
    arguments, raw = (given, None) if isinstance(given, dict) else parse_arguments(given or "")
    return ToolCall(id=call_id, name=fn["name"], arguments=arguments, raw_arguments=raw)


def _response(
    *,
    text: str,
    refusal: str | None,
    calls: list[ToolCall],
    usage: Any,
    reason: Any,
    response_id: Any,
    model: Any,
    reasoning: ReasoningBlock | None,
) -> ModelResponse:
    """The response, with the finish reason in loom's vocabulary: ``function_call`` is ``tool_calls``,
    and a refusal (which the API ends with ``stop``) is ``refusal``."""
    finish = _FINISH.get(reason, reason) if isinstance(reason, str) else None
    if refusal is not None and not calls:
        finish = "refusal"
    return ModelResponse(
        message=Message(
            role="assistant",
            text=text,
            tool_calls=tuple(calls),
            refusal=refusal,
            reasoning=(reasoning,) if reasoning is not None else (),
        ),
        usage=_usage(usage),
        finish_reason=finish,
        response_id=text_or_none(response_id),
        model=text_or_none(model),
    )


def _conversation(messages: list[Message]) -> list[dict[str, Any]]:
    """The non-system messages; the images of a run of tool results follow the run as one user
    message (a tool message's content is text only, and tool messages must follow their call)."""
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for m in messages:
        if m.role != "tool" and images:
            out.append({"role": "user", "content": images})
            images = []
        out.append(_message(m))
        if m.role == "tool" and m.images:
            images.append({"type": "text", "text": f"The images the tool call {m.tool_call_id} ({m.name}) returned:"})
            images += [chat_part(image) for image in m.images]
    if images:
        out.append({"role": "user", "content": images})
    return out


def _message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": _tool_result_text(m)}
    reasoning = fields_sent_back(m) if m.role == "assistant" else {}
    if m.role == "assistant" and (m.tool_calls or m.refusal is not None or reasoning):
        out: dict[str, Any] = {"role": "assistant", "content": m.text or None, **reasoning}
        if m.refusal is not None:
            out["refusal"] = m.refusal
        if m.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {
                        "name": c.name,
                        # Arguments that did not parse are not echoed: the API (and proxies in front of
                        # other models) refuse a call whose arguments are not a JSON object. The tool
                        # result tells the model what was wrong.
                        "arguments": EMPTY_ARGUMENTS
                        if c.raw_arguments is not None
                        else json.dumps(c.arguments, ensure_ascii=False),
                    },
                }
                for c in m.tool_calls
            ]
        return out
    return {"role": m.role, "content": m.text}


def _tool_result_text(m: Message) -> str:
    """The tool message's content: the wire has no error flag, so an error result says so itself."""
    if not m.is_error or m.text.lstrip().lower().startswith("error"):
        return m.text
    return ERROR_PREFIX + m.text


def _usage(data: Any) -> Usage:
    if not isinstance(data, dict):
        return Usage()
    details = data.get("completion_tokens_details")
    return Usage(
        input_tokens=token_count(data.get("prompt_tokens")),
        output_tokens=token_count(data.get("completion_tokens")),
        reasoning_tokens=token_count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0,
    )


def _in_body_error(data: dict[str, Any], body: str) -> ProviderHTTPError:
    """An error reported in a 200 body or a stream chunk, with the status its code or type stands for."""
    return ProviderHTTPError(
        f"the OpenAI-compatible API reported an error: {error_detail(body)}",
        status_code=error_status(data.get("error")),
        body=body,
    )


def _joined(so_far: str, fragment: Any) -> str:
    """``so_far`` extended by a streamed name or id ``fragment``, as the SDK's accumulator does, except
    that a fragment equal to the whole value so far is a resend (some servers repeat the full name or
    id in every chunk), not a continuation."""
    if not isinstance(fragment, str) or not fragment or fragment == so_far:
        return so_far
    return so_far + fragment


class _PartialCall:
    __slots__ = ("args", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []

    def feed(self, call_id: Any, fn: Any) -> None:
        self.id = _joined(self.id, call_id)
        if fn:
            self.name = _joined(self.name, fn.get("name"))
            args = fn.get("arguments")
            if args:
                self.args.append(args)


class _OpenAIStream:
    """Assembles ``chat.completion.chunk`` events: text, refusal, tool calls by index (a legacy
    ``function_call`` as call 0), usage, finish reason."""

    __slots__ = ("calls", "done", "finish", "legacy", "model", "reasoning", "refusal", "response_id", "text", "usage")

    def __init__(self) -> None:
        self.done = False
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.legacy: _PartialCall | None = None
        self.usage: Any = None
        self.finish: str | None = None
        self.response_id: str | None = None
        self.model: str | None = None
        self.reasoning = ReasoningStream()

    def feed(self, event: SSEEvent) -> str | None:
        data = event.data
        if data == "[DONE]":
            self.done = True
            return None
        chunk = loads(data)
        if chunk.get("error") is not None:
            raise _in_body_error(chunk, data)
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        if self.model is None:
            self.model = text_or_none(chunk.get("model"))
        usage = chunk.get("usage")
        if usage:
            self.usage = usage
        out: str | None = None
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            reason = choice.get("finish_reason")
            if reason:
                self.finish = reason
            delta = choice.get("delta")
            if not delta:
                continue
            self.reasoning.feed(delta)
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._feed_calls(tool_calls)
            legacy = delta.get("function_call")
            if legacy:
                if self.legacy is None:
                    self.legacy = _PartialCall()
                self.legacy.feed(None, legacy)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refusal.append(refusal)
            content = delta.get("content")
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
            call.feed(tc.get("id"), tc.get("function"))

    def result(self) -> ModelResponse:
        partials = self.calls or ({0: self.legacy} if self.legacy is not None else {})
        calls: list[ToolCall] = []
        for index in sorted(partials):
            partial = partials[index]
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
        return _response(
            text="".join(self.text),
            refusal="".join(self.refusal) or None,
            calls=calls,
            usage=self.usage,
            reason=self.finish,
            response_id=self.response_id,
            model=self.model,
            reasoning=self.reasoning.block(),
        )
