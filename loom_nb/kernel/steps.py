"""``StepExecution``: ``ctx.execute``, one effect as one durable step: served from the record on a
re-run, run live past it (with its start and outcome staged and committed as its durability rule
says, its deltas streamed, its retries recorded and its lease confirmed when it is not idempotent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from loom_nb.errors import JournalWriteError, NonDeterminismError, OutcomeUnknownError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json, digest_bytes, jsonable_with_text, to_jsonable
from loom_nb.journal.event_format import FORMAT_1, ref_target
from loom_nb.journal.events import EventKind
from loom_nb.kernel.effect_registry import Durability, EffectCall, EffectContext, EffectSpec, frozen_instance
from loom_nb.kernel.errors_codec import error_from_data, error_to_data
from loom_nb.kernel.history import StepRecord
from loom_nb.kernel.in_doubt import RUN_AGAIN, InDoubtSteps, attempt_limit
from loom_nb.kernel.live_attempt import LiveAttempt
from loom_nb.kernel.questions import InCallQuestions
from loom_nb.kernel.staging import convert
from loom_nb.kernel.step_shapes import completed_payload, object_json, started_payload, with_attempt

_UNSET: Any = object()
#: How many recent live step outputs a context keeps for format 2 input references.
_RECENT_OUTPUTS = 8


class StepExecution(InDoubtSteps, InCallQuestions):
    """The part of the context that runs effects as durable steps (``execute``)."""

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
                the execution, the attempt fails, ``DELTAS_WAITING`` deltas wait, or the stream
                went on for ``StreamCommits.within`` seconds: 0, the loop's next turn). An attempt
                that completes unobserved before then never feeds it: its output holds the text.
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
                return convert(rec.output, returns)
            if self._pure:
                raise self._diverged(f"step {sid!r} (cut in flight in the recorded run)")
            self._in_flight -= 1
            spec = self._rt.effects.spec(effect_id, owner)
            attempt = rec.attempts + 1
            if spec.idempotent and not rec.retry_pending and rec.attempts >= attempt_limit(spec):
                self._exhausted(sid, rec, spec)
            if not spec.idempotent and not rec.retry_pending:
                served = self._in_doubt(sid, rec, journaled)
                if served is not RUN_AGAIN:
                    return convert(served, returns)
        elif self._pure:
            raise self._diverged(f"step {sid!r} (effect {effect_id!r})")
        else:
            spec = self._rt.effects.spec(effect_id, owner)
        ref = self._input_reference(input_ref, text)
        cut = rec is not None
        output = await self._run_live(
            sid, spec, input, journaled, digest, attempt, on_delta, ref, cut=cut, defer_deltas=defer_deltas
        )
        return convert(output, returns)

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
        started = started_payload(self._format, effect_id, journaled, digest, key, ref)
        rule = spec.commit_rule
        # Durability rules (docs/design.md, section 4): the start is committed before the effect
        # runs for a BEFORE effect, for an attempt after a cut one, and while ``_careful``.
        first = rule is Durability.BEFORE or cut or self._careful
        await self._start(sid, with_attempt(self._format, started, attempt), commit=first)
        rt = self._rt
        if not spec.idempotent:
            # Fencing: the start is durable; the effect runs only if the lease is still this
            # process's, checked at the database now (one round trip, shared journals only).
            rt.confirm_lease(eid)
        live = LiveAttempt(eid, sid, effect_id, started, first, attempt, rt.observers)
        live.fenced = not spec.idempotent
        if on_delta is None:
            emit_delta = live.emit_to_observers
        elif defer_deltas and self._format > FORMAT_1:
            # The deltas wait on ``live`` and reach ``on_delta`` only when their text is needed
            # (see ``execute``); an attempt that completes unwatched within ``_within`` never feeds it.
            live.sink, live.waiting = on_delta, []
            live.within, live.release = self._within, self._release_due
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
            ask=partial(self._ask_live, live),
            report_progress=rt.observers.reporter(eid, sid),
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
                live.stop()
                if live.error is not None:  # the sink refused a delta ``due`` fed it: the step fails
                    raise live.error
                value = result.output
                if value is None or isinstance(value, (str, int, float, bool)):
                    output, output_json = value, None  # plain already; the store encodes it once
                else:
                    output, output_json = jsonable_with_text(value)
            except BaseException:
                live.stop()
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
        data = completed_payload(
            self._format, effect_id, output, live.current, to_jsonable(dict(result.usage)) if result.usage else None
        )
        if result.tainted:
            data["tainted"] = True
        # The store writes the output's text as encoded above instead of encoding it once more (a
        # string or number costs less to encode again than to splice in).
        data_json = None
        if output_json is not None and isinstance(output, (dict, list)):
            data_json = object_json(data, "output", output_json)
        self.stage(EventKind.STEP_COMPLETED, sid, data, data_json)
        self._remember(sid, output)
        if rule is not Durability.DEFERRED:
            self._urge()
        return output

    async def _ask_live(self, live: LiveAttempt, kind: str, payload: Any, schema: Any = None) -> Any:
        """``EffectContext.ask`` of a live attempt: a question on its step (``InCallQuestions.ask_in_call``)."""
        return await self.ask_in_call(live.sid, live.current, kind, payload, schema)

    async def _on_retry(self, live: LiveAttempt, error: BaseException, delay: float) -> int:
        """A live step's retry hook (``EffectCall.on_retry``): record the failed attempt, sleep
        ``delay`` and start the next one; its number."""
        sid = live.sid
        failed = {"effect": live.effect_id, "attempt": live.current, "will_retry": True, "delay": delay}
        live.stop()
        live.feed_waiting()
        self._release_held(sid)  # the failed attempt's text: no output holds it
        self.stage(EventKind.STEP_FAILED, sid, {**failed, "error": error_to_data(error)})
        await self.commit()  # a crash during the backoff must not make a clean failure look in doubt
        await self._rt.clock.sleep(delay)
        live.current += 1
        await self._start(
            sid, with_attempt(self._format, live.started, live.current), commit=live.first or self._careful
        )
        if live.fenced:  # not idempotent: the next attempt runs only under a confirmed lease too
            self._rt.confirm_lease(live.execution_id)
        if self._format > FORMAT_1:
            self._held[sid] = []  # the next attempt's text is held again
        return live.current

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
