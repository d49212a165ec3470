"""A local HTTP server that speaks the OpenAI chat-completions, OpenAI Responses and Anthropic
messages wire formats.

Each test pushes a script of scenarios (``Reply``, ``Fail``, ``Cut``...); every request the server
receives takes the next one and is recorded (path, headers, JSON body) for the test to inspect.
The server renders one wire-agnostic ``Reply`` in the format the request asked for: by path
(``/v1/chat/completions``, ``/v1/responses`` or ``/v1/messages``) and by ``"stream"`` in the body (SSE, sent as
HTTP/1.1 chunks, or one JSON body).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
RESPONSES_PATH = "/v1/responses"
_TO_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


@dataclass
class Call:
    """A tool call the model makes; its argument text arrives in ``fragments``."""

    id: str
    name: str
    fragments: list[str]


@dataclass
class Reply:
    """A successful answer: text deltas, tool calls, usage.

    ``chunk_size`` re-cuts the streamed bytes into pieces of that many bytes (to split lines,
    CRLFs and UTF-8 characters across reads); ``crlf`` ends lines with CRLF.
    """

    text: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    usage: tuple[int, int] = (21, 13)
    finish: str | None = None
    id: str = "resp_123"
    #: The model the server says answered (a dated name, as real servers send).
    model: str = "m-2026-01-01"
    #: Chat wire: fields put on the assistant message (non-streamed), and deltas streamed before the
    #: text (e.g. the reasoning shapes of compatible servers: ``reasoning_content``, ``thinking_blocks``).
    message_fields: dict[str, Any] = field(default_factory=dict)
    extra_deltas: list[dict[str, Any]] = field(default_factory=list)
    chunk_size: int | None = None
    crlf: bool = False

    @property
    def finish_reason(self) -> str:
        """The finish reason in the OpenAI vocabulary."""
        return self.finish or ("tool_calls" if self.calls else "stop")


@dataclass
class Fail:
    """An error status with the provider's error body (or ``raw_body`` verbatim)."""

    status: int
    message: str
    error_type: str = "api_error"
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None


@dataclass
class Cut:
    """Stream ``reply`` but close the connection in the middle of event ``after``.

    ``chunked=False``: the body is close-delimited, so the client sees a clean end of stream.
    ``chunked=True``: the chunked body never gets its last chunk, an HTTP-level error.
    """

    reply: Reply
    after: int
    chunked: bool = False


@dataclass
class Malformed:
    """Stream ``reply`` with the JSON of event ``at`` cut in half."""

    reply: Reply
    at: int


@dataclass
class StreamError:
    """Stream the first ``after`` events of ``reply``, then the provider's in-stream error event."""

    reply: Reply
    after: int
    error_type: str = "overloaded_error"
    message: str = "Overloaded"
    code: int = 503


@dataclass
class Hang:
    """Answer nothing for ``seconds`` (or until the server stops)."""

    seconds: float


@dataclass
class Raw:
    """A 200 response with this content type and body."""

    content_type: str
    body: str


Scenario = Reply | Fail | Cut | Malformed | StreamError | Hang | Raw


@dataclass
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    client_port: int


# --------------------------------------------------------------------------------------------------
# rendering


def _sse(data: Any, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def openai_events(reply: Reply, *, include_usage: bool) -> list[str]:
    """The SSE events of ``reply`` as chat.completion.chunk objects (tool-call fragments interleaved)."""
    base = {"id": reply.id, "object": "chat.completion.chunk", "created": 1, "model": reply.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""}), ": keep-alive\n\n"]
    events += [chunk(d) for d in reply.extra_deltas]
    events += [chunk({"content": t}) for t in reply.text]
    for i, c in enumerate(reply.calls):
        head = {"index": i, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        events.append(chunk({"tool_calls": [head]}))
    for r in range(max((len(c.fragments) for c in reply.calls), default=0)):
        for i, c in enumerate(reply.calls):
            if r < len(c.fragments):
                events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": c.fragments[r]}}]}))
    events.append(chunk({}, reply.finish_reason))
    if include_usage:
        pin, pout = reply.usage
        usage = {"prompt_tokens": pin, "completion_tokens": pout, "total_tokens": pin + pout}
        events.append(_sse({**base, "choices": [], "usage": usage}))
    events.append(_sse("[DONE]"))
    return events


def openai_body(reply: Reply) -> dict[str, Any]:
    """``reply`` as a non-streamed chat.completion."""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.text) or None, **reply.message_fields}
    if reply.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "".join(c.fragments)}}
            for c in reply.calls
        ]
    pin, pout = reply.usage
    return {
        "id": reply.id,
        "object": "chat.completion",
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": {"prompt_tokens": pin, "completion_tokens": pout, "total_tokens": pin + pout},
    }


