"""An execution's journaled events, indexed for serving replayed steps, gates and decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom_nb.journal import step_ids
from loom_nb.journal.events import Event, EventKind


@dataclass
class StepRecord:
    """What the journal holds about one step.

    Attributes:
        step_id: The step's id.
        effect: The effect id recorded at its first ``step_started``.
        digest: The digest of its journaled input.
        attempts: How many ``step_started`` events it has.
        completed: True once ``step_completed`` is recorded.
        output: The recorded output (when completed).
        error: The recorded final failure (``step_failed`` without ``will_retry``), if any.
        retry_pending: True when the last event is a failure that will be retried.
        in_doubt: True once ``step_in_doubt`` is recorded.
        usage: The recorded usage, if any.
    """

    step_id: str
    effect: str
    digest: str
    attempts: int = 0
    completed: bool = False
    output: Any = None
    error: dict[str, Any] | None = None
    retry_pending: bool = False
    in_doubt: bool = False
    usage: dict[str, Any] | None = None

    @property
    def settled(self) -> bool:
        """True when the step has a final outcome."""
        return self.completed or self.error is not None


@dataclass
class GateRecord:
    """A gate as the journal holds it.

    Attributes:
        gate_id: The gate's id.
        kind: Its kind (``AgentToolApproval``, ``InDoubt``...).
        payload: What the gate shows the person deciding.
        schema: ``module:qualname`` of the resume payload's type, or None for any JSON.
        opened_at: When it opened.
        resolved: True once ``gate_resolved`` is recorded.
        resolution: The validated resume payload (plain JSON).
        resolved_at: When it was resolved.
    """

    gate_id: str
    kind: str
    payload: Any
    schema: str | None
    opened_at: float
    resolved: bool = False
    resolution: Any = None
    resolved_at: float | None = None


@dataclass
class History:
    """The index of one execution's events."""

    execution_id: str
    events: list[Event] = field(default_factory=list)
    flow: str = ""
    input: Any = None
    principal: dict[str, Any] | None = None
    status: str = "new"
    output: Any = None
    error: dict[str, Any] | None = None
    steps: dict[str, StepRecord] = field(default_factory=dict)
    gates: dict[str, GateRecord] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    warnings: set[str] = field(default_factory=set)
    last_seq: int = 0

    @classmethod
    def of(cls, execution_id: str, events: list[Event]) -> History:
        """Index ``events`` (all of one execution, in seq order)."""
        h = cls(execution_id=execution_id, events=events)
        for e in events:
            h._apply(e)
        return h

    def _apply(self, e: Event) -> None:
        self.last_seq = e.seq
        d = e.data
        kind = e.kind
        sid = e.step_id or ""
        if kind == EventKind.STEP_STARTED:
            rec = self.steps.get(sid)
            if rec is None:
                rec = self.steps[sid] = StepRecord(sid, str(d.get("effect", "")), str(d.get("digest", "")))
            rec.attempts = max(rec.attempts + 1, int(d.get("attempt", rec.attempts + 1)))
            rec.retry_pending = False
        elif kind == EventKind.STEP_COMPLETED:
            rec = self._step(sid, d)
            rec.completed, rec.output, rec.retry_pending = True, d.get("output"), False
            rec.usage = d.get("usage")
        elif kind == EventKind.STEP_FAILED:
            rec = self._step(sid, d)
            if d.get("will_retry"):
                rec.retry_pending = True
            else:
                rec.error, rec.retry_pending = dict(d.get("error") or {}), False
        elif kind == EventKind.STEP_IN_DOUBT:
            self._step(sid, d).in_doubt = True
        elif kind == EventKind.GATE_OPENED:
            self.gates[sid] = GateRecord(sid, str(d.get("kind", "")), d.get("payload"), d.get("schema"), e.at)
        elif kind == EventKind.GATE_RESOLVED:
            gate = self.gates.get(sid)
            if gate is not None:
                gate.resolved, gate.resolution, gate.resolved_at = True, d.get("payload"), e.at
        elif kind == EventKind.DECISION_RECORDED:
            self.decisions[sid] = d
        elif kind == EventKind.VALUE_RECORDED:
            self.values[sid] = d.get("value")
        elif kind == EventKind.WARNING:
            self.warnings.add(str(d.get("code", "")))
        elif kind == EventKind.EXECUTION_STARTED:
            self.flow, self.input, self.principal, self.status = (
                str(d.get("flow", "")),
                d.get("input"),
                d.get("principal"),
                "running",
            )
        elif kind == EventKind.EXECUTION_SUSPENDED:
            self.status = "suspended"
        elif kind == EventKind.EXECUTION_RESUMED:
            self.status = "running"
        elif kind == EventKind.EXECUTION_COMPLETED:
            self.status, self.output = "completed", d.get("output")
        elif kind == EventKind.EXECUTION_FAILED:
            self.status, self.error = "failed", dict(d.get("error") or {})

    def _step(self, sid: str, d: dict[str, Any]) -> StepRecord:
        rec = self.steps.get(sid)
        if rec is None:
            rec = self.steps[sid] = StepRecord(sid, str(d.get("effect", "")), str(d.get("digest", "")))
        return rec

    def open_gates(self) -> list[GateRecord]:
        """Gates opened and not yet resolved, in the order they opened."""
        return [g for g in self.gates.values() if not g.resolved]

    def served_count(self) -> int:
        """How many recorded outcomes a re-run of the body will be served before it runs live."""
        settled = sum(1 for s in self.steps.values() if s.settled)
        resolved = sum(
            1
            for g in self.gates.values()
            if g.resolved and not (g.kind == step_ids.IN_DOUBT_GATE and self._in_doubt_settled(g.gate_id))
        )
        return settled + resolved + len(self.decisions) + len(self.values)

    def _in_doubt_settled(self, gate_id: str) -> bool:
        step = self.steps.get(step_ids.parse_step_id(gate_id).subject or gate_id)
        return step is not None and step.settled
