"""A live step timeline (an anywidget): one bar per step over time, coloured by kind.

``timeline(execution_id)`` (re-exported as ``loom.timeline``) returns a ``TimelineWidget`` that
reads the execution's events from the journal and follows new ones through ``runtime.observe``:
model calls, tool calls, gate waits and compactions, each a bar from its first ``step_started``
(or ``gate_opened``) to its end. The front end is ``widgets/timeline.js`` + ``timeline.css``
(shipped in the wheel as ``loom_nb/_widgets``): a time axis, each step's duration, full labels as
tooltips, long gate waits on a broken axis, a legend of the kinds present, and the colours of the
palette the plots share (``loom_nb.palette``). Without a front end its ``text/plain`` form
is a text chart.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from loom_nb.agent.tool_calls import ToolCallRecord, tool_calls
from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.events import TERMINAL_STATUSES, Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.notebook.formatting import TextForm, call_text
from loom_nb.notebook.safe_text import visible
from loom_nb.notebook.throttle import Throttle
from loom_nb.palette import css
from loom_nb.runtime import Runtime, default_runtime

#: A bar's kind for each step kind of the fold (the front end's names).
BAR_KIND: dict[str, str] = {step_ids.COMPACTION_KIND: "compaction"}


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


class TimelineWidget(TextForm, anywidget.AnyWidget):
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
    # the palette's colours (light and dark) first, so the widget needs no other style on the page
    _css = css() + "\n" + (_ASSETS / "timeline.css").read_text(encoding="utf-8")
    execution_id = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("running").tag(sync=True)
    origin = traitlets.Float(0.0).tag(sync=True)
    now = traitlets.Float(0.0).tag(sync=True)
    bars = traitlets.List(traitlets.Dict()).tag(sync=True)

    def __init__(self, execution_id: str, runtime: Runtime, *, interval: float = 0.05) -> None:
        super().__init__(execution_id=execution_id)
        self.runtime = runtime
        self.state = RunState(execution_id=execution_id)
        self._bar_ids: dict[str, None] = {}
        self._origin: float | None = None
        self._now = 0.0
        self._throttle = Throttle(self._sync, interval=interval)
        if runtime.journal.get_execution(execution_id) is not None:
            for event in runtime.journal.read(execution_id):
                self._apply(event)
        self._sync()
        self._unsubscribe: Callable[[], None] | None = runtime.observe(self._on_event, execution_id=execution_id)

    def _on_event(self, event: Event) -> None:
        self._apply(event)
        if self._status in TERMINAL_STATUSES:
            self._throttle.flush()
            self._sync()
            self.stop()
        else:
            self._throttle.request()

    @property
    def _status(self) -> str:
        status = self.state.status
        return "running" if status == "new" else status

    def _apply(self, e: Event) -> None:
        if self._origin is None:
            self._origin = e.at
        self._now = max(self._now, e.at)
        touched = self.state.apply(e)
        if isinstance(touched, GateState) or (isinstance(touched, StepState) and touched.attempts):
            self._bar_ids.setdefault(e.step_id or "")

    def _bar(self, bar_id: str, calls: dict[str, ToolCallRecord]) -> dict[str, Any]:
        step = self.state.steps.get(bar_id)
        if step is None:
            gate = self.state.gates[bar_id]
            status = "done" if gate.resolved else "waiting"
            return {
                "id": bar_id,
                "kind": "gate",
                "label": bar_id,
                "start": gate.opened_at,
                "end": gate.resolved_at,
                "status": status,
            }
        end: float | None = None
        if step.completed or step.error is not None:
            status, end = ("done" if step.completed else "failed"), step.ended_at
        elif step.last_event == EventKind.STEP_IN_DOUBT:
            status, end = "in_doubt", step.updated_at
        else:
            status = "retrying" if step.attempts > 1 else "running"
        kind = BAR_KIND.get(step.kind, step.kind)
        label = visible(f"{bar_id} {step.effect}".strip())
        call = calls.get(bar_id)
        if call is not None:  # the arguments that ran (a person's edit, else the model's)
            label = f"{bar_id} {call_text(call.name, call.arguments)}" + (" · edited" if call.edited else "")
        return {"id": bar_id, "kind": kind, "label": label, "start": step.started_at, "end": end, "status": status}

    def _bars(self) -> list[dict[str, Any]]:
        calls = {c.step_id: c for c in tool_calls(self.state)}
        return [self._bar(bar_id, calls) for bar_id in self._bar_ids]

    def _sync(self) -> None:
        self.origin = self._origin if self._origin is not None else 0.0
        self.now = self._now
        self.status = self._status
        self.bars = self._bars()

    def stop(self) -> None:
        """Stop following the runtime (done by itself once the execution completes or fails)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def text(self, width: int = 40) -> str:
        """The timeline as a text chart (one line per bar)."""
        bars = self._bars()
        origin = self._origin or 0.0
        span = max([self._now - origin, 1e-9] + [(b["end"] or self._now) - origin for b in bars])
        lines = [f"timeline {self.execution_id}: {self._status}, {len(bars)} bar(s) over {span:.3f} s"]
        for b in bars:
            start = int((b["start"] - origin) / span * width)
            end = (b["end"] if b["end"] is not None else self._now) - origin
            length = max(1, round(end / span * width) - start)
            lines.append(f"  {b['label'][:34]:<34} {' ' * start}{'█' * length}  {b['kind']}, {b['status']}")
        return "\n".join(lines)


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
