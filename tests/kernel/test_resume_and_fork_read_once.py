"""``resume`` and ``fork`` read an execution's history once and drive on from what they read."""

from __future__ import annotations

from typing import Any

from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.kernel import Engine, FlowRegistry
from loom_nb.kernel.context import ExecutionContext
from loom_nb.testing import FakeClock, JournalProxy, SequentialIds


async def ask_then_act(ctx: ExecutionContext, input: Any) -> Any:
    first = await ctx.execute("fx.double", input, step_id="double")
    answer = await ctx.gate("ok", "Approval")
    return await ctx.execute("fx.double", first + answer, step_id="again")


def engine() -> tuple[Engine, JournalProxy]:
    journal = JournalProxy(InMemoryJournal())
    rt = Engine(journal, clock=FakeClock(tick=0.5), ids=SequentialIds(), flows=FlowRegistry())
    rt.effects.register("fx.double", lambda value: value * 2)
    rt.flows.register(ask_then_act, "ask_then_act")
    return rt, journal


async def test_a_resume_reads_the_history_once_and_runs_the_body_on() -> None:
    rt, journal = engine()
    assert (await rt.start("ask_then_act", 3, execution_id="e-1")).status == "suspended"
    journal.reads = 0
    result = await rt.resume("e-1", "ok", 1)
    assert journal.reads == 1
    assert (result.status, result.output) == ("completed", 14)
    assert [e.seq for e in journal.read("e-1")] == list(range(1, len(journal.read("e-1")) + 1))


async def test_a_fork_reads_the_source_once_and_runs_the_copy_on() -> None:
    rt, journal = engine()
    await rt.start("ask_then_act", 3, execution_id="e-1")
    await rt.resume("e-1", "ok", 1)
    journal.reads = 0
    forked = await rt.fork("e-1", "again", new_execution_id="f-1")
    assert journal.reads == 1
    assert (forked.status, forked.output) == ("completed", 14)
    started = journal.read("f-1")[0]
    assert (started.kind, started.data["forked_from"], started.data["at_step"]) == (
        EventKind.EXECUTION_STARTED,
        "e-1",
        "again",
    )
