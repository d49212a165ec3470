"""Questions an effect asks a person in the middle of its call (``EffectContext.ask``; an MCP
server's elicitation is one), each a durable gate on the step: ``<step>:ask:<n>``.

While the call waits, the question's ``gate_opened`` is committed with ``execution_suspended``, so
the journal says what the run waits for and a restarted kernel finds it suspended there, not
``running``. The call stays in flight in this process: an answer (``Engine.answer``, which finds the
waiting call in ``LiveQuestions``) is checked at the call site, committed as ``gate_resolved`` (with
``execution_resumed`` when nothing else waits) by the waiting call itself, and handed to the effect;
the body is not re-run.

If the process dies meanwhile, the call's outcome is unknown (an MCP stdio server dies with it).
The gate stays open; answering it after the restart resumes the run the ordinary way: the body
re-runs, the step cut in flight is run again when idempotent or parked in doubt (a person answers
"run it again"), and when the effect asks the same question again (same payload) the journaled
answer is given at once: a question is asked once per step, whatever the attempts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loom_nb.journal import step_ids
from loom_nb.journal.canonical import digest_value, to_jsonable
from loom_nb.journal.events import EventKind
from loom_nb.kernel.gates import OpenGate, resolve_schema, schema_name
from loom_nb.kernel.history import GateRecord
from loom_nb.kernel.live_questions import LiveQuestion
from loom_nb.kernel.staging import ContextCore, convert


class InCallQuestions(ContextCore):
    """The part of the context that asks a person a question inside a step's call (``ask``)."""

    async def ask_in_call(self, sid: str, attempt: int, kind: str, payload: Any, schema: Any = None) -> Any:
        """Ask a question on step ``sid`` (attempt ``attempt``) and wait for its answer.

        A question the step asked before (an earlier attempt, before a restart) with the same
        payload and already answered gets its journaled answer at once, each answer once per attempt;
        any other opens the gate ``<sid>:ask:<n>``, commits it with ``execution_suspended`` and waits
        for ``Engine.answer``.

        Returns:
            The answer, validated as ``schema`` (plain JSON if None).
        """
        if self._pure:
            raise self._diverged(f"a question of step {sid!r}")
        payload = to_jsonable(payload)
        digest = digest_value(payload)
        used = self.question_uses.setdefault((sid, attempt), set())
        numbers: list[int] = []
        for record in [*self._h.gates.values(), *self._new_gates.values()]:
            parsed = step_ids.parse_step_id(record.gate_id)
            if parsed.kind != step_ids.QUESTION or parsed.subject != sid or parsed.number is None:
                continue
            numbers.append(parsed.number)
            if record.gate_id in used or digest_value(record.payload) != digest:
                continue
            used.add(record.gate_id)
            if record.resolved:
                return self._answer_as(record, record.resolution)
            return await self._wait(record)
        gid = step_ids.question_gate_id(sid, max(numbers, default=0) + 1)
        self._claim(gid)
        used.add(gid)
        name = schema_name(schema)
        event = self.stage(EventKind.GATE_OPENED, gid, {"kind": kind, "payload": payload, "schema": name})
        record = self._new_gates[gid] = GateRecord(gid, kind, payload, name, event.at)
        return await self._wait(record)

    async def _wait(self, record: GateRecord) -> Any:
        """Suspend the execution in the journal on ``record`` (committed), wait for its answer, and
        commit that answer (``gate_resolved``; ``execution_resumed`` when nothing else waits)."""
        questions = self._rt.questions
        eid, gid = self.execution_id, record.gate_id
        waiting = [g.gate_id for g in questions.open(eid)] + [gid]
        self.stage(EventKind.EXECUTION_SUSPENDED, None, {"gates": waiting})
        loop = asyncio.get_running_loop()
        gate = OpenGate(
            execution_id=eid,
            gate_id=gid,
            kind=record.kind,
            payload=record.payload,
            schema=record.schema,
            opened_at=record.opened_at,
        )
        question = LiveQuestion(gate, loop.create_future(), loop)
        try:
            await self.commit()
            questions.add(question)  # journaled: it may be answered now (Engine.answer finds it)
            value = await question.answer
            record.resolved, record.resolution = True, value
            self.stage(EventKind.GATE_RESOLVED, gid, {"payload": value})
            if not any(g.gate_id != gid for g in questions.open(eid)):
                self.stage(EventKind.EXECUTION_RESUMED, None, {"gate_id": gid})
            await self.commit()  # the answer is durable before the effect acts on it
        finally:
            questions.remove(eid, gid)
        return self._answer_as(record, value)

    def _answer_as(self, record: GateRecord, value: Any) -> Any:
        return value if record.schema is None else convert(value, resolve_schema(record.schema))
