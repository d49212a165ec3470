"""``OpenAIResponses``: OpenAI's Responses API (``POST {base_url}/responses``) over httpx."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from loom_nb.errors import ProviderHTTPError, ProviderProtocolError
from loom_nb.messages import Message, ModelRequest, ModelResponse, ReasoningBlock, ToolCall, Usage
from loom_nb.providers.http import (
    HTTPProvider,
    error_detail,
    error_status,
    excerpt,
    parse_arguments,
    text_or_none,
    token_count,
)
from loom_nb.providers.image_parts import responses_part
from loom_nb.providers.sse import SSEEvent, loads

# Why an incomplete response stopped, in the vocabulary of ``ModelResponse.finish_reason``.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}

#: Streamed as answer text (a refusal is kept apart, as on the chat wire: ``Message.refusal``).
_TEXT_DELTAS = frozenset({"response.output_text.delta"})
_LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})


class OpenAIResponses(HTTPProvider):
    """A model behind ``POST {base_url}/responses``, the Responses API OpenAI recommends for new work.

    System messages become ``instructions``; the rest of the transcript becomes input items: user and
    assistant messages, a ``function_call`` item per tool call the assistant made and a
    ``function_call_output`` item per tool result. Tools are sent as function tools with
    ``strict: false`` (loom's tool schemas are not written for strict mode). A typed answer
    (``ModelRequest.output``) is asked for as ``text.format``, a strict JSON schema. Reasoning items the
    model returns are kept on the assistant message (``Message.reasoning``, as ``reasoning_item``
    blocks holding the item), so they are
    journaled with it and sent back, in front of that turn's calls, on the next request.

    Args:
        model: The model name, e.g. ``"gpt-5-mini"``.
        store: False sends ``store: false`` and asks for ``reasoning.encrypted_content``, so that
            OpenAI keeps nothing and the reasoning travels (encrypted) in the journal instead;
            None (the default) leaves the API's default (stored).
        **options: ``base_url`` (up to and including ``/v1``), ``api_key`` (None reads
            ``OPENAI_API_KEY``; ``""`` sends no ``Authorization`` header), ``transport``,
            ``timeout``, ``extra_headers``, ``stream`` and ``max_tokens`` (sent as
            ``max_output_tokens``), as for every ``HTTPProvider``.
    """

    name = "openai-responses"
    env_var = "OPENAI_API_KEY"
    native_output = True
    path = "/responses"
    terminal = "response.completed"
    default_base_url = "https://api.openai.com/v1"

    def __init__(self, model: str, *, store: bool | None = None, **options: Any) -> None:
        super().__init__(model, **options)
        self.store = store

    def _auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def _build_body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model or self.model, "input": input_items(request.messages)}
        system = request.system
        if system:
            body["instructions"] = system
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    **({"description": t.description} if t.description else {}),
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.output is not None:
            out = request.output
            fmt = {"type": "json_schema", "name": out.name, "schema": out.json_schema, "strict": out.strict}
            body["text"] = {"format": fmt}
        limits = {"max_output_tokens": self.output_cap(request), "temperature": request.temperature}
        body.update((name, value) for name, value in limits.items() if value is not None)
        if self.stream:
            body["stream"] = True
        if self.store is not None:
            body["store"] = self.store
            if not self.store:
                body["include"] = ["reasoning.encrypted_content"]
        return body

    def _stream_state(self) -> _ResponsesStream:
        return _ResponsesStream()

    def _parse_body(self, data: dict[str, Any]) -> ModelResponse:
        if data.get("object") != "response" and isinstance(data.get("error"), dict):
            raise api_error(data["error"], json.dumps(data))
        return assemble(data, data["output"])


def input_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The Responses API ``input`` items for a transcript (system messages go to ``instructions``)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            output: str | list[dict[str, Any]] = m.text
            if m.images:  # text, then each image as an input_image part
                output = [{"type": "input_text", "text": m.text}] + [responses_part(i) for i in m.images]
            items.append({"type": "function_call_output", "call_id": m.tool_call_id or "", "output": output})
        elif m.role == "assistant":
            items.extend(b.item for b in m.reasoning if b.type == "reasoning_item" and b.item is not None)
            if m.text or not m.tool_calls:
                items.append({"type": "message", "role": "assistant", "content": m.text})
            for c in m.tool_calls:
                arguments = (
                    c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments, ensure_ascii=False)
                )
                items.append({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": arguments})
        else:
            items.append({"type": "message", "role": "user", "content": m.text})
    return items


def reasoning_param(item: dict[str, Any]) -> dict[str, Any]:
    """A ``reasoning`` output item reduced to the fields the API accepts back as an input item."""
    kept: dict[str, Any] = {
        "type": "reasoning",
        "id": item["id"],
        "summary": [
            {"type": "summary_text", "text": s["text"]}
            for s in item.get("summary") or ()
            if s.get("type") == "summary_text"
        ],
    }
    content = [
        {"type": "reasoning_text", "text": c["text"]}
        for c in item.get("content") or ()
        if c.get("type") == "reasoning_text"
    ]
    if content:
        kept["content"] = content
    if isinstance(item.get("encrypted_content"), str):
        kept["encrypted_content"] = item["encrypted_content"]
    return kept


def assemble(response: dict[str, Any], output: Iterable[dict[str, Any]]) -> ModelResponse:
    """A ``ModelResponse`` from a response object (status, usage, id) and its output items.

    Raises:
        ProviderHTTPError: The response failed (its error code gives the status).
        ProviderProtocolError: A function call has no ``call_id`` or ``name``.
    """
    if response.get("status") == "failed":
        raise api_error(response.get("error"), json.dumps(response))
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningBlock] = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                ptype = part.get("type")
                if ptype == "output_text":
                    texts.append(part["text"])
                elif ptype == "refusal":
                    refusals.append(part["refusal"])
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise ProviderProtocolError(
                    f"a function_call item has no call_id or name (the server is not speaking the Responses "
                    f"API as OpenAI does): {excerpt(json.dumps(item))!r}"
                )
            arguments, raw = parse_arguments(item.get("arguments") or "")
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw))
        elif kind == "reasoning":
            kept = reasoning_param(item)
            readable = [p["text"] for p in (*kept["summary"], *kept.get("content", ()))]
            reasoning.append(ReasoningBlock(type="reasoning_item", text="\n".join(readable), item=kept))
    usage = response.get("usage") or {}
    return ModelResponse(
        message=Message(
            role="assistant",
            text="".join(texts),
            tool_calls=tuple(calls),
            refusal="".join(refusals) if refusals else None,
            reasoning=tuple(reasoning),
        ),
        usage=Usage(
            input_tokens=token_count(usage.get("input_tokens")),
            output_tokens=token_count(usage.get("output_tokens")),
            reasoning_tokens=token_count((usage.get("output_tokens_details") or {}).get("reasoning_tokens")),
        ),
        finish_reason="refusal" if refusals and not texts and not calls else _finish(response, calls),
        response_id=text_or_none(response.get("id")),
        model=text_or_none(response.get("model")),
    )


def api_error(error: Any, body: str) -> ProviderHTTPError:
    """A failed response's ``error`` (or an ``error`` event) as a ``ProviderHTTPError``.

    The status comes from ``http.error_status`` (one table for every wire), so 429 and 5xx are
    retryable and the rest are not.
    """
    err = error if isinstance(error, dict) else {}
    nested = err.get("error")
    if isinstance(nested, dict):  # {"type": "error", "error": {...}} from some compatible servers
        err = nested
    code = next((c for c in (err.get("code"), err.get("type")) if c not in (None, "", "error")), None)
    given = err.get("message")
    message = given if isinstance(given, str) and given else error_detail(body)
    return ProviderHTTPError(
        f"the OpenAI Responses API reported error {code if code is not None else '(no code)'}: {excerpt(message, 300)}",
        status_code=error_status(err),
        body=body,
    )


def _finish(response: dict[str, Any], calls: list[ToolCall]) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(reason, reason) if isinstance(reason, str) else "incomplete"
    return "tool_calls" if calls else "stop"


class _Item:
    """One output item as its events arrive: the item as added, text or argument deltas, and the
    item as done (which wins when it came)."""

    __slots__ = ("added", "args", "args_done", "done", "text")

    def __init__(self, added: dict[str, Any]) -> None:
        self.added = added
        self.text: list[str] = []
        self.args: list[str] = []
        self.args_done: str | None = None
        self.done: dict[str, Any] | None = None

    def final(self) -> dict[str, Any]:
        if self.done is not None:
            return self.done
        if self.added.get("type") == "function_call":
            args = self.args_done if self.args_done is not None else "".join(self.args)
            return {**self.added, "arguments": args}
        if self.added.get("type") == "message" or self.text:
            return {"type": "message", "content": [{"type": "output_text", "text": "".join(self.text)}]}
        return self.added


class _ResponsesStream:
    """Assembles the Responses API's semantic events: output items by index, then the final response."""

    __slots__ = ("done", "items", "response")

    def __init__(self) -> None:
        self.done = False
        self.items: dict[int, _Item] = {}
        self.response: dict[str, Any] = {}

    def _item(self, data: dict[str, Any], kind: str) -> _Item:
        index = data["output_index"]
        item = self.items.get(index)
        if item is None:  # a delta before its output_item.added: keep it anyway
            item = self.items[index] = _Item({"type": kind, "id": data.get("item_id")})
        return item

    def feed(self, event: SSEEvent) -> str | None:
        data = loads(event.data)
        kind = data["type"]
        if kind in _TEXT_DELTAS:
            delta = data["delta"]
            self._item(data, "message").text.append(delta)
            return delta if isinstance(delta, str) else None
        if kind == "response.function_call_arguments.delta":
            self._item(data, "function_call").args.append(data["delta"])
        elif kind == "response.function_call_arguments.done":
            self._item(data, "function_call").args_done = data["arguments"]
        elif kind == "response.output_item.added":
            self.items[data["output_index"]] = _Item(data["item"])
        elif kind == "response.output_item.done":
            self._item(data, data["item"].get("type", "")).done = data["item"]
        elif kind in ("response.completed", "response.incomplete"):
            self.response = data["response"]
            self.done = True
        elif kind in _LIFECYCLE:
            self.response = data["response"]
        elif kind == "response.failed":
            raise api_error(data["response"].get("error"), event.data)
        elif kind == "error":
            raise api_error(data, event.data)
        # Reasoning summaries, content parts, text "done" events and event types added later
        # carry nothing the final response does not.
        return None

    def result(self) -> ModelResponse:
        output = self.response.get("output")
        if not output:  # some servers leave the final output out: rebuild it from the events
            output = [self.items[i].final() for i in sorted(self.items)]
        return assemble(self.response, output)
