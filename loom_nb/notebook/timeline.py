"""A live step timeline (an anywidget): one bar per step over time, coloured by kind.

``timeline(execution_id)`` (re-exported as ``loom.timeline``) returns a ``TimelineWidget`` that
reads the execution's events from the journal and follows new ones through ``runtime.observe``:
model calls, tool calls, gate waits and compactions, each a bar from its first ``step_started``
(or ``gate_opened``) to its end. The front end is ``widgets/timeline.js`` + ``timeline.css``
(shipped in the wheel as ``loom_nb/_widgets``). Without a front end its ``text/plain`` form is a
text chart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from loom_nb.errors import UsageError
from loom_nb.journal.events import Event, EventKind
from loom_nb.notebook.run_view import step_kind
from loom_nb.notebook.throttle import Throttle
from loom_nb.runtime import Runtime, default_runtime

_STATUS_OF: dict[str, str] = {
    EventKind.EXECUTION_STARTED: "running",
    EventKind.EXECUTION_RESUMED: "running",
    EventKind.EXECUTION_SUSPENDED: "suspended",
    EventKind.EXECUTION_COMPLETED: "completed",
    EventKind.EXECUTION_FAILED: "failed",
}


def asset_dir() -> Path:
    """Where ``timeline.js`` / ``timeline.css`` are: ``loom_nb/_widgets`` in a wheel, the repo's
    ``widgets/`` in an editable install.

    Raises:
        FileNotFoundError: neither holds them.
    """
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "_widgets", package.parent / "widgets"):
        if (folder / "timeline.js").is_file():
            return folder
    raise FileNotFoundError(f"timeline.js is in neither {package / '_widgets'} nor {package.parent / 'widgets'}")


_ASSETS = asset_dir()


class TimelineWidget(anywidget.AnyWidget):
    """The step timeline of one execution, synced live from the runtime.

    Args:
        execution_id: The execution.
        runtime: Its runtime.
        interval: Least seconds between two syncs of the bars to the front end.

    Attributes:
        bars: ``[{id, kind, label, start, end, status}]`` (``end`` None while open); ``kind`` is
            ``model``, ``tool``, ``gate``, ``compaction`` or ``effect``.
        origin: When the execution started (epoch seconds, runtime clock).
        now: The time of the latest event.
        status: The execution's status.
    """

    _esm = _ASSETS / "timeline.js"
    _css = _ASSETS / "timeline.css"
    execution_id = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("running").tag(sync=True)
    origin = traitlets.Float(0.0).tag(sync=True)
    now = traitlets.Float(0.0).tag(sync=True)
    bars = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, execution_id: str, runtime: Runtime, *, interval: float = 0.05) -> None:
        super().__init__(execution_id=execution_id)
        self.runtime = runtime
        self._bars: dict[str, dict[str, Any]] = {}
        self._origin: float | None = None
        self._now = 0.0
        self._status = "running"
        self._throttle = Throttle(self._sync, interval=interval)
        if runtime.journal.get_execution(execution_id) is not None:
            for event in runtime.journal.read(execution_id):
                self._apply(event)
        self._sync()
        self._unsubscribe: Callable[[], None] | None = runtime.observe(self._on_event, execution_id=execution_id)

    def _on_event(self, event: Event) -> None:
        self._apply(event)
        if self._status in ("completed", "failed"):
            self._throttle.flush()
            self._sync()
            self.stop()
        else:
            self._throttle.request()

    def _apply(self, e: Event) -> None:
        if self._origin is None:
            self._origin = e.at
        self._now = max(self._now, e.at)
        sid, data = e.step_id or "", e.data
        if e.kind in _STATUS_OF:
            self._status = _STATUS_OF[e.kind]
        elif e.kind == EventKind.STEP_STARTED:
            bar = self._bars.get(sid)
            if bar is None:
                effect = str(data.get("effect", ""))
                kind = step_kind(self.runtime, sid, effect)
                self._bars[sid] = {
                    "id": sid,
                    "kind": kind,
                    "label": f"{sid} {effect}".strip(),
                    "start": e.at,
                    "end": None,
                    "status": "running",
                }
            else:
                bar.update(end=None, status="retrying")
        elif e.kind in (EventKind.STEP_COMPLETED, EventKind.STEP_FAILED, EventKind.STEP_IN_DOUBT) and sid in self._bars:
            bar = self._bars[sid]
            if e.kind == EventKind.STEP_COMPLETED:
                bar.update(end=e.at, status="done")
            elif e.kind == EventKind.STEP_IN_DOUBT:
                bar.update(end=e.at, status="in_doubt")
            elif not data.get("will_retry"):
                bar.update(end=e.at, status="failed")
        elif e.kind == EventKind.GATE_OPENED:
            self._bars[sid] = {"id": sid, "kind": "gate", "label": sid, "start": e.at, "end": None, "status": "waiting"}
        elif e.kind == EventKind.GATE_RESOLVED and sid in self._bars:
            self._bars[sid].update(end=e.at, status="done")

    def _sync(self) -> None:
        self.origin = self._origin if self._origin is not None else 0.0
        self.now = self._now
        self.status = self._status
        self.bars = [dict(b) for b in self._bars.values()]

    def stop(self) -> None:
        """Stop following the runtime (done by itself once the execution completes or fails)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def text(self, width: int = 40) -> str:
        """The timeline as a text chart (one line per bar)."""
        bars = list(self._bars.values())
        origin = self._origin or 0.0
        span = max([self._now - origin, 1e-9] + [(b["end"] or self._now) - origin for b in bars])
        lines = [f"timeline {self.execution_id}: {self._status}, {len(bars)} bar(s) over {span:.3f} s"]
        for b in bars:
            start = int((b["start"] - origin) / span * width)
            end = (b["end"] if b["end"] is not None else self._now) - origin
            length = max(1, round(end / span * width) - start)
            lines.append(f"  {b['label'][:34]:<34} {' ' * start}{'█' * length}  {b['kind']}, {b['status']}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            data["text/plain"] = self.text()
        return bundle


def timeline(execution_id: str, runtime: Runtime | None = None) -> TimelineWidget:
    """A live step timeline widget for ``execution_id`` (display it, or make it a cell's last line).

    Raises:
        UsageError: the execution is neither in the journal nor a run started in this kernel.
    """
    rt = runtime or default_runtime()
    if rt.journal.get_execution(execution_id) is None:
        from loom_nb.notebook.runs import live_run

        if live_run(rt, execution_id) is None:
            raise UsageError(
                f"no execution {execution_id!r} in the journal {rt.journal.location} (list them with %loom runs)"
            )
    return TimelineWidget(execution_id, rt)
