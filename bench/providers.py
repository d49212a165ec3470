"""The HTTP providers' own overhead per streamed response.

A 200-delta SSE stream is served from memory by ``httpx.MockTransport`` (the whole body in one
response). The baseline sends the same POST and reads the same bytes with ``aiter_lines``; the
provider run is ``complete(request, on_delta=...)``, which also builds the request body, parses the
events and JSON, assembles the text and builds the ``ModelResponse``. Both open a client per call,
as ``complete`` does outside ``async with provider``. Medians of many runs, after a warm-up.

Run: ``.venv/bin/python bench/providers.py [--deltas 200] [--runs 400]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx

from loom_nb.messages import Message, ModelRequest
from loom_nb.providers import AnthropicMessages, OpenAIChat, OpenAIResponses
from loom_nb.providers.http import HTTPProvider

#: A key as long as real ones, so the per-delta redaction of secrets is measured.
BENCH_KEY = "sk-bench-" + "0123456789abcdef" * 3
REQUEST = ModelRequest(messages=(Message.system("Be brief."), Message.user("Tell me a story.")))


def _sse(data: object, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def openai_stream(deltas: int) -> bytes:
    """A chat-completions stream of ``deltas`` text chunks, a usage chunk and ``[DONE]``."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, object], finish: str | None = None) -> str:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": f"token{i} "}) for i in range(deltas)]
    parts.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 12, "completion_tokens": deltas, "total_tokens": 12 + deltas}
    parts.append(_sse({**base, "choices": [], "usage": usage}))
    parts.append(_sse("[DONE]"))
    return "".join(parts).encode()


def anthropic_stream(deltas: int) -> bytes:
    """A messages-API stream of one text block of ``deltas`` deltas."""
    start: dict[str, object] = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    parts = [_sse({"type": "message_start", "message": start}, "message_start")]
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    parts.append(_sse(block, "content_block_start"))
    parts.append(_sse({"type": "ping"}, "ping"))
    for i in range(deltas):
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": f"token{i} "},
        }
        parts.append(_sse(delta, "content_block_delta"))
    parts.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": deltas},
    }
    parts.append(_sse(message_delta, "message_delta"))
    parts.append(_sse({"type": "message_stop"}, "message_stop"))
    return "".join(parts).encode()


def responses_stream(deltas: int) -> bytes:
    """A Responses-API stream: one message item of ``deltas`` text deltas, then ``response.completed``."""
    response: dict[str, object] = {"id": "resp_bench", "object": "response", "status": "in_progress", "output": []}
    message: dict[str, object] = {"id": "msg_bench", "type": "message", "role": "assistant", "content": []}
    seq = iter(range(deltas + 10))

    def event(kind: str, **fields: object) -> str:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    parts = [event("response.created", response=response), event("response.in_progress", response=response)]
    parts.append(event("response.output_item.added", output_index=0, item=message))
    part = {"type": "output_text", "text": "", "annotations": []}
    parts.append(event("response.content_part.added", output_index=0, content_index=0, item_id="msg_bench", part=part))
    for i in range(deltas):
        parts.append(
            event(
                "response.output_text.delta",
                output_index=0,
                content_index=0,
                item_id="msg_bench",
                delta=f"token{i} ",
                logprobs=[],
            )
        )
    text = "".join(f"token{i} " for i in range(deltas))
    done = {**message, "status": "completed", "content": [{**part, "text": text}]}
    parts.append(event("response.output_text.done", output_index=0, content_index=0, item_id="msg_bench", text=text))
    parts.append(event("response.output_item.done", output_index=0, item=done))
    usage = {"input_tokens": 12, "output_tokens": deltas, "total_tokens": 12 + deltas}
    final = {**response, "status": "completed", "output": [done], "usage": usage}
    parts.append(event("response.completed", response=final))
    return "".join(parts).encode()


def transport_for(body: bytes) -> httpx.MockTransport:
    """A transport that answers every request with ``body`` as an event stream."""
    headers = {"content-type": "text/event-stream"}
    return httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, content=body))


async def _paired_ms(
    a: Callable[[], Awaitable[object]], b: Callable[[], Awaitable[object]], runs: int
) -> tuple[float, float, float]:
    """Medians of ``a``, of ``b`` and of ``b - a``, timed in alternating pairs after a warm-up."""
    for _ in range(max(20, runs // 10)):
        await a()
        await b()
    ta, tb = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        await a()
        t1 = time.perf_counter()
        await b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    diff = [y - x for x, y in zip(ta, tb, strict=True)]
    return tuple(statistics.median(v) * 1000.0 for v in (ta, tb, diff))  # type: ignore[return-value]


async def bench(
    name: str, make: Callable[[httpx.AsyncBaseTransport], HTTPProvider], body: bytes, url: str, runs: int
) -> None:
    """Print the baseline, the provider and their difference for one wire format."""
    transport = transport_for(body)
    provider = make(transport)
    payload = {"model": "m", "messages": [{"role": "user", "content": "Tell me a story."}], "stream": True}
    sink: list[str] = []

    async def baseline() -> None:
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", url, json=payload) as response,
        ):
            async for _line in response.aiter_lines():
                pass

    async def provider_call() -> None:
        sink.clear()
        await provider.complete(REQUEST, on_delta=sink.append)

    await provider_call()
    assert len(sink) > 0 and "".join(sink).startswith("token0 ")
    b, p, d = await _paired_ms(baseline, provider_call, runs)
    print(f"{name:<10} baseline (aiter_lines) {b:7.3f} ms   provider {p:7.3f} ms   overhead {d:+7.3f} ms")


async def main() -> None:
    """Run every provider."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    wires: list[tuple[str, type[HTTPProvider], Callable[[int], bytes], str]] = [
        ("openai", OpenAIChat, openai_stream, "https://api.openai.com/v1/chat/completions"),
        ("anthropic", AnthropicMessages, anthropic_stream, "https://api.anthropic.com/v1/messages"),
        ("responses", OpenAIResponses, responses_stream, "https://api.openai.com/v1/responses"),
    ]
    bodies = {name: stream(args.deltas) for name, _, stream, _ in wires}
    sizes = ", ".join(f"{name} {len(body)} B" for name, body in bodies.items())
    print(f"{args.deltas}-delta stream, median of {args.runs} paired runs ({sizes})")
    for name, cls, _, url in wires:
        await bench(name, lambda t, cls=cls: cls("m", api_key=BENCH_KEY, transport=t), bodies[name], url, args.runs)


if __name__ == "__main__":
    asyncio.run(main())
