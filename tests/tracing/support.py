"""Helpers of the tracing tests: an in-memory span recorder, the span tree, the journal's own times
and a field-by-field form of a span (ids aside).

Import as ``from tests.tracing.support import ...``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import loom_nb as loom
from loom_nb.errors import NotAuthorizedError
from loom_nb.journal import DuckDBJournal, InMemoryJournal
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import FlowRegistry
from loom_nb.testing import FakeClock, SeededRandom, SequentialIds
from tests.agent import golden_agent_flows


class Recorder:
    """A tracer provider whose finished spans are kept in memory (``spans()``, ``clear()``)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        """The spans finished so far, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        """Forget the spans finished so far."""
        self.exporter.clear()

    def shutdown(self) -> None:
        """Shut the provider down."""
        self.provider.shutdown()


def key(span: ReadableSpan) -> tuple[str, Any]:
    """What identifies a span within one trace without its ids: its name and its loom id."""
    attrs = span.attributes or {}
    ident = attrs.get("loom.gate_id") or attrs.get("loom.step_id") or attrs.get("loom.turn")
    if span.parent is None:
        ident = attrs.get("loom.execution_id")
    return (span.name, ident)


def by_key(spans: Iterable[ReadableSpan]) -> dict[tuple[str, Any], ReadableSpan]:
    """Spans by ``key`` (each key must be unique)."""
    out: dict[tuple[str, Any], ReadableSpan] = {}
    for span in spans:
        assert key(span) not in out, f"two spans {key(span)}"
        out[key(span)] = span
    return out


def parent_key(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> tuple[str, Any] | None:
    """The key of ``span``'s parent among ``spans`` (None for a root); its trace must be the parent's."""
    if span.parent is None:
        return None
    (parent,) = [p for p in spans if p.context is not None and p.context.span_id == span.parent.span_id]
    assert parent.context is not None and span.context is not None
    assert parent.context.trace_id == span.context.trace_id
    return key(parent)


def tree(spans: Sequence[ReadableSpan]) -> dict[tuple[str, Any], tuple[str, Any] | None]:
    """Each span's key and its parent's key."""
    return {key(s): parent_key(s, spans) for s in spans}


def fields(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Everything a span carries but its own ids: name, kind, parent, times, attributes, events, status."""
    return {
        "name": span.name,
        "kind": span.kind,
        "parent": parent_key(span, spans),
        "start": span.start_time,
        "end": span.end_time,
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
        "status": (span.status.status_code, span.status.description),
        "links": list(span.links),
    }


def trace_fields(spans: Sequence[ReadableSpan]) -> dict[tuple[str, Any], dict[str, Any]]:
    """``fields`` of every span of one trace, by key."""
    return {key(s): fields(s, spans) for s in spans}


def step_times(events: Sequence[Event], step_id: str) -> tuple[float, float]:
    """A step's journaled start (its first ``step_started``) and end (its last completion or final
    failure), read straight from the events."""
    mine = [e for e in events if e.step_id == step_id]
    start = next(e.at for e in mine if e.kind == EventKind.STEP_STARTED)
    ends = [
        e.at
        for e in mine
        if e.kind == EventKind.STEP_COMPLETED or (e.kind == EventKind.STEP_FAILED and not e.data.get("will_retry"))
    ]
    return start, ends[-1]


def event_time(events: Sequence[Event], kind: str, step_id: str | None = None) -> float:
    """The time of the one event of ``kind`` (about ``step_id``)."""
    (at,) = [e.at for e in events if e.kind == kind and e.step_id == step_id]
    return at


def seconds(ns: int | None) -> float:
    """OpenTelemetry nanoseconds back as epoch seconds."""
    assert ns is not None
    return ns / 1e9


# -- real agent runs ------------------------------------------------------------------------------
async def failed_run(rt: loom.Runtime) -> str:
    """An agent whose tool is refused by authorization: the tool step fails and so does the run."""

    @loom.tool
    def launch(target: str) -> str:
        """Launch something.

        Args:
            target: What.
        """
        raise NotAuthorizedError(f"nobody may launch {target}")

    script = [loom.ModelResponse.tool_calls([("launch", {"target": "rocket"})]), loom.ModelResponse.text("never")]
    run = loom.Agent(model=loom.ScriptedModel(script), tools=[launch], name="launcher").start("go", runtime=rt)
    await run.wait()
    return run.id


def after_a_crash(kind: str) -> loom.Runtime:
    """A runtime (the golden agent registered, its clock an hour on) over the golden agent journal cut
    right after the gated delete's ``step_started``: a crash in flight, for ``recover()``."""
    events = golden_agent_flows.load().read(golden_agent_flows.EXECUTION_ID)
    cut = next(e.seq for e in events if e.step_id == "#turn:1:tool:0" and e.kind == EventKind.STEP_STARTED)
    journal: JournalStore = InMemoryJournal() if kind == "memory" else DuckDBJournal(":memory:")
    journal.append([e for e in events if e.seq <= cut])
    clock = FakeClock(start=events[cut - 1].at + 3600.0, tick=1.0)
    rt = loom.Runtime(journal, clock=clock, ids=SequentialIds(), random=SeededRandom(7), flows=FlowRegistry())
    golden_agent_flows.make_agent().register(rt)
    return rt
