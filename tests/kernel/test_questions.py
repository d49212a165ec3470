"""A question an effect asks a person mid-call (``EffectContext.ask``, ``kernel/questions.py``): a
durable gate ``<step>:ask:<n>`` the run is suspended on in the journal while the call waits; the
answer goes to the waiting call (the body is not re-run); after the process is gone, answering the
open gate resumes the run the ordinary way and the call asked again gets the journaled answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb.errors import UsageError
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.kernel import EffectContext, Engine, ExecutionContext
from tests.kernel.support import make_runtime


def asking(*, idempotent: bool, journal: InMemoryJournal | None = None) -> tuple[Engine, list[Any]]:
    """An engine with effect ``book`` that asks ``{"q": "which day?"}`` mid-call; ``calls`` logs each
    call's start and the answer it got."""
    calls: list[Any] = []

    async def book(what: Any, context: EffectContext) -> Any:
        calls.append(("start", context.attempt))
        assert context.ask is not None
        answer = await context.ask("Question", {"q": "which day?", "for": what}, None)
        calls.append(("answered", answer))
        return f"booked {what} on {answer['day']}"

    async def flow(ctx: ExecutionContext, what: Any) -> Any:
        return await ctx.execute("book", what)

    rt = make_runtime(journal) if journal is not None else make_runtime()
    rt.flows.register(flow, "booking")
    rt.effects.register("book", book, idempotent=idempotent)
    return rt, calls


async def until_asked(rt: Engine, execution_id: str) -> None:
    for _ in range(200):
        if rt.questions.open(execution_id):
            return
        await asyncio.sleep(0.005)
    raise AssertionError("no question was asked")


async def test_the_answer_goes_to_the_waiting_call_and_the_body_is_not_re_run() -> None:
    rt, calls = asking(idempotent=False)
    task = asyncio.ensure_future(rt.start("booking", "a room", execution_id="b"))
    await until_asked(rt, "b")
    assert rt.journal.get_execution("b").status == "suspended"  # the journal says what it waits for
    (gate,) = rt.open_gates("b")
    assert (gate.gate_id, gate.kind, gate.payload) == ("#1:ask:1", "Question", {"q": "which day?", "for": "a room"})
    answer = rt.answer("b", "#1:ask:1", {"day": "monday"})
    assert answer.live and not answer.resumed
    with pytest.raises(UsageError, match="already answered"):
        rt.answer("b", "#1:ask:1", {"day": "tuesday"})
    done = await task
    assert (done.status, done.output) == ("completed", "booked a room on monday")
    assert calls == [("start", 1), ("answered", {"day": "monday"})]
    kinds = [(e.kind, e.step_id) for e in rt.journal.read("b")]
    opened = kinds.index((EventKind.GATE_OPENED, "#1:ask:1"))
    assert kinds[opened + 1] == (EventKind.EXECUTION_SUSPENDED, None)
    resolved = kinds.index((EventKind.GATE_RESOLVED, "#1:ask:1"))
    assert kinds[resolved + 1] == (EventKind.EXECUTION_RESUMED, None)
    assert (
        kinds.index((EventKind.STEP_STARTED, "#1")) < opened < resolved < kinds.index((EventKind.STEP_COMPLETED, "#1"))
    )
    report = await rt.replay("b")
    assert report.reproduced, report.message
    assert (await rt.check()).ok


@pytest.mark.parametrize("idempotent", [False, True])
async def test_after_the_process_is_gone_the_answer_resumes_the_run_and_the_call_asked_again_is_served(
    idempotent: bool,
) -> None:
    journal = InMemoryJournal()
    first, calls = asking(idempotent=idempotent, journal=journal)
    task = asyncio.ensure_future(first.start("booking", "a room", execution_id="b"))
    await until_asked(first, "b")
    task.cancel()  # the process is gone: nothing more of it is written (a test of the kill: tests/effects)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert journal.get_execution("b").status == "suspended"

    again, calls = asking(idempotent=idempotent, journal=journal)
    assert not again.questions.open("b")  # nobody waits here: the ordinary answer
    (gate,) = again.open_gates("b")
    answer = again.answer("b", gate.gate_id, {"day": "friday"})
    assert answer.resumed and not answer.live
    result = await again.proceed(answer)
    if not idempotent:
        # The call was cut in flight: a person says whether to run it again, as after any crash.
        assert result.status == "suspended"
        assert [g.gate_id for g in result.gates] == ["#1:in_doubt"]
        assert calls == []
        result = await again.resume("b", "#1:in_doubt", {"action": "run_again"})
    assert (result.status, result.output) == ("completed", "booked a room on friday")
    assert calls == [("start", 2), ("answered", {"day": "friday"})]  # asked again, served: no new gate
    gates = [e.step_id for e in journal.read("b") if e.kind == EventKind.GATE_OPENED]
    assert gates == ["#1:ask:1"] + ([] if idempotent else ["#1:in_doubt"])


async def test_a_run_waiting_on_a_question_checks_clean_and_cancels_with_its_call_in_doubt() -> None:
    rt, calls = asking(idempotent=False)
    task = asyncio.ensure_future(rt.start("booking", "a room", execution_id="b"))
    await until_asked(rt, "b")
    report = await rt.check(["b"])
    assert report.ok and [c.execution_id for c in report.executions] == ["b"], report
    cancelled = await rt.cancel("b", "changed my mind")
    assert cancelled.status == "cancelled"
    assert (await task).status == "cancelled"
    assert not rt.questions.open("b")
    kinds = [e.kind for e in rt.journal.read("b") if e.step_id == "#1"]
    assert kinds == [EventKind.STEP_STARTED, EventKind.STEP_IN_DOUBT]  # it may have taken effect
    assert calls == [("start", 1)]
    with pytest.raises(UsageError, match="cancelled"):
        rt.answer("b", "#1:ask:1", {"day": "monday"})
