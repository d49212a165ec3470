"""``ContextCore``: the state of one execution's context and how what its body does reaches the
journal: events are staged (``stage``) and committed together (``commit``, group-committed through
the engine's ``JournalWriter``), and the recorded prefix is served before anything runs live.

The steps, gates, decisions, values and streams of ``ExecutionContext`` build on it; the engine it
runs under is the ``ExecutionHost`` it needs (a ``Protocol``: this module never imports the engine).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import fields, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, cast

from pydantic import TypeAdapter

from loom_nb.errors import JournalWriteError, ReplayDivergedError, UsageError
from loom_nb.journal.events import ContentBlob, Event, EventKind
from loom_nb.journal.store import JournalStore
from loom_nb.kernel.effect_registry import EffectInvoker, Principal
from loom_nb.kernel.flow_context import FlowRuntime
from loom_nb.kernel.flows import FlowRegistry
from loom_nb.kernel.history import GateRecord, History
from loom_nb.kernel.journal_writer import JournalWriter
from loom_nb.kernel.observers import Observers
from loom_nb.kernel.results import ExecutionResult, ReplayReport
from loom_nb.kernel.sources import Clock, IdSource, RandomSource
from loom_nb.kernel.stream_commits import StreamCommits

if TYPE_CHECKING:
    from loom_nb.kernel.live_questions import LiveQuestions

#: Stream chunks staged (or held for one step) that start a commit in the background.
STREAM_FLUSH_EVERY = 64
#: Step outcomes: once one of these is committed, a recovered run has made progress.
_OUTCOMES = frozenset({EventKind.STEP_COMPLETED, EventKind.STEP_FAILED})


class ExecutionHost(Protocol):
    """What an execution's context needs of the engine running it (``Engine`` is one)."""

    @property
    def clock(self) -> Clock:
        """Time of the events, ``ctx.now()`` and the backoff sleeps."""
        ...

    @property
    def ids(self) -> IdSource:
        """Source of ``ctx.uuid()``."""
        ...

    @property
    def random(self) -> RandomSource:
        """Source of ``ctx.random()``."""
        ...

    @property
    def effects(self) -> EffectInvoker:
        """The effects a step runs."""
        ...

    @property
    def flows(self) -> FlowRegistry:
        """Where a child execution's flow is found."""
        ...

    @property
    def journal(self) -> JournalStore:
        """Where content and child executions are read."""
        ...

    @property
    def observers(self) -> Observers:
        """Who is shown committed events and streamed deltas."""
        ...

    @property
    def writer(self) -> JournalWriter:
        """The group commit the context's commits go through."""
        ...

    @property
    def stream_policy(self) -> StreamCommits:
        """When the execution's stream chunks are committed."""
        ...

    @property
    def deps(self) -> dict[str, Any]:
        """What each execution hands its effects (``EffectContext.deps``), by execution id."""
        ...

    @property
    def questions(self) -> LiveQuestions:
        """The questions calls of this process wait on (``kernel/questions.py``)."""
        ...

    def check_lease(self, execution_id: str) -> None:
        """Refuse a commit of an execution whose lease this process lost."""
        ...

    def confirm_lease(self, execution_id: str) -> None:
        """Check at the database that this process still holds the execution's lease."""
        ...

    def cancelling(self, execution_id: str) -> bool:
        """True while a cancel of the execution was asked for and not yet recorded."""
        ...

    def take_boundary_stop(self, execution_id: str) -> bool:
        """At a boundary of the body: True when a stop there was asked for (``Engine.stop_at_boundary``)."""
        ...

    def history(self, execution_id: str) -> History:
        """The indexed events of one execution."""
        ...

    def replay(self, execution_id: str) -> Awaitable[ReplayReport]:
        """Re-run an execution's body purely from its log."""
        ...

    def run_child(
        self, child_id: str, flow: str, input: Any, *, parent: dict[str, Any], principal: Principal
    ) -> Awaitable[ExecutionResult]:
        """Start, drive on or read the child execution ``child_id`` of ``parent``."""
        ...


def convert(value: Any, returns: Any) -> Any:
    """``value`` validated as the type ``returns``, or as it is when ``returns`` is None."""
    return value if returns is None else TypeAdapter(returns).validate_python(value)


#: The slot setters of ``Event``'s fields, in order (``new_event``).
_SET_EXECUTION_ID, _SET_SEQ, _SET_KIND, _SET_STEP_ID, _SET_AT, _SET_DATA, _SET_DATA_JSON = (
    getattr(Event, f.name).__set__ for f in fields(Event)
)


