"""The official ``openai`` SDK as the test oracle for ``OpenAIResponses``.

``check_params`` validates a request body strictly against the SDK's ``ResponseCreateParams``
TypedDicts with the shared walker ``strict_types.violations``: every key must be declared (at any
depth), every required key present, every value of its declared type. ``sdk_stream`` renders a
scripted answer as the SDK's own event models (``.model_dump_json()`` each) in the order the API
sends them, and ``sdk_final`` reads bytes with the SDK's own client and stream accumulator.
"""

from __future__ import annotations

import collections.abc
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response_create_params import ResponseCreateParams
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

from tests.providers.typed_dict_check import violations

# --------------------------------------------------------------------------------------------------
# request bodies, checked strictly against the SDK's TypedDicts


class ParamsError(AssertionError):
    """A request body the SDK's types do not allow."""


def check_params(body: Any) -> None:
    """Raise ``ParamsError`` unless ``body`` is a ``ResponseCreateParams`` with no undeclared key."""
    found = violations(body, ResponseCreateParams)
    if found:
        raise ParamsError("the body does not fit ResponseCreateParams:\n" + "\n".join(found[:20]))


# --------------------------------------------------------------------------------------------------
# SDK event streams


@dataclass
class SdkCall:
    """A function call of the scripted answer; ``fragments`` are its argument deltas."""

    call_id: str
    name: str
    fragments: list[str]


@dataclass
class SdkAnswer:
    """A scripted answer: a reasoning item, text deltas, function calls, usage and how it ends."""

    text: list[str] = field(default_factory=list)
    calls: list[SdkCall] = field(default_factory=list)
    reasoning: list[str] | None = None
    usage: tuple[int, int] = (21, 13)
    incomplete: str | None = None  # e.g. "max_output_tokens": end with response.incomplete
    final_output: bool = True  # False: the terminal event's response carries output: null
    id: str = "resp_0001"


def _response(answer: SdkAnswer, output: list[Any], status: str, *, usage: bool) -> Response:
    pin, pout = answer.usage
    return Response.model_validate(
        {
            "id": answer.id,
            "object": "response",
            "created_at": 1.0,
            "model": "gpt-test",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "status": status,
            "incomplete_details": {"reason": answer.incomplete} if answer.incomplete else None,
            "usage": ResponseUsage(
                input_tokens=pin,
                output_tokens=pout,
                total_tokens=pin + pout,
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            )
            if usage
            else None,
        }
    )


def sdk_events(answer: SdkAnswer) -> list[BaseModel]:
    """The SDK event models of ``answer``, in the order the API streams them."""
    seq = iter(range(10_000))
    events: list[BaseModel] = []
    output: list[Any] = []

    def item_event(kind: type[BaseModel], item: Any) -> None:
        """An ``output_item.added`` or ``.done`` event for the item at the next output index."""
        suffix = "added" if kind is ResponseOutputItemAddedEvent else "done"
        events.append(
            kind(item=item, output_index=len(output), sequence_number=next(seq), type=f"response.output_item.{suffix}")
        )

    def at(kind: type[BaseModel], type_: str, **fields: Any) -> None:
        """An event about the item at the next output index."""
        events.append(kind(output_index=len(output), sequence_number=next(seq), type=type_, **fields))

    created = _response(answer, [], "in_progress", usage=False)
    events.append(ResponseCreatedEvent(response=created, sequence_number=next(seq), type="response.created"))
    events.append(ResponseInProgressEvent(response=created, sequence_number=next(seq), type="response.in_progress"))
    if answer.reasoning is not None:
        rid = "rs_0001"
        item_event(ResponseOutputItemAddedEvent, ResponseReasoningItem(id=rid, summary=[], type="reasoning"))
        for part in answer.reasoning:
            at(
                ResponseReasoningSummaryTextDeltaEvent,
                "response.reasoning_summary_text.delta",
                delta=part,
                item_id=rid,
                summary_index=0,
            )
        summary = [Summary(text="".join(answer.reasoning), type="summary_text")]
        done = ResponseReasoningItem(
            id=rid, summary=summary, type="reasoning", encrypted_content="gAAAA-opaque", status="completed"
        )
        item_event(ResponseOutputItemDoneEvent, done)
        output.append(done)
    if answer.text:
        mid = "msg_0001"
        added = ResponseOutputMessage(id=mid, content=[], role="assistant", status="in_progress", type="message")
        item_event(ResponseOutputItemAddedEvent, added)
        empty = ResponseOutputText(annotations=[], text="", type="output_text")
        part_fields: dict[str, Any] = {"content_index": 0, "item_id": mid}
        at(ResponseContentPartAddedEvent, "response.content_part.added", part=empty, **part_fields)
        for delta in answer.text:
            at(ResponseTextDeltaEvent, "response.output_text.delta", delta=delta, logprobs=[], **part_fields)
        text = "".join(answer.text)
        at(ResponseTextDoneEvent, "response.output_text.done", text=text, logprobs=[], **part_fields)
        part = ResponseOutputText(annotations=[], text=text, type="output_text")
        at(ResponseContentPartDoneEvent, "response.content_part.done", part=part, **part_fields)
        status = "incomplete" if answer.incomplete else "completed"
        message = ResponseOutputMessage(id=mid, content=[part], role="assistant", status=status, type="message")
        item_event(ResponseOutputItemDoneEvent, message)
        output.append(message)
    for j, c in enumerate(answer.calls):
        fid = f"fc_{j:04d}"
        call_fields: dict[str, Any] = {"call_id": c.call_id, "name": c.name, "type": "function_call", "id": fid}
        item_event(
            ResponseOutputItemAddedEvent, ResponseFunctionToolCall(arguments="", status="in_progress", **call_fields)
        )
        for fragment in c.fragments:
            at(
                ResponseFunctionCallArgumentsDeltaEvent,
                "response.function_call_arguments.delta",
                delta=fragment,
                item_id=fid,
            )
        arguments = "".join(c.fragments)
        at(
            ResponseFunctionCallArgumentsDoneEvent,
            "response.function_call_arguments.done",
            arguments=arguments,
            item_id=fid,
        )
        call = ResponseFunctionToolCall(arguments=arguments, status="completed", **call_fields)
        item_event(ResponseOutputItemDoneEvent, call)
        output.append(call)
    if answer.incomplete:
        final = _response(answer, output, "incomplete", usage=True)
        events.append(ResponseIncompleteEvent(response=final, sequence_number=next(seq), type="response.incomplete"))
    else:
        final = _response(answer, output, "completed", usage=True)
        events.append(ResponseCompletedEvent(response=final, sequence_number=next(seq), type="response.completed"))
    return events


