"""``Engine``: the durable kernel that starts, resumes, recovers and replays executions over one journal.

It is handed its journal (the composition root, ``loom_nb.Runtime.open``, chooses the store).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Coroutine, Iterable, Sequence
from types import TracebackType
from typing import Any, Self, TypedDict, TypeVar, cast

from loom_nb.errors import (
    UsageError,
)
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import to_jsonable
from loom_nb.journal.event_format import CURRENT_FORMAT, with_format
from loom_nb.journal.events import QUEUED_STATUS, TERMINAL_STATUSES, Event, EventKind, ExecutionRecord
from loom_nb.journal.store import BatchedLookup, JournalStore, LeasingStore
from loom_nb.kernel.answers import record_answer
from loom_nb.kernel.async_bridge import run_sync
from loom_nb.kernel.cancels import Cancels, cancelled_error
from loom_nb.kernel.check import CheckHook, CheckReport, check_executions
from loom_nb.kernel.children import child_gates
from loom_nb.kernel.driver import Driver
from loom_nb.kernel.effect_registry import EffectInvoker, EffectRegistry, Principal
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.flows import FLOWS, FlowFn, FlowRegistry
from loom_nb.kernel.fork import fork_cut, forked_events
from loom_nb.kernel.gates import OpenGate
from loom_nb.kernel.history import History, known_history
from loom_nb.kernel.journal_writer import JournalWriter
from loom_nb.kernel.leases import Leases, dead_here
from loom_nb.kernel.live_questions import LiveQuestions
from loom_nb.kernel.observers import Observers
from loom_nb.kernel.recovery import recover_executions
from loom_nb.kernel.replay import replay_history
from loom_nb.kernel.results import ExecutionResult, GateAnswer, ReplayReport, open_gate
from loom_nb.kernel.sources import Clock, IdSource, RandomSource
from loom_nb.kernel.stops import BoundaryStops
from loom_nb.kernel.store_reads import ProjectionLookups, StoreCapabilities
from loom_nb.kernel.stream_commits import StreamCommits, stream_commits_for
from loom_nb.system_sources import RandomIds, SystemClock, SystemRandom

__all__ = [
    "Engine",
    "EngineOptions",
    "ExecutionResult",
    "GateAnswer",
    "ReplayReport",
    "cancelled_error",
    "require_execution_id",
]

T = TypeVar("T")
CHILD_GATE = step_ids.CHILD_GATE
log = logging.getLogger("loom_nb")


def require_execution_id(value: Any, argument: str) -> str:
    """``value`` when it is a usable execution id (a non-empty string without surrounding spaces).

    Raises:
        UsageError: it is empty, blank, padded or not a string (an id the user typed must not turn
            into a random one silently).
    """
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise UsageError(
            f"{argument} must be a non-empty string without surrounding spaces, got {value!r}: "
            f"pass an id such as 'order-42', or leave {argument} out for a fresh random id"
        )
    return value


class EngineOptions(TypedDict, total=False):
    """The kernel's injected parts (``Engine``'s keyword arguments besides ``effects``), for layers
    that pass them through (``loom_nb.Runtime``)."""

    clock: Clock | None
    ids: IdSource | None
    random: RandomSource | None
    flows: FlowRegistry | None
    principal: Principal | None
    stream_commits: StreamCommits | None


class Engine:
    """The durable kernel: executions of flows over a journal, with effects, gates and decisions.

    Args:
        journal: Where events go (``DuckDBJournal``, ``InMemoryJournal``...).
        clock: Time source (real by default; ``loom_nb.testing.FakeClock`` in tests).
        ids: Execution id source.
        random: Source of ``ctx.random()``.
        effects: The effect registry / ring (a plain registry by default).
        flows: Where flows are found by name (the process-wide registry by default).
        principal: Who executions act for unless ``start`` says otherwise.
        stream_commits: When stream chunks are committed (``StreamCommits``); None: ``PROMPT`` on
            a shared journal (``LeasingStore``: another process may follow a run), else ``DEFERRED``.
    """

    def __init__(
        self,
        journal: JournalStore,
        *,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        random: RandomSource | None = None,
        effects: EffectInvoker | None = None,
        flows: FlowRegistry | None = None,
        principal: Principal | None = None,
        stream_commits: StreamCommits | None = None,
    ) -> None:
        self.journal = journal
        #: The stream chunk policy set (None: the journal's, ``stream_policy``).
        self.stream_commits = stream_commits
        self.writer = JournalWriter(journal)  #: Batches every execution's commits into one transaction.
        #: Which optional store protocols the journal implements (``_offers``).
        self.capabilities = StoreCapabilities()
        #: Runs waiting for their projection row (``_lookup``), read together on the loop's next turn.
        self.lookups = ProjectionLookups()
        self.clock: Clock = clock or SystemClock()
        self.ids: IdSource = ids or RandomIds()
        self.random: RandomSource = random or SystemRandom()
        self.effects: EffectInvoker = effects if effects is not None else EffectRegistry()
        self.flows = flows or FLOWS
        self.principal = principal or Principal()
        #: What this engine drives in this process (locks, bodies running, their tasks, children).
        self.driver = Driver(self)
        #: Cancels asked for and not yet recorded, and how one is recorded.
        self.cancels = Cancels(self)
        #: Stops asked for at the body's next boundary ("after this turn"): ``stop_at_boundary``.
        self.stops = BoundaryStops()
        #: Who watches committed events and streamed deltas (``observe`` subscribes here).
        self.observers = Observers()
        #: ``observe(on_event, *, on_delta=None, execution_id=None)``: ``on_event(event)`` after events commit,
        #: ``on_delta(execution_id, step_id, text)`` per streamed delta; returns an unsubscribe (``Observers``).
        self.observe = self.observers.subscribe
        self.questions = LiveQuestions()  #: What calls here ask a person mid-call (``kernel/questions.py``).
        #: A flow layer's own checks of an unfinished execution, by flow name (``check`` runs them;
        #: an ``Agent`` adds one comparing the system prompt and tool schemas a run recorded).
        self.check_hooks: dict[str, CheckHook] = {}
        #: The event format new executions are written in (``journal.event_format``; a fork keeps its
        #: source's). Set it to 1 to write the format before versioning.
        self.event_format: int = CURRENT_FORMAT
        self._closed = False
        #: The leases this engine holds on a shared journal (``LeasingStore``) and their heartbeats;
        #: its owner name is who this engine is in the ``leases`` table: host, process id and engine.
        self.leases = Leases(self, self.capabilities, f"{socket.gethostname()}:{os.getpid()}:{id(self):x}")
        #: What each execution hands its effects (``EffectContext.deps``), by execution id: live
        #: objects of this process (a database handle, a client), never journaled. Set before the
        #: execution runs (``Agent.start(deps=...)``, ``Agent.attach(id, deps=...)`` after a
        #: restart); a child execution gets its parent's; dropped when the execution settles here.
        self.deps: dict[str, Any] = {}

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def lease_seconds(self) -> float:
        """Seconds a lease on a shared journal (``LeasingStore``) lasts without a heartbeat; the
        heartbeat renews it every third of that while this process drives the execution."""
        return self.leases.seconds

    @lease_seconds.setter
    def lease_seconds(self, seconds: float) -> None:
        self.leases.seconds = seconds

    @property
    def lease_owner(self) -> str:
        """Who this engine is in the ``leases`` table: host, process id and engine."""
        return self.leases.owner

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self._closed

    def close(self) -> None:
        """Close the journal (idempotent)."""
        if not self._closed:
            self._closed = True
            self.journal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(journal={self.journal.location!r})"

    # -- queries ----------------------------------------------------------------------------------
    def history(self, execution_id: str) -> History:
        """The indexed events of one execution."""
        return History.of(execution_id, self.journal.read(execution_id))

    def _known(self, execution_id: str) -> History:
        return known_history(self.journal, execution_id)

    def result(self, execution_id: str) -> ExecutionResult:
        """Where an execution stands, from the journal."""
        h = self._known(execution_id)
        if h.status == "running" and len(h.events) == 1:
            record = self.journal.get_execution(execution_id)
            if record is not None and record.status == QUEUED_STATUS:
                return ExecutionResult(execution_id=execution_id, status=QUEUED_STATUS)
        gates = tuple(self.open_gates(execution_id)) if h.status == "suspended" else ()
        error = h.error
        if h.status == "cancelled":
            error = error_to_data(cancelled_error(execution_id, h.cancel_reason))
        return ExecutionResult(execution_id=execution_id, status=h.status, output=h.output, error=error, gates=gates)

    def open_gates(self, execution_id: str | None = None) -> list[OpenGate]:
        """Open gates of one suspended execution, or of every suspended execution.

        A parent waiting for a child execution (``ctx.child``) shows its child's open gates (under
        the child's id, which is what ``resume`` takes), never its own ``ChildExecution`` gate."""
        records = (
            [self.journal.get_execution(execution_id)] if execution_id else self.journal.list_executions("suspended")
        )
        out: list[OpenGate] = []
        for rec in records:
            if rec is not None and rec.status == "suspended":
                for g in self.history(rec.execution_id).open_gates():
                    if g.kind != CHILD_GATE:
                        out.append(open_gate(rec.execution_id, g))
                    elif execution_id is not None:  # a parent shows its child's gates (the child's own ids)
                        out.extend(self.open_gates(step_ids.child_execution_id(rec.execution_id, g.gate_id)))
        return out

    def cancelling(self, execution_id: str) -> bool:
        """True while a cancel of the execution was asked for and not yet recorded."""
        return self.cancels.asked(execution_id)

    def stop_at_boundary(self, execution_id: str, reason: str | None = None, *, starting: bool = False) -> None:
        """Ask the execution to stop at its body's next boundary (``ExecutionContext.boundary``: the
        agent loop's turn boundary), recorded ``cancelled`` there with nothing in flight, so nothing
        in doubt. A suspended run stops at the first boundary after it is resumed here. The request
        lives in this process (``kernel/stops.py``); ``cancel`` stops at once instead. ``starting``:
        this process is starting the execution and it may not be in the journal yet.

        Raises:
            UsageError: unknown execution, one that already completed or failed, or one another live
                process of the shared journal drives (ask there, or ``cancel`` it now).
        """
        record = self.journal.get_execution(execution_id) if starting else self._known(execution_id)
        if record is not None and record.status in TERMINAL_STATUSES:
            raise UsageError(f"execution {execution_id!r} already {record.status}; there is nothing to stop")
        leases = self.leases.store()
        holder = leases.lease_owner(execution_id) if leases is not None else None
        if holder is not None and holder != self.lease_owner and not dead_here(holder):
            raise UsageError(
                f"execution {execution_id!r} is driven by another process ({holder}): a stop after its turn is "
                f"asked there; stop it now from here with cancel()"
            )
        self.stops.ask(execution_id, reason)

    def take_boundary_stop(self, execution_id: str) -> bool:
        """At a boundary of the body: True (and the stop becomes the cancel the driving task records)
        when a stop at a boundary was asked for (``stop_at_boundary``)."""
        asked, reason = self.stops.take(execution_id)
        if asked:
            self.cancels.ask_unless_asked(execution_id, reason)
        return asked

    def is_active(self, execution_id: str) -> bool:
        """True while this process is running the execution's body (from ``answer`` on, when that
        answer resumed it)."""
        return execution_id in self.driver.active

    # -- reads ------------------------------------------------------------------------------------
    async def _lookup(self, execution_id: str) -> ExecutionRecord | None:
        """Execution ``execution_id``'s projection row, read together with those of every run that
        asks in the same turn of the event loop (one query for 64 runs started by one ``gather``)
        when the store reads many at once (``BatchedLookup``); else read at once."""
        journal = self.journal
        if not self._offers(BatchedLookup):
            return journal.get_execution(execution_id)
        return await self.lookups.lookup(cast(BatchedLookup, journal), execution_id)

    # -- leases (a shared journal: ``LeasingStore``; see ``Leases``) ----------------------------------
    def _offers(self, capability: type) -> bool:
        """Whether the journal implements the optional store protocol ``capability`` (asked once per
        journal and protocol: ``StoreCapabilities``)."""
        return self.capabilities.offers(self.journal, capability)

    @property
    def stream_policy(self) -> StreamCommits:
        """When this engine's executions commit their stream chunks: ``stream_commits``, else the
        journal's (``PROMPT`` on a shared journal, which another process may follow)."""
        return self.stream_commits or stream_commits_for(self._offers(LeasingStore))

    def confirm_lease(self, execution_id: str) -> None:
        """Check at the database, now, that this process still holds the execution's lease (renewing
        it): called after a non-idempotent step's start is committed and before its effect runs, so
        a process that was frozen past its lease does not make the call its successor owns.

        Raises:
            LeaseLostError: another process took the execution over; the effect does not run.
        """
        self.leases.confirm(execution_id)

    def check_lease(self, execution_id: str) -> None:
        """Refuse a commit of an execution whose lease this process lost (called before each commit).

        Raises:
            LeaseLostError: another process took the execution over; this run stops here.
        """
        self.leases.check(execution_id)

    # -- driving (``Driver``) ----------------------------------------------------------------------
    async def _drive_held(self, history: History, *, fresh: bool = False, recovering: bool = False) -> ExecutionResult:
        # (tests drive a child without the parent's wake-up through this)
        return await self.driver.drive_held(history, fresh=fresh, recovering=recovering)

    async def run_child(
        self, child_id: str, flow: str, input: Any, *, parent: dict[str, Any], principal: Principal
    ) -> ExecutionResult:
        """Start the child execution ``child_id`` of ``parent`` (``{"execution", "step"}``), or drive
        it on when a crash left it running, or return where it stands (engine-facing: ``ctx.child``)."""
        return await self.driver.run_child(child_id, flow, input, parent=parent, principal=principal)

    async def start(
        self,
        flow: FlowFn | str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        principal: Principal | None = None,
    ) -> ExecutionResult:
        """Start an execution of ``flow`` with ``input`` and run it until it completes, fails or suspends.

        The body receives ``input`` as plain JSON (as a resumed run reads it from the journal).
        Starting with an id that exists returns that execution's current result (idempotent start).
        """
        name = self.flows.name_of(flow)
        eid = self.ids.new_id() if execution_id is None else require_execution_id(execution_id, "execution_id")
        async with self.driver.lock(eid):
            existing = self._existing(eid, name, await self._lookup(eid))
            if existing is not None:
                return existing
            if not self.leases.claim(eid):
                raise UsageError(
                    f"execution {eid!r} is being started by another process of the shared journal "
                    f"{self.journal.location}: wait for it (runtime.result({eid!r}))"
                )
            who = principal or self.principal
            history = History(
                execution_id=eid,
                flow=name,
                input=to_jsonable(input),
                principal={"name": who.name, "scopes": sorted(who.scopes)},
                format=self.event_format,
                status="running",
            )
            return await self.driver.drive(history, fresh=True)

    def _existing(self, eid: str, flow_name: str, existing: ExecutionRecord | None) -> ExecutionResult | None:
        """The current result of execution ``eid``, whose projection row is ``existing``, when it
        exists (an idempotent start or submit), else None.

        Raises:
            UsageError: ``eid`` exists and runs another flow.
        """
        if existing is None:
            return None
        if existing.flow != flow_name:
            raise UsageError(
                f"execution {eid!r} already exists and runs flow {existing.flow!r}, not {flow_name!r}: "
                "pick another execution_id"
            )
        return self.result(eid)

    def submit(
        self,
        flow: FlowFn | str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        principal: Principal | None = None,
    ) -> ExecutionResult:
        """Record an execution of ``flow`` with ``input`` for a worker to run (``loom-nb worker``),
        without running it here: its ``execution_started`` carries ``"queued": true`` and its
        status is ``queued`` until a worker takes it. Submitting an id that exists returns that
        execution's current result (idempotent, as ``start``).

        Raises:
            UsageError: ``execution_id`` exists and runs another flow.
        """
        name = self.flows.name_of(flow)
        eid = self.ids.new_id() if execution_id is None else require_execution_id(execution_id, "execution_id")
        existing = self._existing(eid, name, self.journal.get_execution(eid))
        if existing is not None:
            return existing
        who = principal or self.principal
        started = {
            "flow": name,
            "input": to_jsonable(input),
            "principal": {"name": who.name, "scopes": sorted(who.scopes)},
            "queued": True,
        }
        events = [
            Event(eid, 1, EventKind.EXECUTION_STARTED, None, self.clock.now(), with_format(started, self.event_format))
        ]
        self.journal.append(events)
        self.observers.notify_events(events)
        return ExecutionResult(execution_id=eid, status=QUEUED_STATUS)

    async def resume(self, execution_id: str, gate_id: str, payload: Any = None) -> ExecutionResult:
        """Resolve an open gate with ``payload`` and, once no gate is left open, run the body on.

        The same as ``answer`` then ``proceed``, under the execution's lock.

        Raises:
            ResumeValidationError: the payload fails the gate's schema (nothing recorded).
            UsageError: unknown execution or gate, a gate already resolved, or an execution that
                is not suspended (nothing recorded).
        """
        async with self.driver.lock(execution_id):
            return await self.driver.proceed(self.answer(execution_id, gate_id, payload))

    def submitted(self, execution_id: str) -> bool:
        """True when the execution was submitted for the workers (``submit``): a worker drives it,
        and an answer to its gates is only recorded here (``answer(..., drive_here=False)``)."""
        events = self.journal.read(execution_id)
        return bool(events) and events[0].data.get("queued") is True

    def answer(self, execution_id: str, gate_id: str, payload: Any = None, *, drive_here: bool = True) -> GateAnswer:
        """Check ``payload`` against an open gate and record it (``gate_resolved``, and
        ``execution_resumed`` when it was the last open gate); nothing runs. ``proceed`` runs on.

        Synchronous, so a wrong answer raises at the call site: the one place a gate's answer is
        checked. When this resumes the execution, it counts as running in this process
        (``is_active``) until ``proceed`` has run it on: call ``proceed`` next.

        ``drive_here=False`` (an answer to a submitted run, from a notebook): the answer is recorded
        and nothing is claimed; the resumed execution is ``running`` without a lease, and a worker,
        woken by the append's NOTIFY, drives it on (``loom_nb.worker``). Do not call ``proceed``.

        Raises:
            ResumeValidationError: the payload fails the gate's schema (nothing recorded).
            UsageError: unknown execution or gate, a gate already resolved, or an execution that
                is not suspended, or a ``ChildExecution`` gate (answered when its child
                settles: answer the child's gates) (nothing recorded).
        """
        h = self._known(execution_id)
        return record_answer(self, h, gate_id, payload, drive_here=drive_here, active=self.driver.active)

    async def proceed(self, answer: GateAnswer) -> ExecutionResult:
        """Run the body on after ``answer`` (from the history it holds: no read), or, when gates
        are still open, return the suspended result with the remaining gates."""
        async with self.driver.lock(answer.execution_id):
            return await self.driver.proceed(answer)

    async def recover(self, *, execution_ids: Iterable[str] | None = None) -> list[ExecutionResult]:
        """Run on every execution a crash left ``running`` (not those this process is running).

        With ``execution_ids``, only those of them (``Agent.map`` drives each item of a batch on its
        own this way); an id that is not ``running`` in the journal, or that this process is running,
        is left alone and not in the results.

        A step cut in flight is re-invoked when its effect is idempotent (same idempotency key);
        otherwise it is recorded in doubt and the execution parks on an ``InDoubt`` gate.
        An execution that cannot be driven (its flow or effect is not registered, its code changed,
        a bad row in its events, anything else its re-run raises) is returned with status
        ``running`` and the error, and logged (it stays running; the executions after it are still
        recovered). A ``JournalWriteError`` is not isolated: the journal itself is failing, so every
        other execution would fail the same way; recovery stops and it propagates (what each
        execution recorded so far stays; ``recover()`` again once the journal is writable).
        """
        return await recover_executions(self, self.driver, execution_ids)

    async def cancel(self, execution_id: str, reason: str | None = None) -> ExecutionResult:
        """Cancel an execution: it is recorded ``cancelled`` (``execution_cancelled``) and never goes on.

        A run this process is driving is stopped at its next ``await`` (its task is cancelled); a
        suspended run, or one a crash left running, is recorded at once. A step cut in flight is
        recorded in doubt when its effect is not idempotent (it may have taken effect), else failed
        with ``RunCancelledError``. Cancelling a cancelled execution returns it as it is.

        Raises:
            UsageError: unknown execution, or one that already completed or failed.
        """
        h = self._known(execution_id)
        if h.status == "cancelled":
            return self.result(execution_id)
        if h.status in TERMINAL_STATUSES:
            raise UsageError(f"execution {execution_id!r} already {h.status}; there is nothing to cancel")
        self.stops.drop(execution_id)  # a cancel now supersedes a stop asked for at a boundary
        result = await self._cancel_one(execution_id, reason)
        # Cancel propagates to the children it waited for (and theirs).
        for _, cid in child_gates(self.history(execution_id)):
            child = self.journal.get_execution(cid)
            if child is not None and child.status not in TERMINAL_STATUSES:
                await self.cancel(cid, reason or f"its parent {execution_id!r} was cancelled")
        return result

    async def _cancel_one(self, execution_id: str, reason: str | None) -> ExecutionResult:
        self.cancels.ask(execution_id, reason)
        # The children it drives in this task (and theirs) stop with it: recorded cancelled, not left running.
        children = self.driver.children
        driving = sorted(children.get(execution_id, ()))
        while driving:
            child = driving.pop()
            self.cancels.ask_unless_asked(child, reason or f"its parent {execution_id!r} was cancelled")
            driving.extend(sorted(children.get(child, ())))
        task = self.driver.tasks.get(execution_id)
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel(f"execution {execution_id} cancelled")
        while True:
            async with self.driver.lock(execution_id):
                if not self.cancels.asked(execution_id):  # the driving task recorded it
                    return self.result(execution_id)
                if execution_id not in self.driver.active:  # nothing drives it here: record the cancel here
                    return self.cancels.record_elsewhere(execution_id)
            # An answer resumed it and its driving has not begun: that driving records the cancel.
            await asyncio.sleep(0.005)

    async def fork(self, execution_id: str, at_step: str, *, new_execution_id: str | None = None) -> ExecutionResult:
        """Start a new execution that is served ``execution_id``'s recorded prefix up to (not
        including) ``at_step``, then runs live from there: time travel without re-running the prefix.

        Re-register changed effects or flow code first to explore another path. The fork's
        ``execution_started`` records its lineage (``forked_from``, ``at_step``).

        Raises:
            UsageError: unknown execution, or ``at_step`` is not a step, gate, decision or value of it.
        """
        h = self._known(execution_id)
        cut = fork_cut(h, at_step)
        eid = (
            self.ids.new_id()
            if new_execution_id is None
            else require_execution_id(new_execution_id, "new_execution_id")
        )
        async with self.driver.lock(eid):
            if self.journal.get_execution(eid) is not None:
                raise UsageError(f"execution {eid!r} already exists: pick another new_execution_id")
            events = forked_events(h, cut, at_step, eid, self.clock.now())
            self.journal.append(events)
            self.observers.notify_events(events)
            return await self.driver.drive(History.of(eid, events))

    async def replay(self, execution_id: str) -> ReplayReport:
        """Re-run the body purely from the log (no effect runs, nothing is written) and report
        whether it reproduces the recorded run."""
        return await replay_history(self, self._known(execution_id))

    async def check(self, execution_ids: Sequence[str] | None = None) -> CheckReport:
        """Replay every running or suspended execution (or those named) against the code now loaded,
        before anything resumes, and report which would diverge, at which step, with the fix.

        Nothing runs and nothing is written. See ``loom_nb.kernel.check``.
        """
        return await check_executions(self, execution_ids)

    # -- sync wrappers ----------------------------------------------------------------------------
    @staticmethod
    def _sync(coro: Coroutine[Any, Any, T], name: str) -> T:
        return run_sync(coro, sync_name=f"{name}_sync", await_hint=f"await runtime.{name}(...)")

    def start_sync(self, flow: FlowFn | str, input: Any = None, **kwargs: Any) -> ExecutionResult:
        """``start`` for scripts without an event loop."""
        return self._sync(self.start(flow, input, **kwargs), "start")

    def resume_sync(self, execution_id: str, gate_id: str, payload: Any = None) -> ExecutionResult:
        """``resume`` for scripts without an event loop."""
        return self._sync(self.resume(execution_id, gate_id, payload), "resume")

    def cancel_sync(self, execution_id: str, reason: str | None = None) -> ExecutionResult:
        """``cancel`` for scripts without an event loop."""
        return self._sync(self.cancel(execution_id, reason), "cancel")

    def recover_sync(self) -> list[ExecutionResult]:
        """``recover`` for scripts without an event loop."""
        return self._sync(self.recover(), "recover")

    def replay_sync(self, execution_id: str) -> ReplayReport:
        """``replay`` for scripts without an event loop."""
        return self._sync(self.replay(execution_id), "replay")

    def check_sync(self, execution_ids: Sequence[str] | None = None) -> CheckReport:
        """``check`` for scripts without an event loop."""
        return self._sync(self.check(execution_ids), "check")

    def executions(self, status: str | None = None) -> Iterable[str]:
        """Execution ids in the journal (optionally of one status)."""
        return [r.execution_id for r in self.journal.list_executions(status)]