def new_event(
    execution_id: str, seq: int, kind: str, step_id: str | None, at: float, data: dict[str, Any], data_json: str | None
) -> Event:
    """``Event(execution_id, seq, kind, step_id, at, data, data_json)``, for half the cost: the
    generated ``__init__`` of a frozen dataclass stores each field through a call of
    ``object.__setattr__``; this stores it through the field's slot directly (what that call ends
    in). Exact: ``Event`` has no ``__post_init__`` and every field is given (a test checks the
    setters cover every field, in order, and that the instance equals the one ``Event`` builds)."""
    event = object.__new__(Event)
    _SET_EXECUTION_ID(event, execution_id)
    _SET_SEQ(event, seq)
    _SET_KIND(event, kind)
    _SET_STEP_ID(event, step_id)
    _SET_AT(event, at)
    _SET_DATA(event, data)
    _SET_DATA_JSON(event, data_json)
    return event


class _Outcome(asyncio.Future[None]):
    """The outcome of one commit (``ContextCore._submit``): a future that no cancel of a task
    awaiting it cancels. The write it stands for goes on whatever happens to the task; a task
    cancelled while it awaits one is woken when the write settles, and the cancel passes then
    (``Task.cancel`` marks the task to cancel itself at its next step when the future it waits on
    refuses). What ``asyncio.shield`` plus waiting for the outcome after the cancel gave, without
    a second future and an extra turn of the loop per commit."""

    def cancel(self, msg: Any = None) -> bool:
        """Refuse: only the writer settles a commit's outcome."""
        return False