def anthropic_events(reply: Reply) -> list[str]:
    """The SSE events of ``reply`` in the messages-API stream format."""
    pin, pout = reply.usage
    start: dict[str, Any] = {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": pin, "output_tokens": 1},
    }
    events = [_sse({"type": "message_start", "message": start}, "message_start")]
    events.append(_sse({"type": "ping"}, "ping"))
    index = 0
    blocks: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    if reply.text:
        deltas = [{"type": "text_delta", "text": t} for t in reply.text]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for c in reply.calls:
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in c.fragments]
        blocks.append(({"type": "tool_use", "id": c.id, "name": c.name, "input": {}}, deltas))
    for index, (block, deltas) in enumerate(blocks):
        events.append(
            _sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
        )
        for d in deltas:
            events.append(_sse({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta"))
        events.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    stop = _TO_ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason)
    delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    events.append(_sse({**delta, "usage": {"output_tokens": pout}}, "message_delta"))
    events.append(_sse({"type": "message_stop"}, "message_stop"))
    return events


def anthropic_body(reply: Reply) -> dict[str, Any]:
    """``reply`` as a non-streamed messages-API message."""
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": "".join(reply.text)})
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads("".join(c.fragments) or "{}")}
        for c in reply.calls
    ]
    pin, pout = reply.usage
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": _TO_ANTHROPIC_STOP.get(reply.finish_reason, reply.finish_reason),
        "stop_sequence": None,
        "usage": {"input_tokens": pin, "output_tokens": pout},
    }


