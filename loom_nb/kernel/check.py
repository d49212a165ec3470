"""``check``: would the code now loaded replay every unfinished execution as recorded?

Runs parked for days meet edited code. Before anything resumes, ``Engine.check`` re-runs the body
of every ``running`` or ``suspended`` execution purely from its log (no effect runs, nothing is
written) and compares what it asks for with the record. An execution whose replay asks for the
recorded steps, gates, decisions and values in order until the record is used up is fine (what
comes after runs live); one that asks for something else first would diverge at that step. Flow
layers add checks of their own through ``Engine.check_hooks`` (the agent compares the system prompt
and the tool schemas a run recorded with the ones it would send now).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from loom_nb.errors import FlowNotFoundError, NonDeterminismError, ReplayDivergedError
from loom_nb.journal.events import EventKind
from loom_nb.journal.step_ids import is_question_gate
from loom_nb.kernel.context import IN_DOUBT_GATE, ExecutionContext, ExecutionHost
from loom_nb.kernel.gates import Suspend
from loom_nb.kernel.history import History

#: The fix ``check`` suggests for a flow whose code changed under a recorded run.
PATCH_FIX = (
    "put the change behind `if ctx.patched('<change>'):` (keep the old code in the else branch; an "
    "agent: `agent.patch('<change>', ...)`) so recorded runs keep the old path and new runs take the "
    "new one; or restore the old code; or fork the run before this step (or start a new one)"
)


def recorded_trace(history: History) -> list[tuple[str, str]]:
    """The order in which the recorded run asked for steps, gates, decisions and values."""
    trace: list[tuple[str, str]] = []
    seen: set[str] = set()
    for e in history.events:
        sid = e.step_id or ""
        if e.kind == EventKind.STEP_STARTED and sid not in seen:
            seen.add(sid)
            trace.append(("step", sid))
        elif e.kind == EventKind.GATE_OPENED and e.data.get("kind") != IN_DOUBT_GATE and not is_question_gate(sid):
            trace.append(("gate", sid))
        elif e.kind == EventKind.DECISION_RECORDED:
            trace.append(("decision", sid))
        elif e.kind == EventKind.VALUE_RECORDED:
            trace.append(("value", sid))
    return trace


@dataclass(frozen=True)
class CheckFinding:
    """One way an execution would not replay as recorded.

    Attributes:
        step: The step (gate, decision, value) where it would diverge, if known.
        reason: What differs.
        fix: What to do about it.
    """

    step: str | None
    reason: str
    fix: str = PATCH_FIX


#: A flow layer's own check of one execution (``Engine.check_hooks[flow]``): its findings.
CheckHook = Callable[[History], Sequence[CheckFinding]]


class CheckHost(ExecutionHost, Protocol):
    """What ``check`` needs of the engine (``Engine`` is one): what a pure replay of one execution
    needs, and the flow layers' own checks."""

    @property
    def check_hooks(self) -> dict[str, CheckHook]:
        """A flow layer's own checks of an unfinished execution, by flow name."""
        ...


