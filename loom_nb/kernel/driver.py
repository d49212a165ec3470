"""``Driver``: what one engine drives in this process, and driving an execution: claim its lease
and keep it, run its body in an ``ExecutionContext`` until it completes, fails, suspends or is
cancelled (recording which), then wake the parent waiting for it (a child execution, ``ctx.child``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from loom_nb.errors import (
    EffectNotFoundError,
    FlowNotFoundError,
    JournalWriteError,
    LeaseLostError,
    NonDeterminismError,
)
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import to_jsonable
from loom_nb.journal.event_format import with_format
from loom_nb.journal.events import TERMINAL_STATUSES, EventKind
from loom_nb.kernel.answers import AnswerHost, record_answer
from loom_nb.kernel.cancels import Cancels
from loom_nb.kernel.children import child_gates, child_outcome_payload, parents_of_settled
from loom_nb.kernel.context import ExecutionContext, ExecutionHost
from loom_nb.kernel.effect_registry import Principal
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.gates import Suspend
from loom_nb.kernel.history import History, known_history
from loom_nb.kernel.leases import Leases
from loom_nb.kernel.results import ExecutionResult, GateAnswer, open_gate
from loom_nb.kernel.stops import BoundaryStops

CHILD_GATE = step_ids.CHILD_GATE


class DriverHost(ExecutionHost, AnswerHost, Protocol):
    """What the ``Driver`` needs of the engine (``Engine`` is one): what a context and an answer
    need, its leases, cancels and stops, the event format of new executions, and where one stands."""

    @property
    def leases(self) -> Leases:
        """The leases the engine holds on a shared journal."""
        ...

    @property
    def cancels(self) -> Cancels:
        """The cancels asked for and not yet recorded."""
        ...

    @property
    def event_format(self) -> int:
        """The event format new (child) executions are written in."""
        ...

    @property
    def stops(self) -> BoundaryStops:
        """The stops asked for at a body's next boundary (dropped when the execution settles)."""
        ...

    def result(self, execution_id: str) -> ExecutionResult:
        """Where an execution stands, from the journal."""
        ...


