"""``Run``: the handle on one agent execution (its ``Gate`` handles live in ``agent/gate.py``).

``Agent.start`` / ``attach`` / ``submit`` make a ``Run``; a ``Gate`` approves, refuses or resolves one
of its gates. In a notebook a click's answer is checked and recorded at once and the run is
scheduled on; in a script the resume runs synchronously (``loom_nb.kernel.async_bridge``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Generic, cast

from loom_nb.agent.config import (
    AgentResult,
    Out,
)
from loom_nb.agent.follow import follow_journal, log_unexpected
from loom_nb.agent.gate import Gate, carry_along, child_agent, live_ancestors
from loom_nb.agent.output import output_text
from loom_nb.agent.stalls import forget_stalled, note_stalled
from loom_nb.errors import JournalError, LoomError, UsageError, WaitInterrupted
from loom_nb.journal.events import TERMINAL_STATUSES
from loom_nb.kernel.async_bridge import in_running_loop, run_or_schedule
from loom_nb.kernel.engine import ExecutionResult
from loom_nb.kernel.gates import OpenGate
from loom_nb.runtime import Runtime

if TYPE_CHECKING:  # the agent makes runs; a run only names its agent
    from loom_nb.agent.agent import Agent


#: Given what makes the coroutine that drives a run (a start, a recovery, a resume), returns a
#: coroutine that waits for a slot first and only then makes and awaits it: how ``Agent.map`` bounds
#: every run of a batch by its concurrency, answers included.
Limit = Callable[[Callable[[], Coroutine[Any, Any, ExecutionResult]]], Coroutine[Any, Any, ExecutionResult]]

#: What ``Run.wait(until=...)`` accepts besides a status: ``settled`` (completed, failed or
#: cancelled) and ``paused`` (settled, or suspended at gates).
WAIT_UNTIL: dict[str, frozenset[str]] = {
    "settled": TERMINAL_STATUSES,
    "paused": TERMINAL_STATUSES | {"suspended"},
}


#: How often a waiting ``Run.wait`` wakes the event loop (so an interrupt lands within this time).
WAKE_SECONDS = 0.25


class Run(Generic[Out]):
    """A handle on one agent execution: status, open gates, result; awaitable.

    ``Run[Out]``: ``result.output`` (and ``await run``) is the agent's ``Out``.

    Attributes:
        id: The execution id.
        runtime: The runtime it runs on.
        agent: The agent (None when attached without one).
    """

    def __init__(self, runtime: Runtime, execution_id: str, *, agent: Agent[Any, Out] | None = None) -> None:
        self.id = execution_id
        self.runtime = runtime
        self.agent = agent
        self._state: ExecutionResult | None = None
        self._error: BaseException | None = None
        self._task: asyncio.Future[ExecutionResult] | None = None
        self._gates: dict[tuple[str, str], Gate] = {}
        self._changed: asyncio.Event | None = None
        self._listeners: list[Callable[[Run], None]] = []
        #: Bounds the driving of this run (set by ``Agent.map``: the batch's concurrency); every
        #: resume waits for a slot too. None: unbounded.
        self.limit: Limit | None = None
        #: The last queued answer (given while the run moved) that the engine refused when its turn
        #: came; nothing was recorded and the run did not change. Answers given to a run that waits
        #: at its gates are refused at the call site instead.
        self.last_error: LoomError | None = None
        self._refused: LoomError | None = None
        self._follower: asyncio.Future[None] | None = None
        self._submitted: bool | None = None
        #: True while ``_error`` is a journal error that stopped this process's driving and the
        #: journal says the run is ``running`` (nothing of the failure was recorded).
        self._stalled = False

    def agent_of(self, execution_id: str) -> Agent[Any] | None:
        """The agent of ``execution_id``, this run or one of its (nested) sub-agents' child
        executions: at each level the agent behind the ``as_tool`` tool whose flow the child runs
        (else the agent registered for that flow). None when unknown (attached without an agent)."""
        agent: Agent[Any] | None = self.agent
        if execution_id == self.id:
            return agent
        if not execution_id.startswith(self.id + "/"):
            return None
        at = self.id
        for step in execution_id[len(self.id) + 1 :].split("/"):
            at = f"{at}/{step}"
            record = self.runtime.journal.get_execution(at)
            if record is None:
                return None
            found = child_agent(agent, record.flow) if agent is not None else None
            agent = found if found is not None else self.runtime.agents.get(record.flow)
        return agent

    @classmethod
    def of(cls, runtime: Runtime, execution_id: str, *, agent: Agent[Any] | None = None) -> Run[Any]:
        """This kernel's one ``Run`` of ``execution_id`` on ``runtime``: the live one (``start``,
        ``attach``, ``%loom pending`` and the cards all hand out this object, so they follow one
        state), else a new one, read from the journal when the execution exists.

        ``agent``, when given, becomes the run's agent (a re-run cell's new ``Agent`` replaces the old).
        """
        run: Run[Any] | None = runtime.runs.get(execution_id)
        if run is None:
            run = cls(runtime, execution_id, agent=agent)
            runtime.runs[execution_id] = run
            if runtime.journal.get_execution(execution_id) is not None:
                run.refresh()
        elif agent is not None:
            run.agent = agent
        return run

    @classmethod
    def attach(cls, runtime: Runtime, execution_id: str, *, agent: Agent[Any] | None = None) -> Run[Any]:
        """This kernel's ``Run`` of an existing execution, read from the journal (``Run.of``).

        Raises:
            UsageError: no such execution in the journal.
        """
        if runtime.journal.get_execution(execution_id) is None:
            runtime.result(execution_id)  # raises the UsageError that names the journal
        run = cls.of(runtime, execution_id, agent=agent)
        run.refresh()
        return run

    def refresh(self) -> None:
        """Read where the execution stands from the journal (its status, gates, output or error).

        Unless the run is moving in this kernel, the journal is the truth: an error its last driving
        raised without recording it (a crash, a failed write) is forgotten once the journal moved on.
        """
        state = self.runtime.result(self.id)
        if self._task is None and self._error is not None and state.status != "running":
            self._error = None
            if self._stalled:
                self._stalled = False
                forget_stalled(self.runtime, self.id)
        self._set_state(state)

    @property
    def submitted(self) -> bool:
        """True for a run submitted for the workers (``Agent.submit``): a worker drives it, ``wait``
        follows it from the journal, and an answer to its gates is only recorded here."""
        if self._submitted is None:
            if self.runtime.journal.get_execution(self.id) is None:
                return False  # not recorded yet: ask again later
            self._submitted = self.runtime.submitted(self.id)
        return self._submitted

    @property
    def moving(self) -> bool:
        """True while this process drives the run (a task of this kernel)."""
        self._absorb()
        return self._task is not None

    # -- state ----------------------------------------------------------------------------------
    def _absorb(self) -> None:
        # A finished task's done-callbacks run a loop iteration later; take its outcome now.
        task = self._task
        if task is not None and task.done():
            self._finished(task)

    @property
    def status(self) -> str:
        """``running``, ``suspended``, ``completed``, ``failed`` or ``cancelled``; ``queued``: submitted
        (``submit``) and not yet taken by a worker."""
        self._absorb()
        if self._task is not None:
            return "running"
        if self._error is not None and not self._stalled:
            return "failed"
        return self._state.status if self._state else "running"

    @property
    def gates(self) -> list[Gate]:
        """The open gates: a suspended run's, or the questions a call of a moving run waits on (an
        MCP elicitation: ``kernel/questions.py``); else empty."""
        if self.status == "running":  # a sub-agent's call's questions too (answered in the child)
            return [self._gate(g) for g in self.runtime.questions.open(self.id, children=True)]
        if self.status != "suspended" or self._state is None:
            return []
        return [self._gate(g) for g in self._state.gates]

    def _gate(self, g: OpenGate) -> Gate:
        gate = self._gates.get((g.execution_id, g.gate_id))
        if gate is None:
            gate = self._gates[(g.execution_id, g.gate_id)] = Gate(self, g)
        return gate

    @property
    def result(self) -> AgentResult[Out] | None:
        """The result once completed, else None (``output`` validated as the agent's output type)."""
        if self.status == "completed" and self._state is not None:
            result: AgentResult[Any] = AgentResult.model_validate(self._state.output)
            spec = self.agent.output if self.agent is not None else None
            if spec is not None and result.stop_reason == "end_turn":
                result = result.model_copy(update={"output": spec.load(result.output)})
            return cast("AgentResult[Out]", result)
        return None

    def exception(self) -> BaseException | None:
        """The failure once failed (``RunCancelledError`` once cancelled), else None; for a run
        whose driving here stopped on a journal error while the journal says ``running`` (a failed
        commit: ``runtime.recover()`` finishes it), that error."""
        if self._error is not None:
            return self._error
        state = self._state
        return state.exception() if state is not None and state.status in ("failed", "cancelled") else None

    def on_change(self, listener: Callable[[Run], None]) -> Callable[[], None]:
        """Call ``listener(run)`` whenever the status or the open gates change; returns a function
        that stops it (calling it twice is harmless)."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _set_state(self, state: ExecutionResult) -> None:
        self._state = state
        self._signal()

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()
        for listener in list(self._listeners):
            listener(self)

    def __repr__(self) -> str:
        extra = ""
        if self.status == "suspended":
            extra = f", waiting on {len(self.gates)} gate(s)"
        elif self.status == "completed" and self.result is not None:
            output = self.result.output
            extra = f", output={output[:60]!r}" if isinstance(output, str) else f", output={output_text(output)[:80]}"
        elif self.status in ("failed", "cancelled"):
            exc = self.exception()
            extra = f", error={type(exc).__name__}: {exc}" if exc else ""
        elif self._stalled and self._error is not None:
            extra = f", stopped here by {type(self._error).__name__} (runtime.recover() finishes it)"
        return f"<Run {self.id} {self.status}{extra}>"

    # -- driving --------------------------------------------------------------------------------
    def drive(self, coro: Coroutine[Any, Any, ExecutionResult]) -> Any:
        """Drive the run with ``coro`` (a runtime call that returns the execution's result): a task on
        the running loop (returned at once), or run to completion in a script (its result returned)."""
        try:
            outcome = run_or_schedule(coro)
        except BaseException as exc:
            self._failed(exc)
            raise
        if isinstance(outcome, asyncio.Future):
            self._task = outcome
            self._error = None
            if self._stalled:
                self._stalled = False
                forget_stalled(self.runtime, self.id)
            outcome.add_done_callback(self._finished)
            self._signal()
            return outcome
        self._set_state(outcome)
        return outcome

    def _finished(self, task: asyncio.Future[ExecutionResult]) -> None:
        if task is not self._task:
            return  # a newer task drives the run now, or _absorb took this outcome already
        self._task = None
        if task.cancelled():
            self._error = asyncio.CancelledError(f"run {self.id} was cancelled")
            self._signal()
            return
        exc = task.exception()
        if exc is not None and exc is self._refused:
            # A queued answer the engine refused when its turn came: nothing was recorded, and the
            # run is where the previous task left it (the answer's caller sees the error).
            self.last_error, self._refused = exc, None
            self._set_state(self.runtime.result(self.id))
        elif exc is not None:
            self._failed(exc)
        else:
            self._set_state(task.result())

    def _failed(self, exc: BaseException) -> None:
        """The driving here raised ``exc``. A journal error recorded nothing of the failure: when
        the journal says ``running``, so does this run (with ``exc`` at hand), until recovered."""
        self._error = exc
        if isinstance(exc, JournalError):
            try:
                state = self.runtime.result(self.id)
            except Exception:  # not journaled at all, or unreadable now: failed here
                state = None
            if state is not None and state.status == "running":
                self._state, self._stalled = state, True
                note_stalled(self.runtime, self.id, exc)
        self._signal()

    def resume(self, gate_id: str, payload: Any) -> Any:
        """Answer the gate ``gate_id`` with ``payload`` and let the run go on (``Gate.resolve`` calls
        this). A wrong answer raises here and the run stays suspended; an answer given while the run
        still moves is queued and checked in its turn. A question a call of this run waits on is
        answered at once (``answer_question``)."""
        if self.runtime.questions.get(self.id, gate_id) is not None:
            return self.answer_question(self.id, gate_id, payload)
        if self.status != "running" and self.submitted:
            # A worker drives this run: record the answer (checked here) and let the NOTIFY of its
            # commit wake a worker, which runs it on; ``follow`` / ``wait`` see it move.
            answer = self.runtime.answer(self.id, gate_id, payload, drive_here=False)
            self.refresh()
            return answer
        if self.status != "running":
            # The engine checks and records the answer here, so a wrong one raises at the call site
            # and the run stays suspended; only the driving on is scheduled.
            answer = self.runtime.answer(self.id, gate_id, payload)
            outcome = self.drive(self._bounded(lambda: self.runtime.proceed(answer)))
            # A sub-agent's run (``<parent>/<step>``): once it settles the engine runs its parent on;
            # the parent's live Run (and its parent's...) follows.
            carry_along(self.runtime, live_ancestors(self.runtime, self.id), outcome)
            return outcome
        previous = self._task
        if previous is None or not in_running_loop():
            raise UsageError(f"run {self.id} is still running; wait for it to reach the gate before resuming")

        async def in_turn() -> ExecutionResult:
            # Answers given while the run moves (two gates answered in one cell) queue up in order.
            await asyncio.wait({previous})
            try:
                answer = self.runtime.answer(self.id, gate_id, payload)
            except LoomError as exc:
                self._refused = exc
                raise
            return await self._bounded(lambda: self.runtime.proceed(answer))

        return self.drive(in_turn())

    def answer_question(self, execution_id: str, gate_id: str, payload: Any) -> Any:
        """Answer a question a call of this run (or of one of its sub-agents, ``execution_id``)
        waits on (``kernel/questions.py``): checked here, then handed to the call, which records it
        and goes on. Returns the run's driving (await it: the run's next pause), or its result."""
        self.runtime.answer(execution_id, gate_id, payload)
        return self._task if self._task is not None else self.runtime.result(self.id)

    def _bounded(
        self, make: Callable[[], Coroutine[Any, Any, ExecutionResult]]
    ) -> Coroutine[Any, Any, ExecutionResult]:
        return make() if self.limit is None else self.limit(make)

    def cancel(self, reason: str | None = None, *, when: str = "now") -> Any:
        """Stop the run for good: it is recorded ``cancelled`` and never goes on (``Engine.cancel``).

        ``when="now"`` cuts it at once: a step cut in flight is recorded in doubt when its tool is not
        idempotent. ``when="after_turn"`` lets the turn under way finish (its model call and tool
        calls, approvals included) and records the cancel at the next turn boundary, with nothing in
        doubt (``Engine.stop_at_boundary``); it returns None at once, and the request is held by this
        process (a kernel that dies first forgets it). In a notebook ``"now"`` returns a task at once
        (await it to wait until the cancel is recorded); in a script it returns the run's new
        ``ExecutionResult``. Awaiting the run then raises ``RunCancelledError``.

        Raises:
            UsageError: the run already completed or failed, an unknown ``when``, or (``after_turn``)
                a run another process drives.
        """
        if when not in ("now", "after_turn"):
            raise UsageError(f"Run.cancel(when={when!r}): use 'now' or 'after_turn'")
        status = self.status
        if status in TERMINAL_STATUSES and status != "cancelled":
            raise UsageError(f"run {self.id} already {status}; there is nothing to cancel")
        if when == "after_turn":
            if status != "cancelled":
                self.runtime.stop_at_boundary(self.id, reason, starting=self._task is not None)
            return None
        if self._task is None or not in_running_loop():
            return self.drive(self.runtime.cancel(self.id, reason))
        # The task that drives the body records the cancel and settles this run.
        return asyncio.ensure_future(self.runtime.cancel(self.id, reason))

    @property
    def stopping(self) -> bool:
        """True while a stop "after this turn" was asked for and the run has not reached it yet."""
        return self.runtime.stops.asked(self.id)

    async def wait(self, *, until: str = "settled", timeout: float | None = None) -> Run:
        """Wait until the run is ``settled`` (completed, failed or cancelled), ``paused`` (settled or
        suspended at gates), or has the status ``until``; returns the run.

        Works whether the gates were answered by a click, a cell or ``%loom resume`` (a tutorial
        can ``await run.wait(until="paused")`` and branch on ``run.status``).

        Raises:
            UsageError: an unknown ``until``.
            TimeoutError: ``timeout`` seconds passed first (the run goes on).
            WaitInterrupted: the wait was interrupted (Kernel > Interrupt); the run goes on.
        """
        stops = WAIT_UNTIL.get(until)
        if stops is None:
            known = {"running", "suspended", *TERMINAL_STATUSES}
            if until not in known:
                raise UsageError(
                    f"Run.wait(until={until!r}): use 'settled', 'paused' or a status ({', '.join(sorted(known))})"
                )
            stops = frozenset({until, *TERMINAL_STATUSES})
        try:
            if timeout is None:
                await self._wait_for(stops)
            else:
                await asyncio.wait_for(self._wait_for(stops), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"run {self.id} is still {self.status} after {timeout} s (it goes on; wait again, or run.cancel())"
            ) from None
        except asyncio.CancelledError:
            raise WaitInterrupted(
                f"stopped waiting for run {self.id}; the run goes on ({self.status}). "
                f"To stop it: run.cancel() or %loom cancel {self.id}"
            ) from None
        return self

    def follow(self) -> asyncio.Future[None] | None:
        """Follow a run another process drives (a worker), from the shared journal: a task on the
        running loop that sleeps on the journal's ``LISTEN`` channel (no polling) and, at each
        commit of this execution, hands the new events to ``runtime.observers`` (the live view) and
        reads the run's state again (``on_change`` listeners, ``wait``). It ends once the run is
        settled; a dropped connection is opened again and the journal read again
        (``loom_nb.agent.follow``). None when the journal is not shared (PostgreSQL) or no loop
        runs; the one task when already following. ``wait`` follows a submitted run by itself (one LISTEN connection
        per followed run: call it for another run another process drives)."""
        journal: Any = self.runtime.journal
        if not hasattr(journal, "async_listener") or not in_running_loop():
            return None
        if self._follower is None or self._follower.done():
            self._follower = asyncio.ensure_future(self._follow(journal))
            self._follower.add_done_callback(log_unexpected)
        return self._follower

    async def _follow(self, journal: Any) -> None:
        await follow_journal(self, journal)

    async def _wait_for(self, stops: frozenset[str]) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        if self.status not in stops and not self.moving and self.submitted:
            self.follow()  # a worker drives it: be woken by the journal
        while self.status not in stops and not self._stalled:
            self._changed.clear()
            if self._follower is not None and self._follower.done() and not self.moving:
                self.follow()  # a follower that stopped on an error it did not expect: follow again
            # Wake up every WAKE_SECONDS even when nothing changed: ipykernel turns Kernel > Interrupt
            # into a cancel of the cell that is only seen once the event loop wakes up, so a quiet run
            # would otherwise leave the interrupt pending until its next event.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), WAKE_SECONDS)

    def __await__(self) -> Generator[Any, None, AgentResult[Out]]:
        return self._result().__await__()

    async def _result(self) -> AgentResult[Out]:
        await self.wait()
        exc = self.exception()
        if exc is not None:
            raise exc
        result = self.result
        assert result is not None
        return result