@dataclass(frozen=True)
class ExecutionCheck:
    """The check of one unfinished execution against the code now loaded.

    Attributes:
        execution_id: The execution.
        flow: Its flow.
        status: ``running`` or ``suspended`` (as the journal has it).
        findings: Every way it would not replay as recorded (empty: it resumes safely).
        children: The checks of its child executions that were checked too (a sub-agent's run
            waiting with its parent): listed here, under the parent, not on their own.
    """

    execution_id: str
    flow: str
    status: str
    findings: tuple[CheckFinding, ...] = ()
    children: tuple[ExecutionCheck, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the execution, and every child listed under it, would replay as recorded."""
        return not self.findings and all(c.ok for c in self.children)

    def walk(self) -> Iterator[ExecutionCheck]:
        """This check, then its children's (depth first)."""
        yield self
        for c in self.children:
            yield from c.walk()

    @property
    def step(self) -> str | None:
        """The first step where it would diverge (None when ok)."""
        return next((f.step for f in self.findings if f.step), None)

    def __str__(self) -> str:
        if self.ok:
            lines = [f"{self.execution_id} ({self.flow}, {self.status}): ok"]
        else:
            lines = [f"{self.execution_id} ({self.flow}, {self.status}): would diverge"]
        for f in self.findings:
            where = f" at {f.step}" if f.step else ""
            lines.append(f"  -{where}: {f.reason}\n    fix: {f.fix}")
        for c in self.children:
            lines += ["  child " + line if i == 0 else "  " + line for i, line in enumerate(str(c).splitlines())]
        return "\n".join(lines)


@dataclass(frozen=True)
class CheckReport:
    """What ``Engine.check`` found, one ``ExecutionCheck`` per running or suspended execution.

    A child execution whose parent was checked too is listed once, under its parent
    (``ExecutionCheck.children``); a child checked without its parent stands on its own.

    Attributes:
        executions: The checks of the top executions, in the journal's order.
    """

    executions: tuple[ExecutionCheck, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when every execution would replay as recorded."""
        return all(c.ok for c in self.executions)

    @property
    def diverging(self) -> list[ExecutionCheck]:
        """The top executions that would diverge (a parent whose child would diverge too)."""
        return [c for c in self.executions if not c.ok]

    def all(self) -> list[ExecutionCheck]:
        """Every check, the children's after their parent's (depth first)."""
        return [c for top in self.executions for c in top.walk()]

    def __iter__(self) -> Iterator[ExecutionCheck]:
        return iter(self.executions)

    def __len__(self) -> int:
        return len(self.executions)

    def __str__(self) -> str:
        if not self.executions:
            return "no running or suspended execution to check"
        checked = self.all()
        bad = sum(1 for c in checked if c.findings)
        head = (
            f"{len(checked)} execution(s) checked: all replay as recorded"
            if self.ok
            else f"{len(checked)} execution(s) checked, {bad} would diverge"
        )
        return "\n".join([head, *(str(c) for c in self.executions)])

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        p.text(str(self))  # type: ignore[attr-defined]


def _first_difference(asked: Sequence[tuple[str, str]], recorded: Sequence[tuple[str, str]]) -> int | None:
    """The index where the replay's requests leave the record before using it up, else None."""
    for i, item in enumerate(recorded):
        if i >= len(asked) or asked[i] != item:
            return i
    return None


async def check_execution(engine: CheckHost, history: History) -> ExecutionCheck:
    """Replay one execution purely from its log with the code now loaded and say whether, and where,
    it would diverge from its record."""
    findings: list[CheckFinding] = []
    try:
        body = engine.flows.get(history.flow)
    except FlowNotFoundError as exc:
        findings.append(CheckFinding(None, str(exc), "define (or import) the flow, then check again"))
        return ExecutionCheck(history.execution_id, history.flow, history.status, tuple(findings))
    ctx = ExecutionContext(engine, history, pure=True)
    error: BaseException | None = None
    try:
        await body(ctx, history.input)
    except Suspend:
        pass
    except (ReplayDivergedError, NonDeterminismError) as exc:
        error = exc
    except FlowNotFoundError as exc:  # a child execution's flow (a sub-agent) is not registered here
        step = ctx.trace[-1][1] if ctx.trace else None
        findings.append(CheckFinding(step, str(exc), "define (or import) the flow, then check again"))
        return ExecutionCheck(history.execution_id, history.flow, history.status, tuple(findings))
    except Exception as exc:  # the body fails where the record went on: a divergence too
        error = exc
    recorded = recorded_trace(history)
    at = _first_difference(ctx.trace, recorded)
    if isinstance(error, NonDeterminismError):
        findings.append(CheckFinding(ctx.trace[-1][1] if ctx.trace else None, str(error)))
    elif at is not None:
        step = recorded[at][1]
        if at < len(ctx.trace):
            kind, ident = ctx.trace[at]
            reason = f"the code now asks for {kind} {ident!r} where the record holds {recorded[at][0]} {step!r}"
        elif error is not None and not isinstance(error, ReplayDivergedError):
            reason = f"the code now fails here with {type(error).__name__}: {error}"
        else:
            reason = "the code now ends before it reaches this recorded step"
        findings.append(CheckFinding(step, reason))
    hook = engine.check_hooks.get(history.flow)
    if hook is not None:
        findings.extend(hook(history))
    return ExecutionCheck(history.execution_id, history.flow, history.status, tuple(findings))


async def check_executions(engine: CheckHost, execution_ids: Sequence[str] | None = None) -> CheckReport:
    """``Engine.check``: check every running or suspended execution (or the ones named)."""
    if execution_ids is None:
        ids = [r.execution_id for r in engine.journal.list_executions() if r.status in ("running", "suspended")]
    else:
        ids = list(execution_ids)
    histories = {eid: engine.history(eid) for eid in dict.fromkeys(ids)}
    checks = {eid: await check_execution(engine, h) for eid, h in histories.items()}
    parents = {eid: _parent_of(h) for eid, h in histories.items()}
    children: dict[str, list[str]] = {}
    for eid, parent in parents.items():
        if parent in checks:
            children.setdefault(parent, []).append(eid)

    def nested(eid: str) -> ExecutionCheck:
        c = checks[eid]
        kids = tuple(nested(k) for k in children.get(eid, ()))
        return replace(c, children=kids) if kids else c

    return CheckReport(tuple(nested(eid) for eid, parent in parents.items() if parent not in checks))


def _parent_of(history: History) -> str | None:
    """The parent execution of a child execution (its ``execution_started``'s ``parent``), else None."""
    events = history.events
    parent = events[0].data.get("parent") if events and isinstance(events[0].data, dict) else None
    return str(parent["execution"]) if isinstance(parent, dict) and "execution" in parent else None