class ContextCore:
    """The state of one execution's context and its staging, commits and serving of the record.

    Attributes:
        execution_id: The execution this body runs.
        principal: Who it acts for.
    """

    def __init__(
        self, runtime: ExecutionHost, history: History, *, pure: bool = False, recovering: bool = False
    ) -> None:
        self._rt = runtime
        self._h = history
        self.execution_id = history.execution_id
        p = history.principal or {}
        self.principal = Principal.of(str(p.get("name", "anonymous")), p.get("scopes", ()))
        self._pure = pure
        self._seq = history.last_seq
        #: The time of the last event staged (a held stream chunk shown to observers carries it).
        self._last_at = 0.0
        self._staged: list[Event] = []
        self._blobs: list[ContentBlob] = []
        #: The commit of this execution in flight, if any (``_submit``).
        self._inflight: _Outcome | None = None
        #: An outcome is staged that must be committed before the next effect runs (``_urge``).
        self._urgent = False
        #: The error of a commit made in the background (``_kick``), raised by the next ``commit``.
        self._failed: Exception | None = None
        #: Seconds a cut chunk waits at most before its commit starts (``StreamCommits.within``).
        self._within = runtime.stream_policy.within
        #: Staged stream chunks are due: the next ``_kick`` commits them (``_chunks_now``).
        self._chunks_due = False
        #: The timer that makes the staged chunks due (``_chunk_staged``), while one is armed.
        self._chunk_timer: asyncio.TimerHandle | None = None
        #: Commit every step's start before it runs, until a step outcome is committed: a fresh
        #: execution (so its first step finds it in the journal) and a run ``recover()`` drives (so
        #: a step that kills its process every time counts attempts and meets its limit).
        self._careful = history.last_seq == 0 or recovering
        self._auto = 0
        self._values = 0
        self._claimed: set[str] = set()
        self._warned: set[str] = set(history.warnings)
        self._to_serve = history.served_count()
        #: The execution's event format (``journal.event_format``).
        self._format = history.format
        #: Format 2: stream chunks held per step in flight (dropped when it completes).
        self._held: dict[str, list[tuple[str, str]]] = {}
        #: Format 2: the latest outputs of steps completed live (what an input reference may name).
        self._recent: dict[str, Any] = {}
        #: Format 2: the steps completed live (their outputs hold the text streamed for them).
        self._done: set[str] = set()
        #: Steps the record holds as started but unsettled (cut in flight); the body re-reaches them.
        self._in_flight = sum(1 for s in history.steps.values() if not s.settled)
        self._new_gates: dict[str, GateRecord] = {}
        #: The question gates each ``(step, attempt)`` was given the answer of (``InCallQuestions``).
        self.question_uses: dict[tuple[str, int], set[str]] = {}
        self._patches: dict[str, bool] = {}
        self.waiting: list[str] = []
        #: ``(kind, id)`` of every step, gate, decision and value the body asked for, in order.
        self.trace: list[tuple[str, str]] = []
        #: A pure replay's replays of the child executions the body reached (``child``), in order.
        self.child_replays: list[ReplayReport] = []

    # -- bookkeeping ----------------------------------------------------------------------------
    @property
    def runtime(self) -> FlowRuntime:
        """The runtime running this execution."""
        return cast("FlowRuntime", self._rt)  # the engine that made this context (FlowContext.runtime)

    @property
    def event_format(self) -> int:
        """The execution's event format (``journal.event_format``): what its journaled shapes are."""
        return self._format

    @property
    def replaying(self) -> bool:
        """True while the body is still being served recorded outcomes."""
        return self._pure or self._to_serve > 0 or self._in_flight > 0

    async def boundary(self) -> None:
        """A point where nothing of this body is in flight (the agent loop calls it between turns):
        a stop asked for here (``Engine.stop_at_boundary``) is taken, and the run is recorded
        ``cancelled`` with nothing in doubt. A no-op while recorded outcomes are still served.

        Raises:
            asyncio.CancelledError: a stop was asked for; the engine records the cancel.
        """
        if self.replaying or not self._rt.take_boundary_stop(self.execution_id):
            return
        await self.commit()
        raise asyncio.CancelledError(f"execution {self.execution_id} stopped at a boundary")

    @property
    def unserved(self) -> int:
        """How many recorded outcomes the body has not been served yet (engine-facing: a replay
        report counts what was served)."""
        return max(self._to_serve, 0)

    def stage(self, kind: str, step_id: str | None, data: dict[str, Any], data_json: str | None = None) -> Event:
        """Stage one event for the next ``commit`` and return it (engine-facing: the engine stages
        the execution's lifecycle events; flow bodies use ``execute``, ``gate``, ``warn``...).
        ``data_json``: ``canonical_json(data)`` when the caller has it (the store writes it as is)."""
        self._seq += 1
        self._last_at = at = self._rt.clock.now()
        event = new_event(self.execution_id, self._seq, kind, step_id, at, data, data_json)
        self._staged.append(event)
        return event

    async def commit(self) -> None:
        """Commit everything staged in one transaction (through the runtime's ``JournalWriter``,
        shared with the other executions that commit meanwhile) and notify the observers (a no-op
        when nothing is staged, and always in a pure replay). Engine-facing, like ``stage``.

        When the journal raises (``JournalWriteError``), what was staged stays staged, so a later
        commit writes it with no gap in ``seq``; the engine stops the run. A commit made in the
        background (``_urge``) that failed is raised here.
        """
        if self._pure:
            return
        if self._inflight is not None:  # (the test first: most commits find none, and skip a coroutine)
            await self._idle()
        if self._failed is not None:
            # A background commit failed: the run stops here, as it would have there (what it
            # staged is still staged; the engine's last commit tries it once more).
            failed, self._failed = self._failed, None
            raise failed
        if not self._staged and not self._blobs:
            return
        self._rt.check_lease(self.execution_id)  # a run whose lease was taken over stops before writing
        # The write goes on whatever happens to this task: a cancel of the task while it waits
        # here cannot cancel ``_Outcome``, so the task waits for the write's outcome (nothing staged
        # later is submitted before it) and the cancel passes then, as ``CancelledError`` raised
        # here in place of the outcome (``Task.cancel``: a future that refuses to be cancelled makes
        # the task cancel itself at its next step).
        await self._submit()

    async def _idle(self) -> None:
        """Wait until no commit of this execution is in flight (one at a time, in ``seq`` order)."""
        # An ``_Outcome`` refuses a cancel: a task cancelled here wakes when the write settles and
        # the cancel passes then (no ``asyncio.shield``: a second future and two callbacks per wait).
        while (inflight := self._inflight) is not None:
            with contextlib.suppress(Exception):
                await inflight

    def _submit(self, *, background: bool = False) -> _Outcome:
        """Hand everything staged to the writer (nothing may be in flight); the returned future
        settles once it is committed. ``_settled`` runs inside the writer's flush, before any task
        wakes: on success it notifies the observers; on failure it puts the events back in front
        of what was staged since (and keeps a background commit's error for the next ``commit``)."""
        events, blobs, urgent = self._staged, self._blobs, self._urgent
        self._staged, self._blobs, self._urgent, self._chunks_due = [], [], False, False
        if self._chunk_timer is not None:  # the chunks it waited for go now
            self._chunk_timer.cancel()
            self._chunk_timer = None
        done = _Outcome(loop=asyncio.get_running_loop())
        self._inflight = done
        # A partial, not a closure over these locals (a closure's captured locals are cells).
        self._rt.writer.submit(events, blobs, partial(self._settled, done, events, blobs, urgent, background))
        return done

    def _settled(
        self,
        done: _Outcome,
        events: list[Event],
        blobs: list[ContentBlob],
        urgent: bool,
        background: bool,
        error: BaseException | None,
    ) -> None:
        """The commit ``done`` stands for settled (see ``_submit``)."""
        self._inflight = None
        if error is None:
            if self._careful and any(e.kind in _OUTCOMES for e in events):
                self._careful = False
            observers = self._rt.observers
            if observers.active:  # stream chunks were shown when staged
                observers.notify_events([e for e in events if e.kind != EventKind.STREAM_CHUNK])
            done.set_result(None)
            if self._urgent or self._chunks_due:  # an outcome or due chunks staged meanwhile
                asyncio.get_running_loop().call_soon(self._kick)
        else:
            self._staged, self._blobs = [*events, *self._staged], [*blobs, *self._blobs]
            self._urgent = self._urgent or urgent
            done.set_exception(error)
            if background and isinstance(error, Exception):
                self._failed = error
                done.exception()  # retrieved: the next commit raises it
            # Never written again from here on its own: the run stops at its next commit.

    def _urge(self) -> None:
        """An outcome that must not wait is staged: it is committed before the next effect runs
        (with that step's start when the body goes straight on to a step committed before it runs),
        or as soon as the body yields to the event loop, whichever comes first."""
        if self._pure:
            return
        self._urgent = True
        asyncio.get_running_loop().call_soon(self._kick)

    def _chunk_staged(self) -> None:
        """A stream chunk was staged: it is committed on the loop's next turn (``_within`` 0), else
        within ``_within`` seconds unless a commit takes it first."""
        if self._chunks_due or self._pure:
            return
        if not self._within:
            self._chunks_now()
        elif self._chunk_timer is None:
            self._chunk_timer = asyncio.get_running_loop().call_later(self._within, self._chunks_now)

    def _chunks_now(self) -> None:
        """Make the staged chunks due: a background commit takes them on the loop's next turns,
        with whatever else commits then (group commit), or once the commit in flight settled."""
        self._chunk_timer = None
        if not self._chunks_due:
            self._chunks_due = True
            asyncio.get_running_loop().call_soon(self._kick)

    def _release_due(self, sid: str) -> None:
        """The chunks held for step ``sid`` waited long enough (``LiveAttempt.due``): stage and
        commit them now (the step's later chunks are held again)."""
        if self._held.get(sid):
            self._release_held(sid)
            self._held[sid] = []
            self._chunks_now()

    def _kick(self) -> None:
        """Start a background commit when an outcome waits (``_urge``), stream chunks are due
        (``_chunks_now``) or piled up, unless one is in flight (it kicks again when it settles) or a
        background commit failed."""
        if self._inflight is not None or self._failed is not None or self._pure:
            return
        if self._chunks_due and not self._staged:  # a commit took them already
            self._chunks_due = False
        if self._urgent or self._chunks_due or len(self._staged) >= STREAM_FLUSH_EVERY:
            try:
                self._rt.check_lease(self.execution_id)
            except JournalWriteError as lost:  # the lease was taken over: the next commit raises it
                self._failed = lost
                return
            self._submit(background=True)

    def _claim(self, ident: str) -> None:
        if ident in self._claimed:
            raise UsageError(
                f"the id {ident!r} is used twice in execution {self.execution_id!r}: step, gate and "
                "decision ids must be unique within an execution (give each call its own step_id)"
            )
        self._claimed.add(ident)

    def _served(self) -> None:
        self._to_serve -= 1

    def _diverged(self, what: str) -> ReplayDivergedError:
        return ReplayDivergedError(
            f"replay of execution {self.execution_id!r} reached {what}, which the journal does not hold: "
            "the flow takes a path the recorded run did not. Fork the run or start a new one."
        )

    def recorded(self, ident: str) -> bool:
        """True when the journal holds a step, gate, decision or value with id ``ident`` (a re-run of
        the body is served it): lets a caller check that a rule it applies again agrees with the record."""
        h = self._h
        return ident in h.steps or ident in h.gates or ident in h.decisions or ident in h.values

    def recorded_input(self, step_id: str) -> Any:
        """The journaled input of step ``step_id`` (what its ``record=`` kept), or None when the journal
        holds no such step: lets a body apply again the rule a recorded step was made with (a format
        version the input carries) instead of today's."""
        rec = self._h.steps.get(step_id)
        return None if rec is None else rec.input

    def _release_held(self, sid: str) -> None:
        """Stage the stream chunks held for step ``sid`` (it did not complete, or too many wait)."""
        for channel, text in self._held.pop(sid, ()):
            self.stage(EventKind.STREAM_CHUNK, None, {"channel": channel, "text": text})

    def _unstage(self, event: Event) -> None:
        """Take ``event`` back out of the staged events (numbering the ones staged after it down)."""
        for i, staged in enumerate(self._staged):
            if staged is event:
                del self._staged[i]
                self._staged[i:] = [replace(e, seq=e.seq - 1) for e in self._staged[i:]]
                self._seq -= 1
                return
