"""``ExecutionContext``: everything a flow body does that is not pure goes through it.

A body is re-run from the top on resume and recovery; the context serves every recorded step,
gate, decision and value from the journal and runs live only past the recorded prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from pydantic import BaseModel, TypeAdapter

from loom_nb.errors import (
    ChildExecutionError,
    FlowNotFoundError,
    InDoubtError,
    JournalWriteError,
    NonDeterminismError,
    OutcomeUnknownError,
    ReplayDivergedError,
    RetriesExhaustedError,
    UsageError,
)
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import (
    canonical_json,
    canonical_object,
    digest_bytes,
    digest_value,
    jsonable_with_text,
    to_jsonable,
)
from loom_nb.journal.event_format import FORMAT_1, ref_target, usage_of_output
from loom_nb.journal.events import ContentBlob, Event, EventKind
from loom_nb.kernel.decisions import Decision, Policy, policy_name, propensity_of
from loom_nb.kernel.effect_registry import (
    Durability,
    EffectCall,
    EffectContext,
    EffectSpec,
    Principal,
    frozen_instance,
)
from loom_nb.kernel.errors_codec import error_from_data, error_summary, error_to_data
from loom_nb.kernel.gates import GateRequest, Suspend, resolve_schema, schema_name
from loom_nb.kernel.history import GateRecord, History, StepRecord, in_doubt_attempt

if TYPE_CHECKING:
    from loom_nb.kernel.engine import Engine, ReplayReport
    from loom_nb.kernel.observers import Observers

IN_DOUBT_GATE = step_ids.IN_DOUBT_GATE
_UNSET: Any = object()
_STREAM_FLUSH_EVERY = 64
#: Deltas a ``defer_deltas`` step keeps waiting before it feeds them on: a sink makes at most one
#: chunk per delta, so the held text of a long stream still reaches the journal every
#: ``_STREAM_FLUSH_EVERY`` chunks, at most this many deltas later.
_DELTAS_WAITING = _STREAM_FLUSH_EVERY
#: How many recent live step outputs a context keeps for format 2 input references.
_RECENT_OUTPUTS = 8
#: How many attempts in all an idempotent step without a retry policy (``EffectSpec.retry`` with an
#: ``attempts`` limit) gets across processes before a cut in flight fails it instead of running it again.
DEFAULT_ATTEMPT_LIMIT = 3
#: Step outcomes: once one of these is committed, a recovered run has made progress.
_OUTCOMES = frozenset({EventKind.STEP_COMPLETED, EventKind.STEP_FAILED})


class _LiveAttempt:
    """The state of one step run live that its delta sink and its retry hook
    (``ExecutionContext._on_retry``) share: the attempt being made and the deltas waiting for their
    text to be needed.

    One object with slots and bound methods instead of closures over ``_run_live``'s locals: a
    closure's every captured local is a cell the garbage collector tracks, made at each step."""

    __slots__ = (
        "current",
        "effect_id",
        "execution_id",
        "fenced",
        "first",
        "observers",
        "sid",
        "sink",
        "started",
        "waiting",
    )

    def __init__(
        self,
        execution_id: str,
        sid: str,
        effect_id: str,
        started: dict[str, Any],
        first: bool,
        attempt: int,
        observers: Observers,
    ) -> None:
        self.execution_id = execution_id
        self.sid = sid
        self.effect_id = effect_id
        self.started = started
        self.first = first
        self.current = attempt
        self.observers = observers
        self.sink: Callable[[str], None] | None = None
        #: The deltas held back from ``sink`` (a ``defer_deltas`` step only; else None).
        self.waiting: list[str] | None = None
        #: Each attempt's effect runs only after the lease is confirmed (not idempotent: fenced).
        self.fenced = False

    def feed_waiting(self) -> None:
        """Pass the waiting deltas on to the sink, in order (a step without any: nothing)."""
        waiting = self.waiting
        if waiting:
            texts = waiting.copy()
            waiting.clear()
            sink = self.sink
            assert sink is not None
            for text in texts:
                sink(text)

    def emit_to_observers(self, text: str) -> None:
        """A delta of a step without ``on_delta``: to the execution's observers only."""
        if self.observers.deltas:  # a plain attribute: this runs for every streamed piece
            self.observers.notify_delta(self.execution_id, self.sid, text)

    def emit_to_sink(self, text: str) -> None:
        """A delta to the observers and at once to ``on_delta``."""
        if self.observers.deltas:
            self.observers.notify_delta(self.execution_id, self.sid, text)
        self.sink(text)  # type: ignore[misc]

    def emit_when_needed(self, text: str) -> None:
        """A delta to the observers, and to ``on_delta`` only once someone observes the execution
        or ``_DELTAS_WAITING`` deltas wait (then the waiting ones first, in order)."""
        waiting = self.waiting
        assert waiting is not None
        observers = self.observers
        if not observers.active and len(waiting) < _DELTAS_WAITING:
            waiting.append(text)  # nobody watches (so nobody watches deltas): it waits
            return
        if observers.deltas:
            observers.notify_delta(self.execution_id, self.sid, text)
        self.feed_waiting()  # in order, before this one
        self.sink(text)  # type: ignore[misc]


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


