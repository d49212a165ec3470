"""Cancelling an execution: ``execution_cancelled`` is recorded, the status is terminal, a step cut in
flight goes in doubt (not idempotent) or fails (idempotent), and the golden cancelled run replays."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb.errors import RunCancelledError, UsageError
from loom_nb.journal import InMemoryJournal, canonical_json
from loom_nb.journal.events import TERMINAL_STATUSES
from loom_nb.journal.run_state import RunState
from loom_nb.kernel import Engine, ExecutionContext, FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds
from tests.journal.support import kinds
from tests.kernel import golden_flows
from tests.kernel.golden_flows import CANCEL_REASON, EXECUTION_ID, FLOW_NAME, GOLDEN_CANCELLED


def engine(journal: InMemoryJournal | None = None) -> Engine:
    flows = FlowRegistry()
    rt = Engine(journal or InMemoryJournal(), clock=FakeClock(tick=1.0), ids=SequentialIds(), flows=flows)

    async def waits(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("fetch", {"n": 1})
        return await ctx.gate("ok", "Approval")

    async def calls(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("fetch", {"n": 1})
        return await ctx.execute(inp["effect"], {"n": 2})

    flows.register(waits, name="waits")
    flows.register(calls, name="calls")
    rt.effects.register("fetch", lambda v: v, idempotent=True)
    return rt


def hang(started: asyncio.Event) -> Any:
    async def effect(value: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    return effect


async def test_cancelling_a_suspended_execution_records_it_and_nothing_resumes_it() -> None:
    rt = engine()
    assert (await rt.start("waits", execution_id="w-1")).status == "suspended"
    result = await rt.cancel("w-1", "not needed")
    assert result.status == "cancelled" and result.gates == ()
    exc = result.exception()
    assert isinstance(exc, RunCancelledError) and "'w-1' was cancelled (not needed)" in str(exc)
    events = rt.journal.read("w-1")
    assert kinds(events)[-1] == "execution_cancelled" and events[-1].data == {"reason": "not needed"}
    assert rt.journal.get_execution("w-1").status == "cancelled"  # type: ignore[union-attr]
    assert RunState.fold(events).status == "cancelled" and "cancelled" in TERMINAL_STATUSES
    with pytest.raises(UsageError, match="'w-1' is cancelled, not suspended"):
        await rt.resume("w-1", "ok", None)
    assert await rt.recover() == []
    again = await rt.cancel("w-1")  # cancelling twice changes nothing
    assert again.status == "cancelled" and len(rt.journal.read("w-1")) == len(events)


async def test_a_completed_or_unknown_execution_cannot_be_cancelled() -> None:
    rt = engine()
    await rt.start("waits", execution_id="w-2")
    await rt.resume("w-2", "ok", "fine")
    with pytest.raises(UsageError, match="'w-2' already completed; there is nothing to cancel"):
        await rt.cancel("w-2")
    with pytest.raises(UsageError, match="no execution 'nope'"):
        await rt.cancel("nope")


@pytest.mark.parametrize(("idempotent", "cut"), [(False, "step_in_doubt"), (True, "step_failed")])
async def test_a_step_cut_by_the_cancel_goes_in_doubt_unless_idempotent(idempotent: bool, cut: str) -> None:
    rt = engine()
    started = asyncio.Event()
    rt.effects.register("charge", hang(started), idempotent=idempotent)
    running = asyncio.ensure_future(rt.start("calls", {"effect": "charge"}, execution_id="c-1"))
    await started.wait()
    assert rt.is_active("c-1")
    result = await rt.cancel("c-1", "stop")
    assert result.status == "cancelled"
    assert (await running).status == "cancelled"  # the driving task ends normally, with the cancel
    assert not rt.is_active("c-1")
    events = rt.journal.read("c-1")
    assert kinds(events)[-2:] == [cut, "execution_cancelled"]
    assert events[-2].step_id == "#2"
    state = RunState.fold(events)
    assert state.steps["#2"].status == ("failed" if idempotent else "in_doubt")
    assert state.cancel_reason == "stop"
    if idempotent:
        assert events[-2].data["error"]["type"] == "loom_nb.errors:RunCancelledError"


async def test_cancelling_an_execution_a_crash_left_running_records_its_cut_step_in_doubt() -> None:
    journal = InMemoryJournal()
    rt = engine(journal)
    started = asyncio.Event()
    rt.effects.register("charge", hang(started))
    task = asyncio.ensure_future(rt.start("calls", {"effect": "charge"}, execution_id="c-2"))
    await started.wait()
    task.cancel()  # the process stops (no cancel asked): the execution stays running
    with pytest.raises(asyncio.CancelledError):
        await task
    assert journal.get_execution("c-2").status == "running"  # type: ignore[union-attr]
    later = engine(journal)  # a new process: nothing drives c-2
    result = await later.cancel("c-2")
    assert result.status == "cancelled"
    assert kinds(journal.read("c-2"))[-2:] == ["step_in_doubt", "execution_cancelled"]


def test_cancel_sync_in_a_script() -> None:
    rt = engine()
    rt.start_sync("waits", execution_id="s-1")
    assert rt.cancel_sync("s-1").status == "cancelled"


async def test_the_kernel_still_journals_the_cancelled_golden_run_identically() -> None:
    fresh = golden_flows.to_lines(await golden_flows.record_cancelled())
    lines = GOLDEN_CANCELLED.read_text(encoding="utf-8").splitlines()
    assert fresh == lines
    assert all(canonical_json(__import__("json").loads(line)) == line for line in lines)


async def test_the_cancelled_golden_run_replays_and_recover_leaves_it() -> None:
    journal = golden_flows.load(GOLDEN_CANCELLED)
    events = journal.read(EXECUTION_ID)
    assert kinds(events)[-2:] == ["step_in_doubt", "execution_cancelled"]
    assert events[-1].data == {"reason": CANCEL_REASON}
    flows = FlowRegistry()
    flows.register(golden_flows.golden_order, name=FLOW_NAME)
    pure = Engine(journal, flows=flows)  # no effect registered: a replay that ran one would fail
    report = await pure.replay(EXECUTION_ID)
    assert report.reproduced, report.message
    assert (report.recorded_status, report.replayed_status) == ("cancelled", "cancelled")
    changed = golden_flows.make_runtime(journal, golden_flows.golden_order_changed)
    assert (await changed.replay(EXECUTION_ID)).reproduced is False
    assert await golden_flows.make_runtime(journal).recover() == []
    assert len(journal.read(EXECUTION_ID)) == len(events)