def sse_bytes(events: list[BaseModel], *, final_output: bool = True) -> bytes:
    """The events as the API's SSE bytes (``event:`` and ``data:`` lines, ``.model_dump_json()``).

    ``final_output=False`` sends the terminal event's response with ``output: null``.
    """
    out = []
    for i, event in enumerate(events):
        data = event.model_dump_json(exclude_unset=True)
        if not final_output and i == len(events) - 1:
            doc = json.loads(data)
            doc["response"]["output"] = None
            data = json.dumps(doc)
        out.append(f"event: {event.type}\ndata: {data}\n\n")  # type: ignore[attr-defined]
    return "".join(out).encode("utf-8")


def answer_bytes(answer: SdkAnswer) -> bytes:
    """``answer`` as SSE bytes."""
    return sse_bytes(sdk_events(answer), final_output=answer.final_output)


def answer_body(answer: SdkAnswer) -> bytes:
    """``answer`` as a non-streamed ``Response`` body (the terminal event's response)."""
    terminal = sdk_events(answer)[-1]
    return terminal.response.model_dump_json(exclude_unset=True).encode()  # type: ignore[attr-defined]


def chunked(data: bytes, cuts: list[int]) -> httpx.AsyncByteStream:
    """``data`` as an async byte stream cut at ``cuts`` (offsets)."""
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]

    class _Stream(httpx.AsyncByteStream):
        async def __aiter__(self) -> collections.abc.AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

    return _Stream()


def sse_transport(data: bytes, cuts: list[int] | None = None) -> httpx.MockTransport:
    """A transport answering every request with ``data`` as an event stream (cut at ``cuts``)."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=chunked(data, cuts or []))

    return httpx.MockTransport(handler)


async def sdk_final(data: bytes, cuts: list[int] | None = None) -> Response:
    """What the SDK's own client and stream accumulator make of the SSE bytes ``data``."""
    async with httpx.AsyncClient(transport=sse_transport(data, cuts)) as http:
        client = openai.AsyncOpenAI(api_key="sk-oracle", base_url="http://127.0.0.1:9/v1", http_client=http)
        terminal: Response | None = None
        async with client.responses.stream(model="gpt-test", input="hi") as stream:
            async for event in stream:
                if event.type == "response.incomplete":  # get_final_response wants response.completed
                    terminal = event.response
            return terminal if terminal is not None else await stream.get_final_response()


async def sdk_body(data: bytes) -> Response:
    """What the SDK's own client makes of the non-streamed body ``data``."""
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "application/json"}, content=data)
    )
    async with httpx.AsyncClient(transport=transport) as http:
        client = openai.AsyncOpenAI(api_key="sk-oracle", base_url="http://127.0.0.1:9/v1", http_client=http)
        return await client.responses.create(model="gpt-test", input="hi")
