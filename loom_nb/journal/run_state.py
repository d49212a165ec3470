"""The one fold of an execution's events into its state: ``RunState.apply(event)``.

Every Python reader of the event stream (the kernel's ``History``, the live ``RunView``, the
timeline, the CLI) folds events with ``RunState``, and the analysis SQL ``steps`` view is tested
against it: the two agree on every step's kind, turn, tool index, status, attempts and in-doubt flag.

A step's ``status`` uses the ``steps`` view's vocabulary: ``completed`` once any ``step_completed``
is recorded; else ``failed`` once a final ``step_failed`` (no ``will_retry``) is; else ``in_doubt``
once a ``step_in_doubt`` is; else ``running``. ``attempts`` counts its ``step_started`` events;
``ended_at`` is the time of its latest ``step_completed`` or final ``step_failed``.

The fold is pure: no clock, no I/O; ``apply`` returns the step or gate it touched (None for other
events), so a live view can re-render only that row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import loom_nb.journal.step_ids as step_ids
from loom_nb.journal.canonical import digest_value
from loom_nb.journal.event_format import FORMAT_1, format_of, resolve_ref, usage_of_output
from loom_nb.journal.events import STATUS_OF_KIND, Event, EventKind

#: Step statuses (the analysis ``steps`` view's vocabulary).
RUNNING: Final = "running"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
IN_DOUBT: Final = "in_doubt"


@dataclass
class StepState:
    """What the journal holds about one step.

    Attributes:
        step_id: The step's id.
        effect: The effect id recorded at its first event.
        digest: The digest of its journaled input as recorded (format 1); empty in format 2, which
            recomputes it (``input_digest``).
        kind: ``model``, ``tool``, ``compact`` or ``effect`` (``step_ids.step_kind``).
        turn: The agent turn it belongs to, if any.
        tool_index: Its tool-call index within the turn, if a tool step.
        tool: The tool's name, for a ``tools.<name>`` effect.
        input: Its journaled input (from its first ``step_started``; a format 2 ``ref`` resolved).
        ref: The format 2 input reference (``[step_id, *path]``) it was journaled as, if any.
        seq: The seq of its first event.
        attempts: How many ``step_started`` events it has.
        completed: True once ``step_completed`` is recorded.
        output: The recorded output (when completed).
        error: The recorded final failure (``step_failed`` without ``will_retry``), if any.
        retry_pending: True when its last failure will be retried and no new attempt started yet.
        in_doubt: True once ``step_in_doubt`` is recorded.
        usage: The recorded usage, if any.
        started_at: When its first attempt started.
        ended_at: When its latest ``step_completed`` or final ``step_failed`` was recorded.
        updated_at: When its latest event was recorded.
        last_event: The kind of its latest event.
    """

    step_id: str
    effect: str
    digest: str
    kind: str = field(init=False)
    turn: int | None = field(init=False)
    tool_index: int | None = field(init=False)
    tool: str | None = field(init=False)
    input: Any = None
    ref: list[Any] | None = None
    seq: int = 0
    attempts: int = 0
    completed: bool = False
    output: Any = None
    error: dict[str, Any] | None = None
    retry_pending: bool = False
    in_doubt: bool = False
    usage: dict[str, Any] | None = None
    started_at: float | None = None
    ended_at: float | None = None
    updated_at: float | None = None
    last_event: str = ""

    def __post_init__(self) -> None:
        parsed = step_ids.parse_step_id(self.step_id)
        self.kind = step_ids.step_kind(self.step_id, self.effect)
        self.turn, self.tool_index = parsed.turn, parsed.tool_index
        self.tool = step_ids.tool_name(self.effect) if step_ids.is_tool_effect(self.effect) else None

    def input_digest(self) -> str:
        """The digest of its journaled input: as recorded (format 1), else recomputed (format 2)."""
        if not self.digest:
            self.digest = digest_value(self.input)
        return self.digest

    @property
    def settled(self) -> bool:
        """True when the step has a final outcome."""
        return self.completed or self.error is not None

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``in_doubt`` or ``running`` (the ``steps`` view's status)."""
        if self.completed:
            return COMPLETED
        if self.error is not None:
            return FAILED
        return IN_DOUBT if self.in_doubt else RUNNING


@dataclass
class GateState:
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

    @property
    def subject(self) -> str | None:
        """The step the gate is about: an approval's tool step, an in-doubt gate's step; else None."""
        return step_ids.parse_step_id(self.gate_id).subject

    @property
    def turn(self) -> int | None:
        """The agent turn the gate belongs to, if any."""
        return step_ids.parse_step_id(self.gate_id).turn

    @property
    def tool_index(self) -> int | None:
        """The tool call the gate belongs to, if any."""
        return step_ids.parse_step_id(self.gate_id).tool_index


@dataclass
class UsageTotals:
    """Model usage summed over the completed steps that report tokens.

    Attributes:
        calls: How many completed steps reported ``input_tokens``.
        input_tokens: Their input tokens.
        output_tokens: Their output tokens.
        cost: Their cost, or None when none reported one.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None

    def add(self, usage: dict[str, Any]) -> None:
        """Count one step's recorded usage."""
        self.calls += 1
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        if usage.get("cost") is not None:
            self.cost = (self.cost or 0.0) + float(usage["cost"])