def _convert(value: Any, returns: Any) -> Any:
    return value if returns is None else TypeAdapter(returns).validate_python(value)


def child_outcome_payload(status: str, output: Any, error: dict[str, Any] | None) -> dict[str, Any]:
    """What a ``ChildExecution`` gate is answered with when its child settles (a persisted shape)."""
    return {"status": status, "output": output, "error": error}


def _child_outcome(child_id: str, outcome: Any) -> Any:
    d = outcome if isinstance(outcome, dict) else {}
    status = d.get("status")
    if status == "completed":
        return d.get("output")
    err = d.get("error") or {}
    raise ChildExecutionError(
        f"child execution {child_id!r} {status} ({error_summary(err)}) (inspect it with runtime.result({child_id!r}))"
    )


#: The slot setters of ``Event``'s fields, in order (``_new_event``).
_SET_EXECUTION_ID, _SET_SEQ, _SET_KIND, _SET_STEP_ID, _SET_AT, _SET_DATA, _SET_DATA_JSON = (
    getattr(Event, f.name).__set__ for f in fields(Event)
)


def _new_event(
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
    """The outcome of one commit (``ExecutionContext._submit``): a future that no cancel of a task
    awaiting it cancels. The write it stands for goes on whatever happens to the task; a task
    cancelled while it awaits one is woken when the write settles, and the cancel passes then
    (``Task.cancel`` marks the task to cancel itself at its next step when the future it waits on
    refuses). What ``asyncio.shield`` plus waiting for the outcome after the cancel gave, without
    a second future and an extra turn of the loop per commit."""

    def cancel(self, msg: Any = None) -> bool:
        """Refuse: only the writer settles a commit's outcome."""
        return False


class ExecutionContext:
    """The handle a flow body gets: ``execute``, ``gate(s)``, ``decide``, ``stream``, ``now``...

    It implements ``FlowContext`` (what bodies may use); ``stage``, ``commit`` and ``unserved`` are
    for the engine that drives the body.

    Attributes:
        execution_id: The execution this body runs.
        principal: Who it acts for.
    """

    def __init__(self, runtime: Engine, history: History, *, pure: bool = False, recovering: bool = False) -> None:
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
        self._patches: dict[str, bool] = {}
        self.waiting: list[str] = []
        #: ``(kind, id)`` of every step, gate, decision and value the body asked for, in order.
        self.trace: list[tuple[str, str]] = []
        #: A pure replay's replays of the child executions the body reached (``child``), in order.
        self.child_replays: list[ReplayReport] = []

    # -- bookkeeping ----------------------------------------------------------------------------
    @property
    def runtime(self) -> Engine:
        """The runtime running this execution."""
        return self._rt

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
        event = _new_event(self.execution_id, self._seq, kind, step_id, at, data, data_json)
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
        self._staged, self._blobs, self._urgent = [], [], False
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
            if self._urgent:  # an outcome staged while this commit was in flight
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

    def _kick(self) -> None:
        """Start a background commit when an outcome waits (``_urge``) or stream chunks piled up,
        unless one is in flight (it kicks again when it settles) or a background commit failed."""
        if self._inflight is not None or self._failed is not None or self._pure:
            return
        if self._urgent or len(self._staged) >= _STREAM_FLUSH_EVERY:
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

    def _nondeterminism(self, sid: str, rec: StepRecord, effect_id: str, digest: str) -> NonDeterminismError:
        if rec.effect != effect_id:
            detail = f"effect {rec.effect!r} was recorded but {effect_id!r} was requested"
        else:
            detail = f"its input digest {rec.input_digest()} was recorded but {digest} was requested"
        return NonDeterminismError(
            f"execution {self.execution_id!r}, step {sid!r}: {detail}. The flow's code changed since the "
            "run started (was the cell that defines it edited?). Fork the run or start a new one; "
            "to keep going with the old behaviour, restore the old code."
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

    # -- steps ----------------------------------------------------------------------------------
    def next_step_id(self) -> str:
        """The deterministic counter id the next ``execute`` without ``step_id`` gets."""
        return step_ids.counter_id(self._auto + 1)

    async def execute(
        self,
        effect_id: str,
        input: Any = None,
        *,
        step_id: str | None = None,
        record: Any = _UNSET,
        returns: Any = None,
        on_delta: Callable[[str], None] | None = None,
        input_ref: Sequence[Any] | None = None,
        defer_deltas: bool = False,
        owner: str | None = None,
    ) -> Any:
        """Run an effect as one durable step, or serve its recorded outcome on replay.

        Args:
            effect_id: The registered effect.
            input: Its input (plain JSON, a pydantic model or a dataclass).
            step_id: A stable id; a counter id (``#1``, ``#2``...) when omitted.
            record: What the journal keeps as the step's input when it differs from ``input``.
            returns: A type to validate the output into (live and replayed alike); plain JSON if None.
            on_delta: Receives the effect's streamed text deltas (live only).
            input_ref: ``(step_id, *path)``: where an earlier step's output holds the journaled input
                (e.g. a tool call's arguments in the model step's output). In event format 2 the
                journal keeps this reference instead of a copy when the output there equals it.
            defer_deltas: ``on_delta`` only turns the deltas into this step's held stream text
                (``stream(..., step_id=<this step>)``), so in event format 2 it may be fed late: the
                deltas wait and reach it, in order, only when their text is needed (someone observes
                the execution, the attempt fails, or ``_DELTAS_WAITING`` deltas wait). An attempt
                that completes unobserved never feeds it: its output holds the text.
            owner: Whose registration of ``effect_id`` runs it (``EffectSpec.owner``: an agent's
                flow and version); the runtime's shared one when the owner has none, or when None.
                The journal names only ``effect_id``.

        Returns:
            The output, as plain JSON or as ``returns``.

        Raises:
            NonDeterminismError: the journal recorded another effect or input for this step.
            Whatever the effect raised (recorded, and re-raised on replay).
        """
        if step_id is None:
            self._auto += 1
            step_id = step_ids.counter_id(self._auto)
        sid = step_id
        self._claim(sid)
        self.trace.append(("step", sid))
        journaled, text = jsonable_with_text(input if record is _UNSET else record)
        rec = self._h.steps.get(sid)
        # ``digest_value(journaled)``, from the text encoded once. Only a recorded step compares it and
        # only event format 1 journals it: a live step of format 2 skips the hash (one per step).
        digest = digest_bytes(text.encode("utf-8")) if rec is not None or self._format == FORMAT_1 else None
        attempt = 1
        if rec is not None:
            assert digest is not None
            if rec.effect != effect_id or rec.input_digest() != digest:
                raise self._nondeterminism(sid, rec, effect_id, digest)
            if rec.settled:
                self._served()
                if rec.error is not None:
                    raise error_from_data(rec.error)
                return _convert(rec.output, returns)
            if self._pure:
                raise self._diverged(f"step {sid!r} (cut in flight in the recorded run)")
            self._in_flight -= 1
            spec = self._rt.effects.spec(effect_id, owner)
            attempt = rec.attempts + 1
            if spec.idempotent and not rec.retry_pending and rec.attempts >= attempt_limit(spec):
                self._exhausted(sid, rec, spec)
            if not spec.idempotent and not rec.retry_pending:
                served = self._in_doubt(sid, rec, journaled)
                if served is not _UNSET:
                    return _convert(served, returns)
        elif self._pure:
            raise self._diverged(f"step {sid!r} (effect {effect_id!r})")
        else:
            spec = self._rt.effects.spec(effect_id, owner)
        ref = self._input_reference(input_ref, text)
        cut = rec is not None
        output = await self._run_live(
            sid, spec, input, journaled, digest, attempt, on_delta, ref, cut=cut, defer_deltas=defer_deltas
        )
        return _convert(output, returns)

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
            data = self._completed(rec.effect, output, rec.attempts, None)
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
        return _UNSET  # run again

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

    async def _run_live(
        self,
        sid: str,
        spec: EffectSpec,
        input: Any,
        journaled: Any,
        digest: str | None,
        attempt: int,
        on_delta: Callable[[str], None] | None,
        ref: list[Any] | None = None,
        *,
        cut: bool,
        defer_deltas: bool = False,
    ) -> Any:
        eid = self.execution_id
        effect_id = spec.effect_id
        key = f"{eid}:{sid}"
        started = self._started(effect_id, journaled, digest, key, ref)
        rule = spec.commit_rule
        # Durability rules (docs/design.md, section 4): the start is committed before the effect
        # runs for a BEFORE effect, for an attempt after a cut one, and while ``_careful``.
        first = rule is Durability.BEFORE or cut or self._careful
        await self._start(sid, self._with_attempt(started, attempt), commit=first)
        rt = self._rt
        if not spec.idempotent:
            # Fencing: the start is durable; the effect runs only if the lease is still this
            # process's, checked at the database now (one round trip, shared journals only).
            rt.confirm_lease(eid)
        live = _LiveAttempt(eid, sid, effect_id, started, first, attempt, rt.observers)
        live.fenced = not spec.idempotent
        if on_delta is None:
            emit_delta = live.emit_to_observers
        elif defer_deltas and self._format > FORMAT_1:
            # The deltas wait on ``live`` and reach ``on_delta`` only when their text is needed
            # (see ``execute``); an attempt that completes unwatched never feeds it.
            live.sink, live.waiting = on_delta, []
            emit_delta = live.emit_when_needed
        else:
            live.sink = on_delta
            emit_delta = live.emit_to_sink
        context = frozen_instance(
            EffectContext,
            execution_id=eid,
            step_id=sid,
            effect_id=effect_id,
            attempt=attempt,
            idempotency_key=key,
            principal=self.principal,
            emit_delta=emit_delta,
            deps=rt.deps.get(eid),
        )
        call = frozen_instance(
            EffectCall,
            spec=spec,
            input=input,
            context=context,
            on_retry=partial(self._on_retry, live),
            sleep=rt.clock.sleep,
        )
        if self._format > FORMAT_1:
            self._held[sid] = []
        try:
            try:
                result = await rt.effects.invoke(call)
                value = result.output
                if value is None or isinstance(value, (str, int, float, bool)):
                    output, output_json = value, None  # plain already; the store encodes it once
                else:
                    output, output_json = jsonable_with_text(value)
            except BaseException:
                live.feed_waiting()
                self._release_held(sid)  # a step that did not complete holds no text: keep what streamed
                raise
        except JournalWriteError:
            raise  # the journal failed, not the effect: the run stops (never a recorded step failure)
        except Exception as exc:
            if isinstance(exc, OutcomeUnknownError) and not spec.idempotent:
                # The effect cannot tell whether the call took effect: a person decides, as after a crash.
                error = error_to_data(exc)
                cause = {"type": error["type"], "message": error["message"]}
                self._park_in_doubt(sid, effect_id, live.current, journaled, cause=cause)
            self.stage(
                EventKind.STEP_FAILED,
                sid,
                {"effect": effect_id, "attempt": live.current, "will_retry": False, "error": error_to_data(exc)},
            )
            if rule is not Durability.DEFERRED:
                self._urge()
            raise
        self._held.pop(sid, None)  # format 2: the output holds the text streamed for this step
        data = self._completed(
            effect_id, output, live.current, to_jsonable(dict(result.usage)) if result.usage else None
        )
        if result.tainted:
            data["tainted"] = True
        # The store writes the output's text as encoded above instead of encoding it once more (a
        # string or number costs less to encode again than to splice in).
        data_json = None
        if output_json is not None and isinstance(output, (dict, list)):
            data_json = _object_json(data, "output", output_json)
        self.stage(EventKind.STEP_COMPLETED, sid, data, data_json)
        self._remember(sid, output)
        if rule is not Durability.DEFERRED:
            self._urge()
        return output

    async def _on_retry(self, live: _LiveAttempt, error: BaseException, delay: float) -> int:
        """A live step's retry hook (``EffectCall.on_retry``): record the failed attempt, sleep
        ``delay`` and start the next one; its number."""
        sid = live.sid
        failed = {"effect": live.effect_id, "attempt": live.current, "will_retry": True, "delay": delay}
        live.feed_waiting()
        self._release_held(sid)  # the failed attempt's text: no output holds it
        self.stage(EventKind.STEP_FAILED, sid, {**failed, "error": error_to_data(error)})
        await self.commit()  # a crash during the backoff must not make a clean failure look in doubt
        await self._rt.clock.sleep(delay)
        live.current += 1
        await self._start(sid, self._with_attempt(live.started, live.current), commit=live.first or self._careful)
        if live.fenced:  # not idempotent: the next attempt runs only under a confirmed lease too
            self._rt.confirm_lease(live.execution_id)
        if self._format > FORMAT_1:
            self._held[sid] = []  # the next attempt's text is held again
        return live.current

    # -- the event format's step shapes (``journal.event_format``) ---------------------------------
    def _started(
        self, effect_id: str, journaled: Any, digest: str | None, key: str, ref: list[Any] | None
    ) -> dict[str, Any]:
        """A ``step_started`` payload without its attempt: format 1 carries the digest (given: never
        None in format 1) and the idempotency key; format 2 derives both on read and may name its
        input by reference."""
        if self._format == FORMAT_1:
            assert digest is not None
            return {"effect": effect_id, "input": journaled, "digest": digest, "idempotency_key": key}
        return {"effect": effect_id, "ref": ref} if ref is not None else {"effect": effect_id, "input": journaled}

    def _with_attempt(self, started: dict[str, Any], attempt: int) -> dict[str, Any]:
        """``started`` for ``attempt`` (format 2 leaves out the first attempt's number)."""
        return started if self._format > FORMAT_1 and attempt == 1 else {**started, "attempt": attempt}

    def _completed(self, effect_id: str, output: Any, attempt: int, usage: dict[str, Any] | None) -> dict[str, Any]:
        """A ``step_completed`` payload: format 2 leaves out the effect and attempt (on its
        ``step_started``) and a usage equal to the one its output carries."""
        if self._format == FORMAT_1:
            data: dict[str, Any] = {"effect": effect_id, "output": output, "attempt": attempt}
            if usage:
                data["usage"] = usage
            return data
        data = {"output": output}
        if usage != usage_of_output(output):
            data["usage"] = usage
        return data

    def _input_reference(self, input_ref: Sequence[Any] | None, text: str) -> list[Any] | None:
        """Format 2: ``input_ref`` as the journaled ``ref`` when the output it names (a step
        completed live lately, or recorded) holds exactly the input whose canonical JSON is ``text``
        (the one ``execute`` already encoded and took its digest of); else None (a copy is kept)."""
        if input_ref is None or self._format == FORMAT_1 or not input_ref or not isinstance(input_ref[0], str):
            return None
        source, *path = input_ref
        if source in self._recent:
            output = self._recent[source]
        else:
            rec = self._h.steps.get(source)
            if rec is None or not rec.completed:
                return None
            output = rec.output
        try:
            target = ref_target(output, path)
        except LookupError:
            return None
        # The texts compared, not their digests: the digests are equal exactly when the texts are.
        return [source, *path] if canonical_json(target) == text else None

    def _remember(self, sid: str, output: Any) -> None:
        """Keep a live step's output for format 2 input references (the latest few only)."""
        if self._format == FORMAT_1:
            return
        self._done.add(sid)
        if not isinstance(output, (dict, list)):
            return
        self._recent[sid] = output
        if len(self._recent) > _RECENT_OUTPUTS:
            del self._recent[next(iter(self._recent))]

    def _release_held(self, sid: str) -> None:
        """Stage the stream chunks held for step ``sid`` (it did not complete, or too many wait)."""
        for channel, text in self._held.pop(sid, ()):
            self.stage(EventKind.STREAM_CHUNK, None, {"channel": channel, "text": text})

    async def _start(self, sid: str, data: dict[str, Any], *, commit: bool) -> None:
        """Stage a ``step_started`` (so steps keep the order the body asked for them in) and, when
        ``commit`` or an outcome is waiting to be committed (``_urge``), commit before the effect
        runs. If that commit fails the effect will not run, so its ``step_started`` is unstaged (a
        later commit must not claim it started); what was staged before it stays staged."""
        event = self.stage(EventKind.STEP_STARTED, sid, data)
        try:
            if commit or self._urgent:
                await self.commit()
            else:
                # No effect runs while a commit of its execution is in flight (it may hold the
                # outcome of the step before, which must be durable before anything else runs).
                if self._inflight is not None:
                    await self._idle()
                if self._failed is not None:
                    await self.commit()  # raises the background commit's error: the effect does not run
        except Exception:
            self._unstage(event)
            raise

    def _unstage(self, event: Event) -> None:
        """Take ``event`` back out of the staged events (numbering the ones staged after it down)."""
        for i, staged in enumerate(self._staged):
            if staged is event:
                del self._staged[i]
                self._staged[i:] = [replace(e, seq=e.seq - 1) for e in self._staged[i:]]
                self._seq -= 1
                return

    # -- gates ----------------------------------------------------------------------------------
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
                results.append(value if rec.schema is None else _convert(value, resolve_schema(rec.schema)))
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
            return _child_outcome(cid, outcome)
        if rec is not None and rec.resolved:
            return _child_outcome(cid, await self.gate(step_id, step_ids.CHILD_GATE))
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
            return _child_outcome(cid, outcome)
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

    # -- decisions ------------------------------------------------------------------------------
    async def decide(self, decision_id: str, options: Sequence[Any], policy: Policy) -> Any:
        """Run ``policy(options)`` once and record options, choice, probabilities and propensity.

        On replay the recorded choice is returned and the policy is not called.
        """
        self._claim(decision_id)
        self.trace.append(("decision", decision_id))
        opts = to_jsonable(list(options))
        rec = self._h.decisions.get(decision_id)
        if rec is not None:
            if rec.get("options") != opts:
                raise NonDeterminismError(
                    f"execution {self.execution_id!r}, decision {decision_id!r}: options "
                    f"{canonical_json(rec.get('options'))[:200]} were recorded but "
                    f"{canonical_json(opts)[:200]} were offered. The flow's code changed since the run "
                    "started: fork the run or start a new one."
                )
            self._served()
            return rec.get("choice")
        if self._pure:
            raise self._diverged(f"decision {decision_id!r}")
        result = policy(options)
        if inspect.isawaitable(result):
            result = await result
        decision = result if isinstance(result, Decision) else Decision(choice=result)
        choice = to_jsonable(decision.choice)
        probabilities = None if decision.probabilities is None else [float(p) for p in decision.probabilities]
        self.stage(
            EventKind.DECISION_RECORDED,
            decision_id,
            {
                "options": opts,
                "choice": choice,
                "probabilities": probabilities,
                "propensity": propensity_of(
                    opts, Decision(choice=choice, probabilities=probabilities, propensity=decision.propensity)
                ),
                "policy": policy_name(policy),
            },
        )
        return choice

    # -- values ---------------------------------------------------------------------------------
    def _value(self, kind: str, make: Callable[[], Any]) -> Any:
        self._values += 1
        vid = step_ids.value_id(self._values)
        self.trace.append(("value", vid))
        if vid in self._h.values:
            self._served()
            return self._h.values[vid]
        if self._pure:
            raise self._diverged(f"value {vid!r}")
        value = make()
        self.stage(EventKind.VALUE_RECORDED, vid, {"kind": kind, "value": value})
        return value

    def patched(self, change: str) -> bool:
        """Whether this run takes the new path of ``change`` (the meaning of Temporal's ``patched``).

        A run that reaches this call live (past its recorded prefix, or new) records the marker
        ``#patched:<change>`` (a ``value_recorded`` event of kind ``patched``) and gets True; a re-run
        is served the marker and gets True again. A run recorded before the change (re-run while it
        is still being served its record, and no marker) gets False and takes the old path, so it
        replays as recorded. The answer is fixed for the execution: a second call returns the first
        call's answer. Branch on it::

            if ctx.patched("fetch-v2"):
                rows = await ctx.execute("fetch_v2", query)
            else:
                rows = await ctx.execute("fetch", query)
        """
        if not isinstance(change, str) or not change or change != change.strip():
            raise UsageError(f"ctx.patched needs a non-empty change name without surrounding spaces, got {change!r}")
        known = self._patches.get(change)
        if known is not None:
            return known
        mid = step_ids.patch_marker_id(change)
        if mid in self._h.values:
            self._claim(mid)
            self.trace.append(("value", mid))
            self._served()
            taken = True
        elif self.replaying:
            taken = False  # recorded before the change: the old path, and no marker
        else:
            self._claim(mid)
            self.trace.append(("value", mid))
            self.stage(EventKind.VALUE_RECORDED, mid, {"kind": "patched", "value": change})
            taken = True
        self._patches[change] = taken
        return taken

    def now(self) -> float:
        """The current time (epoch seconds), recorded; replay returns the recorded value."""
        return float(self._value("now", self._rt.clock.now))

    def uuid(self) -> str:
        """A fresh id, recorded; replay returns the recorded value."""
        return str(self._value("uuid", self._rt.ids.new_id))

    def random(self) -> float:
        """A float in [0, 1), recorded; replay returns the recorded value."""
        return float(self._value("random", self._rt.random.random))

    # -- streams, warnings, content ---------------------------------------------------------------
    def stream(self, text: str, channel: str = "assistant", *, step_id: str | None = None) -> None:
        """Append a durable stream chunk (group-committed) and show it to every observer.

        Not re-emitted while the body is being served its recorded prefix.

        Args:
            text: The chunk.
            channel: ``assistant``, ``thinking``...
            step_id: The step whose output will hold this text (the model step streaming it). In
                event format 2 the chunk is held while that step runs and not journaled once it
                completes; it is journaled when the step fails, or when 64 of its chunks are held.
        """
        if not text or self.replaying:
            return
        data = {"channel": channel, "text": text}
        if step_id is not None and self._format > FORMAT_1 and self._holds(step_id):
            held = self._held.get(step_id)
            observers = self._rt.observers
            if observers.active:  # (the event is built for them only)
                # Stamped with the last staged event's time, not a clock read: a held chunk reads no
                # clock, watched or not (``defer_deltas`` makes no chunk of an unwatched attempt), so
                # an injected clock sees the same reads whether anybody watches.
                event = Event(self.execution_id, self._seq, EventKind.STREAM_CHUNK, None, self._last_at, data)
                observers.notify_events((event,))
            if held is None:
                return  # the step completed: its output holds the text
            held.append((channel, text))
            if len(held) >= _STREAM_FLUSH_EVERY:  # (the staged chunks' own count: a release is not undone)
                self._release_held(step_id)
                self._held[step_id] = []
                asyncio.get_running_loop().call_soon(self._kick)
            return
        event = self.stage(EventKind.STREAM_CHUNK, None, data)
        self._rt.observers.notify_events((event,))
        if len(self._staged) >= _STREAM_FLUSH_EVERY:
            asyncio.get_running_loop().call_soon(self._kick)

    def _holds(self, step_id: str) -> bool:
        """Format 2: True when step ``step_id`` is running live (its chunks are held) or completed
        in this run or the record (its output holds the text)."""
        if step_id in self._held or step_id in self._done:
            return True
        rec = self._h.steps.get(step_id)
        return rec is not None and rec.completed

    def warn(self, code: str, message: str, **data: Any) -> bool:
        """Record a ``warning`` event once per ``code`` per execution; returns True if recorded now."""
        if code in self._warned or self._pure:
            return False
        self._warned.add(code)
        self.stage(EventKind.WARNING, None, {"code": code, "message": message, **to_jsonable(data)})
        return True

    def put_content(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        """Store bytes in the content store (with the next commit); returns their tagged digest."""
        digest = digest_bytes(data)
        if not self._pure:
            self._blobs.append(ContentBlob(digest, data, media_type, tainted))
        return digest

    def get_content(self, digest: str) -> bytes:
        """Bytes stored under ``digest`` (staged in this run or in the journal)."""
        for blob in self._blobs:
            if blob.digest == digest:
                return blob.data
        data = self._rt.journal.get_content(digest)
        if data is None:
            raise UsageError(f"no content {digest} in the journal {self._rt.journal.location}")
        return data


def _object_json(data: dict[str, Any], key: str, text: str) -> str:
    """``canonical_json(data)`` where ``text`` is already ``canonical_json(data[key])``."""
    members = {}
    for k, v in data.items():  # a loop, not a comprehension: that would capture ``key`` and ``text`` in cells
        members[k] = text if k == key else canonical_json(v)
    return canonical_object(members)
