"""Versioned flows: ``ctx.patched`` (Temporal's meaning) and ``Engine.check`` against edited code."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.errors import UsageError
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import CheckFinding, FlowContext, FlowRegistry
from tests.kernel.support import make_runtime


def _runtime() -> Any:
    flows = FlowRegistry()
    rt = make_runtime(flows=flows)
    rt.effects.register("fetch", lambda x: f"v1:{x}")
    rt.effects.register("fetch_v2", lambda x: f"v2:{x}")
    return rt, flows


def _old(flows: FlowRegistry) -> None:
    async def body(ctx: FlowContext, input: Any) -> Any:
        rows = await ctx.execute("fetch", input)
        ok = await ctx.gate("ok", "Confirm")
        return [rows, ok]

    flows.register(body, "tidy")


def _patched(flows: FlowRegistry) -> None:
    async def body(ctx: FlowContext, input: Any) -> Any:
        if ctx.patched("fetch-v2"):
            rows = await ctx.execute("fetch_v2", input)
        else:
            rows = await ctx.execute("fetch", input)
        assert ctx.patched("fetch-v2") == ctx.patched("fetch-v2")  # fixed for the execution
        ok = await ctx.gate("ok", "Confirm")
        return [rows, ok]

    flows.register(body, "tidy")


def _unpatched_edit(flows: FlowRegistry) -> None:
    async def body(ctx: FlowContext, input: Any) -> Any:
        rows = await ctx.execute("fetch_v2", input)
        ok = await ctx.gate("ok", "Confirm")
        return [rows, ok]

    flows.register(body, "tidy")


async def test_old_runs_take_the_old_path_and_new_runs_record_the_marker() -> None:
    rt, flows = _runtime()
    _old(flows)
    old = await rt.start("tidy", "a", execution_id="old")
    assert old.status == "suspended"
    _patched(flows)
    await rt.start("tidy", "b", execution_id="new")
    marker = [e for e in rt.journal.read("new") if e.step_id == "#patched:fetch-v2"]
    assert [(e.kind, e.data) for e in marker] == [("value_recorded", {"kind": "patched", "value": "fetch-v2"})]
    assert not any(e.step_id == "#patched:fetch-v2" for e in rt.journal.read("old"))
    assert (await rt.resume("old", "ok", True)).output == ["v1:a", True]
    assert (await rt.resume("new", "ok", True)).output == ["v2:b", True]
    for eid in ("old", "new"):
        assert (await rt.replay(eid)).reproduced, eid


async def test_a_patch_point_reached_past_the_record_takes_the_new_path() -> None:
    rt, flows = _runtime()
    _patched(flows)

    async def first_gate(ctx: FlowContext, input: Any) -> Any:
        await ctx.gate("first", "Confirm")
        return await flows.get("tidy")(ctx, input)

    flows.register(first_gate, "gated")
    await rt.start("gated", "x", execution_id="g")  # recorded before it reached the patch point
    assert (await rt.resume("g", "first", True)).status == "suspended"
    assert rt.history("g").values == {"#patched:fetch-v2": "fetch-v2"}  # reached live: new path
    assert (await rt.resume("g", "ok", True)).output == ["v2:x", True]
    assert (await rt.replay("g")).reproduced


async def test_a_change_name_must_be_a_name() -> None:
    rt, flows = _runtime()

    async def body(ctx: FlowContext, input: Any) -> Any:
        return ctx.patched(" ")

    flows.register(body, "bad")
    result = await rt.start("bad", None)
    assert result.status == "failed" and "ctx.patched" in str(result.error)
    with pytest.raises(UsageError):
        raise result.exception()  # type: ignore[misc]


async def test_check_lists_the_runs_an_unpatched_edit_would_break_with_the_step_and_the_fix() -> None:
    rt, flows = _runtime()
    _old(flows)
    await rt.start("tidy", "a", execution_id="parked")
    await rt.start("tidy", "b", execution_id="done")
    await rt.resume("done", "ok", True)
    assert (await rt.check()).ok  # the code that recorded them
    _unpatched_edit(flows)
    report = await rt.check()
    assert [c.execution_id for c in report] == ["parked"]  # completed runs are not checked
    (parked,) = report.diverging
    assert parked.step == "#1" and parked.status == "suspended"
    assert "ctx.patched" in parked.findings[0].fix
    assert "#1" in str(report) and "would diverge" in str(report)
    _patched(flows)
    assert rt.check_sync is not None
    assert (await rt.check()).ok  # the patch keeps the parked run on its old path
    assert (await rt.resume("parked", "ok", True)).output == ["v1:a", True]


async def test_check_sees_a_flow_that_now_ends_early_or_asks_for_another_gate() -> None:
    rt, flows = _runtime()
    _old(flows)
    await rt.start("tidy", "a", execution_id="p")

    async def other_gate(ctx: FlowContext, input: Any) -> Any:
        await ctx.execute("fetch", input)
        return await ctx.gate("confirm-2", "Confirm")

    flows.register(other_gate, "tidy")
    (c,) = (await rt.check()).executions
    assert c.step == "ok" and "gate 'confirm-2'" in c.findings[0].reason

    async def ends(ctx: FlowContext, input: Any) -> Any:
        return await ctx.execute("fetch", input)

    flows.register(ends, "tidy")
    (c,) = (await rt.check()).executions
    assert c.step == "ok" and "ends before" in c.findings[0].reason


async def test_a_run_left_running_by_a_crash_is_fine_when_the_code_reaches_the_end_of_its_record() -> None:
    rt, flows = _runtime()
    _old(flows)
    await rt.start("tidy", "a", execution_id="p")
    crashed = InMemoryJournal()  # the same record, cut before the suspension committed
    crashed.append([e for e in rt.journal.read("p") if e.kind != "execution_suspended"])
    rt2 = make_runtime(crashed, flows=flows)
    assert rt2.history("p").status == "running"
    assert (await rt2.check()).ok
    _unpatched_edit(flows)
    assert (await rt2.check()).diverging[0].step == "#1"


async def test_check_hooks_add_findings_of_a_flow_layer() -> None:
    rt, flows = _runtime()
    _old(flows)
    await rt.start("tidy", "a", execution_id="p")
    rt.check_hooks["tidy"] = lambda h: [CheckFinding("#1", f"prompt changed in {h.execution_id}", "patch it")]
    (c,) = (await rt.check(["p"])).executions
    assert not c.ok and c.findings[0].fix == "patch it"


async def test_check_names_a_flow_this_process_does_not_define() -> None:
    rt, flows = _runtime()
    _old(flows)
    await rt.start("tidy", "a", execution_id="p")
    rt2 = make_runtime(rt.journal, flows=FlowRegistry())  # a restarted kernel before the cell ran
    (c,) = (await rt2.check()).executions
    assert not c.ok and c.step is None and "tidy" in c.findings[0].reason
    assert "define (or import) the flow" in c.findings[0].fix
