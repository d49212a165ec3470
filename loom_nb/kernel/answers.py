"""Gate answers: check a payload against an open gate and record it (``gate_resolved``, and
``execution_resumed`` when it was the last open gate) for ``Engine.answer``; nothing runs here. A
question a call of this process waits on (``kernel/questions.py``) is handed to that call instead,
which records it."""

from __future__ import annotations

from typing import Any, Protocol

from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import to_jsonable
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.store import JournalStore
from loom_nb.kernel.gates import OpenGate, answer_text, validate_payload
from loom_nb.kernel.history import History
from loom_nb.kernel.leases import Leases
from loom_nb.kernel.live_questions import LiveQuestions
from loom_nb.kernel.observers import Observers
from loom_nb.kernel.results import GateAnswer
from loom_nb.kernel.sources import Clock

CHILD_GATE = step_ids.CHILD_GATE


class AnswerHost(Protocol):
    """What recording an answer needs of the engine (``Engine`` is one)."""

    @property
    def journal(self) -> JournalStore:
        """Where the answer is appended."""
        ...

    @property
    def clock(self) -> Clock:
        """The time the answer's events carry."""
        ...

    @property
    def leases(self) -> Leases:
        """The lease claimed when the answer resumes the execution here."""
        ...

    @property
    def observers(self) -> Observers:
        """Who is shown the answer's events."""
        ...

    @property
    def questions(self) -> LiveQuestions:
        """The questions calls of this process wait on (answered here without running the body)."""
        ...

    def open_gates(self, execution_id: str | None = None) -> list[OpenGate]:
        """The open gates of an execution (a child's, named when its parent's gate is answered)."""
        ...


def record_answer(
    host: AnswerHost,
    h: History,
    gate_id: str,
    payload: Any = None,
    *,
    drive_here: bool = True,
    child: bool = False,
    active: set[str],
) -> GateAnswer:
    """``Engine.answer`` of the execution ``h`` holds; with ``child``, a ``ChildExecution`` gate too
    (the engine waking a parent). When it resumes the execution here (``drive_here``), the
    execution is added to ``active`` (the ones running in this process) until it is driven on."""
    execution_id = h.execution_id
    gate = h.gates.get(gate_id)
    if gate is None:
        open_ids = ", ".join(g.gate_id for g in h.open_gates()) or "none"
        raise UsageError(f"execution {execution_id!r} has no gate {gate_id!r} (open gates: {open_ids})")
    if gate.kind == CHILD_GATE and not child and not gate.resolved:
        cid = step_ids.child_execution_id(execution_id, gate_id)
        waiting = ", ".join(g.gate_id for g in host.open_gates(cid)) or "none"
        raise UsageError(
            f"gate {gate_id!r} of execution {execution_id!r} waits for the child execution {cid!r}; "
            f"it is answered when the child settles: answer the child's gates instead ({waiting})"
        )
    if gate.resolved:
        raise UsageError(
            f"gate {gate_id!r} of execution {execution_id!r} is already decided: {answer_text(gate.resolution)}, "
            "as the journal records it. A gate is answered once (run.gates lists the open ones)."
        )
    if h.status != "suspended":
        raise UsageError(
            f"execution {execution_id!r} is {h.status}, not suspended; it cannot be resumed "
            "(wait until it waits at its gates)"
        )
    value = validate_payload(
        gate.schema, payload, execution_id=execution_id, gate_id=gate_id, gate_payload=gate.payload
    )
    if (
        execution_id in active
        and step_ids.is_question_gate(gate_id)
        and host.questions.get(execution_id, gate_id) is None
    ):
        # The call that asked is recording its question (or stopped asking): never write past it.
        raise UsageError(
            f"gate {gate_id!r} of execution {execution_id!r} is a question a call of this process is still "
            "asking (or has stopped asking): answer it again in a moment (run.gates lists the open ones)"
        )
    if host.questions.get(execution_id, gate_id) is not None:
        # A call of this process waits on this question: it commits the answer and goes on.
        host.questions.give(execution_id, gate_id, to_jsonable(value))
        return GateAnswer(execution_id=execution_id, gate_id=gate_id, history=h, resumed=False, live=True)
    now = host.clock.now()
    seq = h.last_seq + 1
    events = [Event(execution_id, seq, EventKind.GATE_RESOLVED, gate_id, now, {"payload": to_jsonable(value)})]
    resumed = not any(g.gate_id != gate_id for g in h.open_gates())
    if resumed and drive_here and not host.leases.claim(execution_id):
        raise UsageError(
            f"execution {execution_id!r} is driven by another process of the shared journal "
            f"{host.journal.location}: its gate {gate_id!r} was answered there already"
        )
    if resumed:
        events.append(Event(execution_id, seq + 1, EventKind.EXECUTION_RESUMED, None, now, {"gate_id": gate_id}))
    try:
        host.journal.append(events)
    except BaseException:
        if resumed and drive_here:
            host.leases.let_go(execution_id)  # the gate is still open: another process may answer it
        raise
    h.extend(events)
    if resumed and drive_here:
        active.add(execution_id)  # so recover() leaves it to proceed()
    host.observers.notify_events(events)
    return GateAnswer(execution_id=execution_id, gate_id=gate_id, history=h, resumed=resumed)