class Driver:
    """The executions one engine drives in this process, and how it drives one.

    Args:
        host: The engine.

    Attributes:
        active: The executions whose body runs in this process (from ``answer`` on, when that
            answer resumed it: ``recover`` leaves them alone).
        tasks: The task driving each execution's body in this process (``cancel`` cancels it).
        children: The child executions each parent is driving in this process (``run_child``;
            several at once under parallel tools), for ``cancel``.
    """

    def __init__(self, host: DriverHost) -> None:
        self._host = host
        self._locks: dict[str, asyncio.Lock] = {}
        self.active: set[str] = set()
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.children: dict[str, set[str]] = {}

    def lock(self, execution_id: str) -> asyncio.Lock:
        """The lock an execution is started, answered, driven and cancelled under in this process."""
        lock = self._locks.get(execution_id)
        if lock is None:
            lock = self._locks[execution_id] = asyncio.Lock()
        return lock

    async def drive(self, history: History, *, fresh: bool = False, recovering: bool = False) -> ExecutionResult:
        """Drive the execution ``history`` holds under its lease (``fresh``: record its start first;
        ``recovering``: a run a crash left running) and wake its parent once it settles.

        Raises:
            LeaseLostError: another process holds (or took over) the lease.
        """
        host = self._host
        eid = history.execution_id
        if not host.leases.claim(eid):
            raise LeaseLostError(
                f"execution {eid!r} is driven by another process of the shared journal {host.journal.location} "
                f"(it holds the lease): this process ({host.leases.owner}) leaves it to that one"
            )
        host.leases.hold(eid)
        try:
            result = await self.drive_held(history, fresh=fresh, recovering=recovering)
        except asyncio.CancelledError:
            if not host.leases.cut_for_lost_lease(eid):
                raise
            # The heartbeat found the lease lost and cancelled this task: that is a lost lease, not a
            # cancel someone asked for (which stays ``CancelledError``).
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            host.check_lease(eid)
            raise
        finally:
            host.leases.let_go(eid)
        if result.status in TERMINAL_STATUSES:
            host.deps.pop(eid, None)
            host.stops.drop(eid)
        if history.parent is not None and result.status in TERMINAL_STATUSES:
            await self.wake_parent(history.parent, result)
        return result

    # -- child executions (``ctx.child``) --------------------------------------------------------
    async def run_child(
        self, child_id: str, flow: str, input: Any, *, parent: dict[str, Any], principal: Principal
    ) -> ExecutionResult:
        """Start the child execution ``child_id`` of ``parent`` (``{"execution", "step"}``), or drive
        it on when a crash left it running, or return where it stands (``Engine.run_child``)."""
        deps = self._host.deps
        pid = str(parent["execution"])
        self.children.setdefault(pid, set()).add(child_id)
        if pid in deps:
            deps.setdefault(child_id, deps[pid])  # a sub-agent shares its caller's deps
        try:
            return await self._run_child(child_id, flow, input, parent=parent, principal=principal)
        finally:
            driving = self.children.get(pid)
            if driving is not None:
                driving.discard(child_id)
                if not driving:
                    del self.children[pid]

    async def _run_child(
        self, child_id: str, flow: str, input: Any, *, parent: dict[str, Any], principal: Principal
    ) -> ExecutionResult:
        host = self._host
        async with self.lock(child_id):
            if host.journal.get_execution(child_id) is None:
                history = History(
                    execution_id=child_id,
                    flow=flow,
                    input=to_jsonable(input),
                    principal={"name": principal.name, "scopes": sorted(principal.scopes)},
                    format=host.event_format,
                    status="running",
                    parent=dict(parent),
                )
                return await self.drive(history, fresh=True)
            h = host.history(child_id)
            if h.status == "running" and child_id not in self.active:
                return await self.drive(h, recovering=True)
        return host.result(child_id)

    async def wake_parent(self, parent: dict[str, Any], child: ExecutionResult) -> None:
        """Answer the parent's ``ChildExecution`` gate with the settled child's outcome and run the
        parent on (nothing to do while the parent itself drives the child, or once answered)."""
        host = self._host
        pid, step = str(parent.get("execution", "")), str(parent.get("step", ""))
        rec = host.journal.get_execution(pid)
        if rec is None or rec.status != "suspended" or pid in self.active:
            return
        async with self.lock(pid):
            h = host.history(pid)
            gate = h.gates.get(step)
            if h.status != "suspended" or gate is None or gate.resolved or gate.kind != CHILD_GATE:
                return
            outcome = child_outcome_payload(child.status, child.output, child.error)
            answer = record_answer(
                host, known_history(host.journal, pid), step, outcome, child=True, active=self.active
            )
            await self.proceed(answer)

    async def wake_settled_children(self) -> list[ExecutionResult]:
        """Parents suspended on a child that has settled (a crash between the two): wake them."""
        host = self._host
        out: list[ExecutionResult] = []
        records = host.journal.list_executions()
        candidates = parents_of_settled(records)
        for rec in (r for r in records if r.execution_id in candidates):
            h = host.history(rec.execution_id)
            for gid, cid in child_gates(h):
                child = host.journal.get_execution(cid)
                if child is not None and child.status in TERMINAL_STATUSES:
                    await self.wake_parent({"execution": rec.execution_id, "step": gid}, host.result(cid))
                    out.append(host.result(rec.execution_id))
        return out

    async def drive_held(self, history: History, *, fresh: bool = False, recovering: bool = False) -> ExecutionResult:
        """Run the body of the execution ``history`` holds (its lease taken: ``drive``) until it
        completes, fails, suspends or is cancelled, and record which."""
        host = self._host
        eid = history.execution_id
        body = host.flows.get(history.flow)
        ctx = ExecutionContext(host, history, recovering=recovering)
        if fresh:
            started: dict[str, Any] = {"flow": history.flow, "input": history.input, "principal": history.principal}
            if history.parent is not None:
                started["parent"] = history.parent
            ctx.stage(EventKind.EXECUTION_STARTED, None, with_format(started, history.format))
        self.active.add(eid)
        task = asyncio.current_task()
        if task is not None:
            self.tasks[eid] = task
        try:
            if host.cancels.asked(eid):  # cancelled between the answer that resumed it and now
                await ctx.commit()
                return host.cancels.record(eid)
            try:
                output = to_jsonable(await body(ctx, history.input))
            except Suspend:
                waiting = ctx.open_gates()
                ctx.stage(EventKind.EXECUTION_SUSPENDED, None, {"gates": [g.gate_id for g in waiting]})
                await ctx.commit()
                gates = tuple(open_gate(eid, g) for g in waiting)
                if any(g.kind == CHILD_GATE for g in waiting):
                    gates = tuple(host.open_gates(eid))  # a child's gates, in the parent's place
                return ExecutionResult(execution_id=eid, status="suspended", gates=gates)
            except LeaseLostError:
                raise  # another process drives it now: write nothing more
            except JournalWriteError as exc:
                # The journal failed, not the flow: never record that as the run's failure. Write
                # what the context still holds staged once more (a transient fault may have cleared)
                # and stop; the run stays ``running`` for ``recover()``.
                try:
                    await ctx.commit()
                except JournalWriteError as again:
                    exc.add_note(f"(writing the staged events once more failed too: {again.cause_text})")
                raise
            except (NonDeterminismError, EffectNotFoundError, FlowNotFoundError):
                await ctx.commit()
                raise
            except Exception as exc:
                error = error_to_data(exc)
                ctx.stage(EventKind.EXECUTION_FAILED, None, {"error": error})
                await ctx.commit()
                return ExecutionResult(execution_id=eid, status="failed", error=error)
            except asyncio.CancelledError:
                await ctx.commit()  # nothing recorded is lost
                if not host.cancels.asked(eid):
                    raise  # not a cancel of the run (the loop is closing): it stays running for recover()
                if task is not None:
                    task.uncancel()
                return host.cancels.record(eid)
            except BaseException:
                await ctx.commit()  # nothing recorded is lost; the execution stays running for recover()
                raise
            ctx.stage(EventKind.EXECUTION_COMPLETED, None, {"output": output})
            await ctx.commit()
            return ExecutionResult(execution_id=eid, status="completed", output=output)
        finally:
            self.active.discard(eid)
            if task is not None and self.tasks.get(eid) is task:
                del self.tasks[eid]

    async def proceed(self, answer: GateAnswer) -> ExecutionResult:
        """Drive the execution on after ``answer`` (``Engine.proceed``, under the execution's lock), or
        return the suspended result when gates are still open."""
        h = answer.history
        if answer.live:  # the call waiting on it goes on (kernel/questions.py): nothing to run here
            return self._host.result(h.execution_id)
        if not answer.resumed:
            gates = tuple(open_gate(h.execution_id, g) for g in h.open_gates())
            return ExecutionResult(execution_id=h.execution_id, status="suspended", gates=gates)
        try:
            return await self.drive(h)
        finally:
            self.active.discard(h.execution_id)  # the reservation ``answer`` made, whatever happened
