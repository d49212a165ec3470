"""A real OTLP path: the SDK's OTLP/HTTP exporter posts an agent run's trace to a receiver on
127.0.0.1, which decodes the protobuf body (``ExportTraceServiceRequest``) as a collector would."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import loom_nb as loom
from tests.analysis.support import tidy_run


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: accepts ``POST /v1/traces`` (protobuf) and keeps the requests."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[tuple[str, str]] = []

    @property
    def endpoint(self) -> str:
        """The URL to export to."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def spans(self) -> list[tuple[str, Span]]:
        """``(service.name, span)`` of every span received."""
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                service = next(a.value.string_value for a in rs.resource.attributes if a.key == "service.name")
                out += [(service, span) for ss in rs.scope_spans for span in ss.spans]
        return out


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append((self.path, self.headers["Content-Type"]))
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append(request)
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind)


def _attributes(span: Span) -> dict[str, Any]:
    return {a.key: _value(a.value) for a in span.attributes}


@pytest.mark.slow
async def test_an_agent_run_reaches_an_otlp_http_receiver(rt: loom.Runtime, receiver: Receiver) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "loom-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint, timeout=10)))
    try:
        export = loom.tracing.export(rt, provider)
        eid = await tidy_run(rt)
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
    assert receiver.paths and set(receiver.paths) == {("/v1/traces", "application/x-protobuf")}
    received = receiver.spans()
    assert {service for service, _ in received} == {"loom-test"}
    spans = {(s.name, _attributes(s).get("loom.gate_id") or _attributes(s).get("loom.step_id")): s for _, s in received}
    assert len(spans) == len(received) == 11
    root = spans[("invoke_agent agent", None)]
    assert root.parent_span_id == b"" and root.trace_id.hex() == export.traces[0][1]
    assert _attributes(root)["gen_ai.operation.name"] == "invoke_agent"
    assert _attributes(root)["loom.execution_id"] == eid
    chat = spans[("chat model.agent", "#turn:0")]
    assert chat.kind == Span.SpanKind.SPAN_KIND_CLIENT
    assert {k: v for k, v in _attributes(chat).items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "model.agent",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    tool = spans[("execute_tool delete_file", "#turn:1:tool:0")]
    assert _attributes(tool)["gen_ai.tool.name"] == "delete_file"
    assert _attributes(tool)["gen_ai.tool.call.id"] == "call_0"
    refused = spans[("gate AgentToolApproval", "#turn:1:tool:1:approval")]
    assert (_attributes(refused)["loom.gate.answer"], _attributes(refused)["loom.gate.reason"]) == ("refused", "keep b")
    assert refused.status.code == Status.StatusCode.STATUS_CODE_UNSET
    by_id = {s.span_id: s for _, s in received}
    assert by_id[tool.parent_span_id].name == "turn 1"
    assert by_id[by_id[tool.parent_span_id].parent_span_id] == root
    assert {s.trace_id for _, s in received} == {root.trace_id}
    events = rt.journal.read(eid)
    assert root.start_time_unix_nano / 1e9 == events[0].at and root.end_time_unix_nano / 1e9 == events[-1].at


async def test_an_unreachable_backend_never_breaks_a_run(rt: loom.Runtime, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=0.5)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    try:
        export = loom.tracing.export(rt, provider)
        eid = await tidy_run(rt)
        assert rt.journal.read(eid)[-1].kind == "execution_completed"
        assert [e for e, _ in export.traces] == [eid]
        provider.force_flush(5_000)
        assert "Failed to export spans batch" in caplog.text  # the exporter's own log: dropped, not raised
    finally:
        provider.shutdown()


class _Exploding(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the span pipeline broke")


async def test_a_failing_span_pipeline_is_logged_and_the_run_goes_on(
    rt: loom.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(_Exploding())
    loom.tracing.export(rt, provider)
    eid = await tidy_run(rt)
    assert rt.journal.read(eid)[-1].kind == "execution_completed"
    assert "a loom_nb event observer failed" in caplog.text
