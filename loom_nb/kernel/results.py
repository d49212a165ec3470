"""What the engine hands back: ``ExecutionResult``, ``ReplayReport`` and ``GateAnswer``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom_nb.kernel.errors_codec import error_from_data, error_summary
from loom_nb.kernel.gates import OpenGate
from loom_nb.kernel.history import GateRecord, History


@dataclass(frozen=True, kw_only=True)
class ExecutionResult:
    """Where an execution stands.

    Attributes:
        execution_id: The execution.
        status: ``running``, ``suspended``, ``completed``, ``failed`` or ``cancelled``.
        output: The body's return value (plain JSON) when completed.
        error: The journaled failure (type, message, ...) when failed; when cancelled, the
            ``RunCancelledError`` that awaiting the run raises.
        gates: The open gates when suspended.
    """

    execution_id: str
    status: str
    output: Any = None
    error: dict[str, Any] | None = None
    gates: tuple[OpenGate, ...] = ()

    def exception(self) -> BaseException | None:
        """The failure rebuilt as an exception, or None."""
        return None if self.error is None else error_from_data(self.error)

    def __str__(self) -> str:
        if self.status == "failed" and self.error:
            return f"execution {self.execution_id}: failed ({error_summary(self.error)})"
        if self.status == "suspended":
            return f"execution {self.execution_id}: suspended on {', '.join(g.gate_id for g in self.gates)}"
        return f"execution {self.execution_id}: {self.status}"


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    """What a pure replay found.

    Attributes:
        execution_id: The execution replayed.
        reproduced: True when the body, served only from the log, asked for the same steps, gates,
            decisions and values in the same order and ended the same way.
        recorded_status: The status in the journal.
        replayed_status: How the replay ended (``completed``, ``suspended``, ``failed``,
            ``diverged``; ``cancelled`` when it stopped where a cancelled run's record stops).
        served: How many recorded outcomes the replay was served.
        message: What differed, or "reproduced".
        seconds: Wall time of the replay, from the runtime clock.
        trace: ``(kind, id)`` of every step, gate, decision and value the replay asked for.
        children: The replays of the child executions (``ctx.child``) the replay descended into,
            in the order it reached them (each one with its own ``children``).
    """

    execution_id: str
    reproduced: bool
    recorded_status: str
    replayed_status: str
    served: int
    message: str
    seconds: float = 0.0
    trace: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    children: tuple[ReplayReport, ...] = field(default=(), repr=False)


@dataclass(frozen=True, kw_only=True)
class GateAnswer:
    """A gate's answer the journal now holds (from ``Engine.answer``); ``Engine.proceed`` runs on.

    Attributes:
        execution_id: The execution.
        gate_id: The gate answered.
        history: The execution's history with the answer applied (driving on reads nothing again).
        resumed: True when it was the last open gate (the body runs on), False when gates remain.
        live: True when a call of this process waited on the gate (a question asked mid-call): the
            answer went to that call, which records it and goes on; ``proceed`` has nothing to run.
    """

    execution_id: str
    gate_id: str
    history: History = field(repr=False)
    resumed: bool
    live: bool = False


def open_gate(execution_id: str, g: GateRecord) -> OpenGate:
    """The ``OpenGate`` the engine shows for the recorded gate ``g`` of execution ``execution_id``."""
    return OpenGate(
        execution_id=execution_id,
        gate_id=g.gate_id,
        kind=g.kind,
        payload=g.payload,
        schema=g.schema,
        opened_at=g.opened_at,
    )
