"""Steps cut in flight: how many attempts a step gets across processes (``attempt_limit``) and the
``InDoubt`` gate a person answers for a non-idempotent step whose outcome is unknown."""

from __future__ import annotations

from typing import Any, Literal, NoReturn

from pydantic import BaseModel

from loom_nb.errors import InDoubtError, RetriesExhaustedError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import to_jsonable
from loom_nb.journal.events import EventKind
from loom_nb.kernel.effect_registry import EffectSpec
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.gates import Suspend, schema_name
from loom_nb.kernel.history import GateRecord, StepRecord, in_doubt_attempt
from loom_nb.kernel.staging import ContextCore
from loom_nb.kernel.step_shapes import completed_payload

IN_DOUBT_GATE = step_ids.IN_DOUBT_GATE
#: How many attempts in all an idempotent step without a retry policy (``EffectSpec.retry`` with an
#: ``attempts`` limit) gets across processes before a cut in flight fails it instead of running it again.
DEFAULT_ATTEMPT_LIMIT = 3
#: What ``InDoubtSteps._in_doubt`` returns when the answer is to invoke the effect again.
RUN_AGAIN: Any = object()


class InDoubtResolution(BaseModel):
    """How a person resolves an in-doubt step (the resume payload of an ``InDoubt`` gate).

    Attributes:
        action: ``happened`` (record ``output`` as the step's result), ``run_again`` (invoke the
            effect again) or ``fail`` (record the step as failed with ``InDoubtError``).
        output: The output to record when ``action`` is ``happened``.
        reason: Why, for the record.
    """

    action: Literal["happened", "run_again", "fail"]
    output: Any = None
    reason: str | None = None


def attempt_limit(spec: EffectSpec) -> int:
    """Most attempts in all of a step of ``spec``, counted across processes: its retry policy's
    ``attempts`` (``loom_nb.effects.RetryPolicy``), else ``DEFAULT_ATTEMPT_LIMIT``."""
    attempts = getattr(spec.retry, "attempts", None)
    return attempts if isinstance(attempts, int) and attempts >= 1 else DEFAULT_ATTEMPT_LIMIT


class InDoubtSteps(ContextCore):
    """The part of the context that handles a recorded step cut in flight: fail it once it used up
    its attempts, or park it on its ``InDoubt`` gate and serve the person's answer."""

    def _exhausted(self, sid: str, rec: StepRecord, spec: EffectSpec) -> NoReturn:
        """Fail step ``sid``, cut in flight on every one of the attempts its policy (``spec``'s) allows
        (recorded as ``step_failed``), instead of invoking it once more."""
        limit = attempt_limit(spec)
        error = RetriesExhaustedError(
            f"step {sid!r} (effect {rec.effect!r}) of execution {self.execution_id!r} was started "
            f"{rec.attempts} times and never finished (its process died or was cut each time); it allows "
            f"{limit} attempts in all, so it is not run again. Find why it dies, then fork the run at "
            "this step or start a new one (a larger RetryPolicy(attempts=...) allows more attempts)."
        )
        data = {"effect": rec.effect, "attempt": rec.attempts, "will_retry": False, "error": error_to_data(error)}
        self.stage(EventKind.STEP_FAILED, sid, data)
        raise error

    def _in_doubt(self, sid: str, rec: StepRecord, journaled: Any) -> Any:
        # One gate per attempt cut mid-call: an answer ("run it again") covers only the attempt it
        # was given for, so a second cut asks a person again instead of running a third time.
        gid, gate = self._in_doubt_gate(sid, rec.attempts)
        if gate is None:
            self._park_in_doubt(sid, rec.effect, rec.attempts, journaled)
        if not gate.resolved:
            self.waiting.append(gid)
            raise Suspend([gid])
        self._served()
        resolution = InDoubtResolution.model_validate(gate.resolution)
        if resolution.action == "happened":
            output = to_jsonable(resolution.output)
            data = completed_payload(self._format, rec.effect, output, rec.attempts, None)
            self.stage(EventKind.STEP_COMPLETED, sid, {**data, "resolved_by": gid})
            return output
        if resolution.action == "fail":
            error = InDoubtError(
                f"step {sid!r} (effect {rec.effect!r}) of execution {self.execution_id!r} was cut in flight "
                f"and resolved as failed{': ' + resolution.reason if resolution.reason else ''}"
            )
            self.stage(
                EventKind.STEP_FAILED,
                sid,
                {"effect": rec.effect, "attempt": rec.attempts, "will_retry": False, "error": error_to_data(error)},
            )
            raise error
        return RUN_AGAIN

    def _park_in_doubt(
        self, sid: str, effect_id: str, attempt: int, journaled: Any, *, cause: dict[str, Any] | None = None
    ) -> NoReturn:
        """Record ``attempt`` of step ``sid`` in doubt, open its ``InDoubt`` gate and suspend on it
        (``step_in_doubt`` and the gate are committed together, with ``execution_suspended``).
        ``cause``: the error that left the outcome unknown (a timeout, an MCP server gone), kept in
        the gate's payload so the card names it; None when the process stopped mid-call (a crash)."""
        gid, _ = self._in_doubt_gate(sid, attempt)
        self.stage(EventKind.STEP_IN_DOUBT, sid, {"effect": effect_id, "attempt": attempt})
        payload = {"effect": effect_id, "step_id": sid, "input": journaled, "attempt": attempt}
        if cause is not None:
            payload["cause"] = cause
        name = schema_name(InDoubtResolution)
        ev = self.stage(EventKind.GATE_OPENED, gid, {"kind": IN_DOUBT_GATE, "payload": payload, "schema": name})
        self._new_gates[gid] = GateRecord(gid, IN_DOUBT_GATE, payload, name, ev.at)
        self.waiting.append(gid)
        raise Suspend([gid])

    def _in_doubt_gate(self, sid: str, attempt: int) -> tuple[str, GateRecord | None]:
        """The in-doubt gate for ``attempt`` of step ``sid``, and its record if it was opened: the
        step's first in-doubt gate is ``<step>:in_doubt`` (whatever attempt it was for, as journals
        before per-attempt gates have it); a later attempt's is ``<step>:in_doubt:<attempt>``."""
        first = step_ids.in_doubt_gate_id(sid)
        gate = self._h.gates.get(first)
        if gate is None or in_doubt_attempt(gate) == attempt:
            return first, gate
        later = step_ids.in_doubt_gate_id(sid, attempt)
        return later, self._h.gates.get(later)