def _responses_items(reply: Reply) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    """Each output item of ``reply`` in the Responses format: as added, as done, and its deltas."""
    items: list[tuple[dict[str, Any], dict[str, Any], list[str]]] = []
    if reply.text:
        head = {"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "".join(reply.text), "annotations": []}
        items.append((head, {**head, "status": "completed", "content": [part]}, reply.text))
    for j, c in enumerate(reply.calls):
        head = {"id": f"fc_{j}", "type": "function_call", "call_id": c.id, "name": c.name, "arguments": ""}
        items.append((head, {**head, "status": "completed", "arguments": "".join(c.fragments)}, c.fragments))
    return items


def responses_body(reply: Reply) -> dict[str, Any]:
    """``reply`` as a Responses-API response object (``incomplete`` when it stopped at the length cap)."""
    pin, pout = reply.usage
    length = reply.finish_reason == "length"
    return {
        "id": reply.id,
        "object": "response",
        "model": reply.model,
        "status": "incomplete" if length else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if length else None,
        "output": [done for _, done, _ in _responses_items(reply)],
        "usage": {"input_tokens": pin, "output_tokens": pout, "total_tokens": pin + pout},
    }


def responses_events(reply: Reply) -> list[str]:
    """The SSE events of ``reply`` in the Responses-API stream format."""
    seq = iter(range(1_000_000))

    def event(kind: str, **fields: Any) -> str:
        return _sse({"type": kind, "sequence_number": next(seq), **fields}, kind)

    final = responses_body(reply)
    events = [event("response.created", response={**final, "status": "in_progress", "output": []}), ": keep-alive\n\n"]
    for index, (head, done, deltas) in enumerate(_responses_items(reply)):
        events.append(event("response.output_item.added", output_index=index, item=head))
        kind = "response.output_text.delta" if head["type"] == "message" else "response.function_call_arguments.delta"
        events += [event(kind, output_index=index, item_id=head["id"], delta=d) for d in deltas]
        events.append(event("response.output_item.done", output_index=index, item=done))
    events.append(event(f"response.{final['status']}", response=final))
    return events


def error_body(wire: str, fail: Fail) -> str:
    """The provider's JSON error body for ``fail``."""
    if fail.raw_body is not None:
        return fail.raw_body
    if wire == "anthropic":
        return json.dumps({"type": "error", "error": {"type": fail.error_type, "message": fail.message}})
    return json.dumps({"error": {"message": fail.message, "type": fail.error_type, "code": None}})


def stream_error_event(wire: str, err: StreamError) -> str:
    """The provider's in-stream error event."""
    if wire == "responses":
        return _sse({"type": "error", "code": err.error_type, "message": err.message, "sequence_number": 0}, "error")
    if wire == "anthropic":
        return _sse({"type": "error", "error": {"type": err.error_type, "message": err.message}}, "error")
    return _sse({"error": {"message": err.message, "type": err.error_type, "code": err.code}})


def _cut_json(event: str) -> str:
    """``event`` with the JSON on its data line cut in half (the event itself stays complete)."""
    lines = event.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("data: {"):
            lines[i] = line[: len(line) // 2]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProviderServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.requests.append(Recorded("POST", self.path, headers, body, self.client_address[1]))
        wire = {OPENAI_PATH: "openai", ANTHROPIC_PATH: "anthropic", RESPONSES_PATH: "responses"}.get(self.path)
        if wire is None:
            self._send(404, "application/json", json.dumps({"error": {"message": f"no route {self.path}"}}))
            return
        scenario = self.server.next_scenario()
        if scenario is None:
            self._send(500, "application/json", json.dumps({"error": {"message": "no scenario scripted"}}))
            return
        streaming = isinstance(body, dict) and body.get("stream") is True
        self._serve(wire, scenario, streaming, body if isinstance(body, dict) else {})

    def _serve(self, wire: str, s: Scenario, streaming: bool, body: dict[str, Any]) -> None:
        if isinstance(s, Hang):
            self.server.stopping.wait(s.seconds)
            self.close_connection = True
            return
        if isinstance(s, Fail):
            self._send(s.status, "application/json", error_body(wire, s), s.headers)
            return
        if isinstance(s, Raw):
            self._send(200, s.content_type, s.body)
            return
        reply = s if isinstance(s, Reply) else s.reply
        if not streaming:
            doc = {"openai": openai_body, "anthropic": anthropic_body, "responses": responses_body}[wire](reply)
            self._send(200, "application/json", json.dumps(doc))
            return
        if wire == "responses":
            events = responses_events(reply)
        elif wire == "openai":
            include_usage = (body.get("stream_options") or {}).get("include_usage") is True
            events = openai_events(reply, include_usage=include_usage)
        else:
            events = anthropic_events(reply)
        if isinstance(s, Cut):
            half = events[s.after][: len(events[s.after]) // 2]
            self._stream([*events[: s.after], half], reply, end=False, chunked=s.chunked)
        elif isinstance(s, Malformed):
            self._stream([*events[: s.at], _cut_json(events[s.at]), *events[s.at + 1 :]], reply)
        elif isinstance(s, StreamError):
            self._stream([*events[: s.after], stream_error_event(wire, s)], reply)
        else:
            self._stream(events, reply)

    def _send(self, status: int, ctype: str, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, events: list[str], reply: Reply, *, end: bool = True, chunked: bool = True) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("connection", "close")
        self.end_headers()
        pieces = [e.replace("\n", "\r\n") if reply.crlf else e for e in events]
        payloads = [p.encode("utf-8") for p in pieces]
        if reply.chunk_size:
            whole = b"".join(payloads)
            payloads = [whole[i : i + reply.chunk_size] for i in range(0, len(whole), reply.chunk_size)]
        for data in payloads:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            self.wfile.flush()
        if end and chunked:
            self.wfile.write(b"0\r\n\r\n")
        if not end:
            self.close_connection = True


class ProviderServer(ThreadingHTTPServer):
    """The fake provider: ``push`` scenarios, point a client at ``url``, read ``requests``."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()
        self._script: list[Scenario] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's root URL, ``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def push(self, *scenarios: Scenario) -> None:
        """Append scenarios; each request consumes the next one."""
        with self._lock:
            self._script.extend(scenarios)

    def next_scenario(self) -> Scenario | None:
        """The next scripted scenario, or None when the script is used up."""
        with self._lock:
            return self._script.pop(0) if self._script else None

    @property
    def pending(self) -> int:
        """How many scripted scenarios no request has consumed yet."""
        with self._lock:
            return len(self._script)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet: a client that hangs up mid-response (timeouts, cuts) is part of the tests."""

    def start(self) -> None:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, wake hanging handlers and close the listening socket."""
        self.stopping.set()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


@contextmanager
def running_server() -> Iterator[ProviderServer]:
    """A started ``ProviderServer``, stopped on exit."""
    server = ProviderServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port
