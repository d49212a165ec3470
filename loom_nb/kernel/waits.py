"""``GateWaits``: where a body waits: gates (``ctx.gate`` / ``ctx.gates``: an approval, an answer
from a person or a system) and child executions (``ctx.child``, a gate answered when the child
settles). A re-run is served the recorded answers; an open gate suspends the execution."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from loom_nb.errors import FlowNotFoundError, NonDeterminismError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import digest_value, to_jsonable
from loom_nb.journal.events import EventKind
from loom_nb.kernel.children import child_outcome, child_outcome_payload
from loom_nb.kernel.gates import GateRequest, Suspend, resolve_schema, schema_name
from loom_nb.kernel.history import GateRecord
from loom_nb.kernel.staging import ContextCore, convert


class GateWaits(ContextCore):
    """The part of the context that opens gates and runs child executions."""

    async def gate(self, gate_id: str, kind: str, *, payload: Any = None, schema: Any = None) -> Any:
        """Open one gate and wait for it; on replay, return its recorded (validated) resume payload."""
        (value,) = await self.gates([GateRequest(gate_id=gate_id, kind=kind, payload=payload, schema=schema)])
        return value

    async def gates(self, requests: Sequence[GateRequest]) -> list[Any]:
        """Open several gates together; the execution suspends until every one is resolved.

        Returns the resume payloads in the order of ``requests`` (validated as each one's schema).
        """
        results: list[Any] = []
        waiting: list[str] = []
        for r in requests:
            self._claim(r.gate_id)
            self.trace.append(("gate", r.gate_id))
            name = schema_name(r.schema)
            rec = self._h.gates.get(r.gate_id)
            if rec is not None and rec.resolved:
                self._served()
                value = rec.resolution
                results.append(value if rec.schema is None else convert(value, resolve_schema(rec.schema)))
                continue
            if rec is None and not self._pure:
                payload = to_jsonable(r.payload)
                ev = self.stage(EventKind.GATE_OPENED, r.gate_id, {"kind": r.kind, "payload": payload, "schema": name})
                self._new_gates[r.gate_id] = GateRecord(r.gate_id, r.kind, payload, name, ev.at)
            waiting.append(r.gate_id)
        if waiting:
            self.waiting.extend(waiting)
            raise Suspend(waiting)
        return results

    # -- child executions ---------------------------------------------------------------------
    async def child(self, flow: Any, input: Any = None, *, step_id: str) -> Any:
        """Run ``flow`` as a child execution and return its output (journaled, linked to this step).

        The child has its own id, ``<this execution>/<step_id>`` (``step_ids.child_execution_id``),
        its own steps and gates, and its ``execution_started`` records ``parent: {execution, step}``.
        This step is a gate of kind ``ChildExecution`` (id ``step_id``): answered at once when the
        child settles in this call; when the child waits at its gates this execution suspends too,
        and the engine answers the gate (and resumes this execution) once the child settles. A re-run
        is served the recorded answer; nothing of the child runs again.

        Raises:
            ChildExecutionError: the child failed or was cancelled (the message names it).
        """
        rec = self._h.gates.get(step_id)
        cid = step_ids.child_execution_id(self.execution_id, step_id)
        if self._pure:
            # A replay descends into the child: it replays too, against the code now loaded.
            try:
                outcome = await self.gate(step_id, step_ids.CHILD_GATE)
            except Suspend:
                await self._replay_child(cid, flow, input, step_id)
                raise
            await self._replay_child(cid, flow, input, step_id)
            return child_outcome(cid, outcome)
        if rec is not None and rec.resolved:
            return child_outcome(cid, await self.gate(step_id, step_ids.CHILD_GATE))
        self._claim(step_id)
        self.trace.append(("gate", step_id))
        name = self._rt.flows.name_of(flow)
        await self.commit()  # the parent is in the journal before its child is (recovery finds both)
        result = await self._rt.run_child(
            cid, name, input, parent={"execution": self.execution_id, "step": step_id}, principal=self.principal
        )
        if self._rt.cancelling(self.execution_id):
            raise asyncio.CancelledError(f"execution {self.execution_id} cancelled")  # the child was cancelled with it
        payload = {"execution": cid, "flow": name}
        if rec is None:
            ev = self.stage(
                EventKind.GATE_OPENED, step_id, {"kind": step_ids.CHILD_GATE, "payload": payload, "schema": None}
            )
            rec = self._new_gates[step_id] = GateRecord(step_id, step_ids.CHILD_GATE, payload, None, ev.at)
        if result.status in ("completed", "failed", "cancelled"):
            outcome = child_outcome_payload(result.status, result.output, result.error)
            self.stage(EventKind.GATE_RESOLVED, step_id, {"payload": outcome})
            return child_outcome(cid, outcome)
        self.waiting.append(step_id)
        raise Suspend([step_id])

    async def _replay_child(self, child_id: str, flow: Any, input: Any, step_id: str) -> None:
        """A pure replay of the child ``step_id`` started (when the record has it): the same flow and
        input as recorded, and its own replay reproduces; else ``NonDeterminismError`` naming both."""
        if self._rt.journal.get_execution(child_id) is None:
            return  # the record stops before the child was started
        h = self._rt.history(child_id)
        where = f"step {step_id!r} of execution {self.execution_id!r}"
        fix = (
            "restore the parent's old code, or put the change behind `ctx.patched('<change>')` so recorded "
            "runs keep the old child; or fork the run before this step (or start a new one)"
        )
        try:
            name = self._rt.flows.name_of(flow)  # registers a function: the child replays the code now loaded
        except FlowNotFoundError as exc:  # a string name (a function registers itself)
            wanted = str(flow)
            agent = step_ids.agent_name(wanted)
            how = (
                f"build the sub-agent loom.Agent(name={agent!r}, ...) in this process (or call its "
                "agent.register(runtime))"
                if agent is not None
                else "define (or import) that flow"
            )
            raise FlowNotFoundError(
                f"the child execution {child_id!r} (started at {where}, recorded flow {h.flow!r}) needs the "
                f"flow {wanted!r}, which is not registered in this process: {how}, then replay (or check) again"
            ) from exc
        if name != h.flow:
            raise NonDeterminismError(
                f"{where} now starts the flow {name!r} as its child, but the child execution {child_id!r} "
                f"ran {h.flow!r}: {fix}"
            )
        if digest_value(to_jsonable(input)) != digest_value(h.input):
            raise NonDeterminismError(
                f"{where} now gives its child execution {child_id!r} another input than the recorded one: {fix}"
            )
        report = await self._rt.replay(child_id)
        self.child_replays.append(report)
        if not report.reproduced:
            raise NonDeterminismError(
                f"the child execution {child_id!r} (started at {where}) does not replay as recorded "
                f"(runtime.replay({child_id!r}) replays it alone): {report.message}"
            )

    def open_gates(self) -> list[GateRecord]:
        """The gates this body waits on (recorded and newly opened)."""
        out: list[GateRecord] = []
        for gid in self.waiting:
            rec = self._h.gates.get(gid) or self._new_gates.get(gid)
            if rec is not None:
                out.append(rec)
        return out
