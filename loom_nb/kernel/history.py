"""An execution's journaled events, indexed for serving replayed steps, gates and decisions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.events import Event
from loom_nb.journal.run_state import GateState, RunState, StepState
from loom_nb.journal.store import JournalStore

#: A step as the journal holds it (the fold's ``StepState``).
StepRecord = StepState
#: A gate as the journal holds it (the fold's ``GateState``).
GateRecord = GateState


@dataclass
class History(RunState):
    """One execution's events and the ``RunState`` they fold into, indexed for serving replays.

    Attributes:
        events: The events, in seq order.
    """

    events: list[Event] = field(default_factory=list)

    @classmethod
    def of(cls, execution_id: str, events: list[Event]) -> History:
        """Index ``events`` (all of one execution, in seq order)."""
        h = cls(execution_id=execution_id, events=events)
        for e in events:
            h.apply(e)
        return h

    def extend(self, events: Iterable[Event]) -> None:
        """Index ``events``, the ones appended to this execution after those already indexed."""
        for e in events:
            self.events.append(e)
            self.apply(e)

    def open_gates(self) -> list[GateRecord]:
        """Gates opened and not yet resolved, in the order they opened."""
        return [g for g in self.gates.values() if not g.resolved]

    def served_count(self) -> int:
        """How many recorded outcomes a re-run of the body will be served before it runs live."""
        settled = sum(1 for s in self.steps.values() if s.settled)
        resolved = sum(
            1
            for g in self.gates.values()
            if g.resolved
            and not (g.kind == step_ids.IN_DOUBT_GATE and not self._in_doubt_consulted(g))
            and not step_ids.is_question_gate(g.gate_id)  # served to a call, not to the body
        )
        return settled + resolved + len(self.decisions) + len(self.values)

    def _in_doubt_consulted(self, gate: GateRecord) -> bool:
        """True when a re-run will be served this in-doubt gate's answer: its step is unsettled and the
        gate is for the step's latest attempt (a settled step, or an earlier attempt's gate, is not read)."""
        step = self.steps.get(step_ids.parse_step_id(gate.gate_id).subject or gate.gate_id)
        return step is not None and not step.settled and in_doubt_attempt(gate) == step.attempts


def in_doubt_attempt(gate: GateRecord) -> int:
    """The attempt an in-doubt gate was opened for (its payload's ``attempt``; else its id's number)."""
    payload = gate.payload if isinstance(gate.payload, dict) else {}
    attempt = payload.get("attempt")
    return attempt if isinstance(attempt, int) else step_ids.parse_step_id(gate.gate_id).number or 1


def known_history(journal: JournalStore, execution_id: str) -> History:
    """The history of execution ``execution_id`` of ``journal``.

    Raises:
        UsageError: the journal holds no such execution.
    """
    if journal.get_execution(execution_id) is None:
        raise UsageError(
            f"no execution {execution_id!r} in the journal {journal.location} "
            "(list them with %loom runs or runtime.journal.list_executions())"
        )
    return History.of(execution_id, journal.read(execution_id))
