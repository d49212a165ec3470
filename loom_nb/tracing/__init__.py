"""OpenTelemetry traces of loom_nb executions, built from the journal.

    import loom_nb as loom
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter("http://localhost:4318/v1/traces")))
    loom.tracing.export(rt, tracer_provider=provider)      # each run's trace, when it settles
    loom.tracing.export_execution("exec-1", runtime=rt, tracer_provider=provider)  # any run, any time

Spans are built from the journaled events (``loom_nb.tracing.spans``, through ``RunState``), never from
live state: a run recovered after a crash, or read back from an old journal, gives the same trace as
a live one. Span times are the events' ``at``.

Needs the ``otel`` extra (``pip install 'loom_nb[otel]'``). OpenTelemetry is imported only when
``export`` or ``export_execution`` is called, and nothing is subscribed before ``export``: tracing
costs nothing while it is off. This layer reads the journal and the fold; the kernel never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Self

from loom_nb.errors import UsageError
from loom_nb.journal.events import Event, EventKind
from loom_nb.runtime import Runtime, default_runtime

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

#: What to install when OpenTelemetry is missing.
INSTALL_HINT = "pip install 'loom_nb[otel]'"

#: The events after which a live export emits an execution's trace.
SETTLED = frozenset({EventKind.EXECUTION_COMPLETED, EventKind.EXECUTION_FAILED, EventKind.EXECUTION_CANCELLED})


class TraceExport:
    """A live export of every execution of one runtime, made by ``export``.

    Each time an execution settles (completes, fails or is cancelled; also when it suspends, with
    ``on_suspend=True``), its events up to that point are read back from the journal and emitted as
    one trace. Each settle is exported once: the handle remembers the ``(execution_id, seq)`` of the
    events it exported, so an event delivered twice does not export twice. A run that suspends and is
    resumed settles again later: with ``on_suspend=True`` each suspension gives its own trace of the
    run so far, and the final settle gives the whole run.

    Use it as a context manager, or call ``stop()``, to end the subscription.

    Attributes:
        runtime: The runtime watched.
        on_suspend: Whether suspensions are exported too.
        traces: ``(execution_id, trace_id)`` of every trace exported, in order.
    """

    def __init__(self, runtime: Runtime, tracer: Tracer, *, on_suspend: bool = False) -> None:
        self.runtime = runtime
        self.on_suspend = on_suspend
        self.traces: list[tuple[str, str]] = []
        self._tracer = tracer
        self._kinds = SETTLED | {EventKind.EXECUTION_SUSPENDED} if on_suspend else SETTLED
        self._done: dict[tuple[str, int], object] = {}
        self._unsubscribe = runtime.observe(self._on_event)
        self._active = True

    @property
    def active(self) -> bool:
        """True until ``stop()``."""
        return self._active

    def stop(self) -> None:
        """End the subscription (calling it again does nothing)."""
        self._unsubscribe()
        self._active = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "active" if self._active else "stopped"
        return f"TraceExport({self.runtime.journal.location!r}, {state}, {len(self.traces)} trace(s))"

    def _on_event(self, event: Event) -> None:
        if event.kind not in self._kinds:
            return
        claim = object()  # dict.setdefault is atomic: one claim per settle even from two threads
        if self._done.setdefault((event.execution_id, event.seq), claim) is not claim:
            return
        events = [e for e in self.runtime.journal.read(event.execution_id) if e.seq <= event.seq]
        self.traces.append((event.execution_id, _emit(self._tracer, events, self.runtime)))


def export(
    runtime: Runtime | None = None, tracer_provider: TracerProvider | None = None, *, on_suspend: bool = False
) -> TraceExport:
    """Export every execution of ``runtime`` as an OpenTelemetry trace when it settles.

    Args:
        runtime: The runtime to watch (default: the notebook's default runtime).
        tracer_provider: Where spans go (default: OpenTelemetry's global provider, which must be set).
        on_suspend: Also export a trace of the run so far each time an execution suspends at a gate.

    Returns:
        The live export; ``stop()`` it (or use it as a context manager) to end it.

    Raises:
        UsageError: OpenTelemetry is not installed, no tracer provider is set, or no runtime.
    """
    tracer = _tracer(tracer_provider)
    return TraceExport(runtime or default_runtime(), tracer, on_suspend=on_suspend)


def export_execution(
    execution_id: str, runtime: Runtime | None = None, tracer_provider: TracerProvider | None = None
) -> str:
    """Export one execution, as its journal holds it now, as an OpenTelemetry trace.

    Works on any execution in the journal: finished, suspended, recovered after a crash, or recorded
    long ago by another process.

    Args:
        execution_id: The execution.
        runtime: The runtime whose journal holds it (default: the notebook's default runtime).
        tracer_provider: Where spans go (default: OpenTelemetry's global provider, which must be set).

    Returns:
        The trace id (32 hex digits), to look the trace up in a tracing backend.

    Raises:
        UsageError: OpenTelemetry is not installed, no tracer provider is set, no runtime, or the
            journal holds no such execution.
    """
    tracer = _tracer(tracer_provider)
    rt = runtime or default_runtime()
    events = rt.journal.read(execution_id)
    if not events:
        raise UsageError(
            f"execution {execution_id!r} is not in the journal {rt.journal.location!r}: "
            "check the id (runtime.executions() or %loom runs lists them)"
        )
    return _emit(tracer, events, rt)


def _tracer(tracer_provider: TracerProvider | None) -> Tracer:
    """A tracer named ``loom_nb`` from ``tracer_provider`` (or the global one), OpenTelemetry imported here."""
    try:
        from opentelemetry import trace

        from loom_nb.tracing import spans  # noqa: F401  (the semantic conventions, checked here too)
    except ImportError as exc:
        raise UsageError(f"OpenTelemetry tracing needs the otel extra: {INSTALL_HINT}") from exc
    from loom_nb.version import __version__

    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        raise UsageError(
            "no OpenTelemetry tracer provider is set: pass tracer_provider=TracerProvider(...) "
            "(from opentelemetry.sdk.trace), or call opentelemetry.trace.set_tracer_provider(...) first"
        )
    return provider.get_tracer("loom_nb", __version__)


def _emit(tracer: Tracer, events: Sequence[Event], runtime: Runtime) -> str:
    from loom_nb.tracing.served_by import served_for
    from loom_nb.tracing.spans import emit, span_specs

    return emit(tracer, span_specs(events, served_for(runtime.agents, events)))


__all__ = ["INSTALL_HINT", "SETTLED", "TraceExport", "export", "export_execution"]