@dataclass
class RunState:
    """One execution's state, folded from its events in seq order.

    Attributes:
        execution_id: The execution.
        flow: Its flow.
        input: Its input.
        principal: Who started it.
        format: Its event format (``journal.event_format``; 1 when ``execution_started`` has none).
        status: ``new`` (no event yet), ``running``, ``suspended``, ``completed``, ``failed`` or
            ``cancelled``.
        output: Its output, once completed.
        error: Its error, once failed.
        cancel_reason: Why it was cancelled (None without a reason, or when not cancelled).
        parent: For a child execution (``ctx.child``), ``{"execution": ..., "step": ...}``: the
            parent execution and the parent's step that waits for it; None otherwise.
        steps: Steps by id, in the order of their first event.
        gates: Gates by id, in the order they opened.
        decisions: Recorded decisions by id.
        values: Recorded values by id.
        warnings: The warning codes recorded.
        usage: Model usage totals.
        turns: Agent turns started (one more than the highest turn of a started model step).
        last_seq: The highest seq applied.
    """

    execution_id: str = ""
    flow: str = ""
    input: Any = None
    principal: dict[str, Any] | None = None
    format: int = FORMAT_1
    status: str = "new"
    output: Any = None
    error: dict[str, Any] | None = None
    cancel_reason: str | None = None
    parent: dict[str, Any] | None = None
    steps: dict[str, StepState] = field(default_factory=dict)
    gates: dict[str, GateState] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    warnings: set[str] = field(default_factory=set)
    usage: UsageTotals = field(default_factory=UsageTotals)
    turns: int = 0
    last_seq: int = 0

    @classmethod
    def fold(cls, events: Iterable[Event], execution_id: str = "") -> RunState:
        """The state after ``events`` (all of one execution, in seq order)."""
        state = cls(execution_id=execution_id)
        for event in events:
            state.apply(event)
        return state

    def apply(self, e: Event) -> StepState | GateState | None:
        """Fold one event in; returns the step or gate it touched (None for any other event).

        Live observers may deliver an execution's events slightly out of seq order (a stream chunk
        before the step completion committed with it); the fold does not depend on that order.
        """
        self.last_seq = max(self.last_seq, e.seq)
        if e.kind in _STEP_EVENTS:
            return self._apply_step(e)
        d, sid = e.data, e.step_id or ""
        if e.kind == EventKind.GATE_OPENED:
            gate = self.gates[sid] = GateState(sid, str(d.get("kind", "")), d.get("payload"), d.get("schema"), e.at)
            return gate
        if e.kind == EventKind.GATE_RESOLVED:
            resolved = self.gates.get(sid)
            if resolved is not None:
                resolved.resolved, resolved.resolution, resolved.resolved_at = True, d.get("payload"), e.at
            return resolved
        if e.kind == EventKind.DECISION_RECORDED:
            self.decisions[sid] = d
        elif e.kind == EventKind.VALUE_RECORDED:
            self.values[sid] = d.get("value")
        elif e.kind == EventKind.WARNING:
            self.warnings.add(str(d.get("code", "")))
        elif e.kind in STATUS_OF_KIND:
            self._apply_status(e)
        return None

    def _apply_status(self, e: Event) -> None:
        d = e.data
        self.status = STATUS_OF_KIND[e.kind]
        if e.kind == EventKind.EXECUTION_STARTED:
            self.flow, self.input, self.principal = str(d.get("flow", "")), d.get("input"), d.get("principal")
            self.format = format_of(d, e.execution_id)
            parent = d.get("parent")
            self.parent = dict(parent) if isinstance(parent, dict) else None
        elif e.kind == EventKind.EXECUTION_COMPLETED:
            self.output = d.get("output")
        elif e.kind == EventKind.EXECUTION_FAILED:
            self.error = dict(d.get("error") or {})
        elif e.kind == EventKind.EXECUTION_CANCELLED:
            reason = d.get("reason")
            self.cancel_reason = str(reason) if reason is not None else None

    def _apply_step(self, e: Event) -> StepState:
        d, sid = e.data, e.step_id or ""
        step = self.steps.get(sid)
        if step is None:
            step = self.steps[sid] = StepState(sid, str(d.get("effect", "")), str(d.get("digest", "")), seq=e.seq)
        step.updated_at, step.last_event = e.at, e.kind
        if e.kind == EventKind.STEP_STARTED:
            if step.attempts == 0:
                step.input, step.started_at = self._input_of(d, step), e.at
            step.attempts = max(step.attempts + 1, int(d.get("attempt", step.attempts + 1)))
            step.retry_pending = False
            if step.kind == step_ids.MODEL_KIND and step.turn is not None:
                self.turns = max(self.turns, step.turn + 1)
        elif e.kind == EventKind.STEP_COMPLETED:
            step.completed, step.output, step.retry_pending, step.ended_at = True, d.get("output"), False, e.at
            # Format 2 leaves out the usage the output carries (and the effect: it is on step_started).
            step.usage = d.get("usage") if "usage" in d or "effect" in d else usage_of_output(step.output)
            if isinstance(step.usage, dict) and "input_tokens" in step.usage:
                self.usage.add(step.usage)
        elif e.kind == EventKind.STEP_FAILED:
            if d.get("will_retry"):
                step.retry_pending = True
            else:
                step.error, step.retry_pending, step.ended_at = dict(d.get("error") or {}), False, e.at
        else:
            step.in_doubt = True
        return step

    def _input_of(self, d: dict[str, Any], step: StepState) -> Any:
        """A ``step_started``'s input: as journaled, or the output part a format 2 ``ref`` names."""
        if "ref" not in d or "input" in d:
            return d.get("input")
        ref = step.ref = d["ref"] if isinstance(d["ref"], list) and d["ref"] else None
        source = self.steps.get(ref[0]) if ref is not None and isinstance(ref[0], str) else None
        try:
            return resolve_ref(ref, {source.step_id: source.output} if source and source.completed else {})
        except LookupError:
            return None  # a ref the fold cannot follow (a prefix cut before its step): no input known


_STEP_EVENTS: Final = frozenset(
    {EventKind.STEP_STARTED, EventKind.STEP_COMPLETED, EventKind.STEP_FAILED, EventKind.STEP_IN_DOUBT}
)
