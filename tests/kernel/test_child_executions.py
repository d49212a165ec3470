"""Child executions (``ctx.child``): journaled, linked, gates park the parent, resume, recover, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loom_nb.errors import ChildExecutionError, UsageError
from loom_nb.journal import InMemoryJournal
from loom_nb.journal.step_ids import CHILD_GATE, child_execution_id
from loom_nb.kernel import Engine, ExecutionContext, FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds
from tests.journal.support import kinds


def engine(journal: InMemoryJournal | None = None) -> tuple[Engine, list[Any]]:
    flows = FlowRegistry()
    rt = Engine(journal or InMemoryJournal(), clock=FakeClock(tick=1.0), ids=SequentialIds(), flows=flows)
    calls: list[Any] = []

    async def child(ctx: ExecutionContext, inp: Any) -> Any:
        got = await ctx.execute("fetch", inp)
        if inp.get("gate"):
            answer = await ctx.gate("ok", "Approval", payload={"asks": inp})
            return {"got": got, "answer": answer}
        if inp.get("fail"):
            raise ValueError("child broke")
        return {"got": got}

    async def parent(ctx: ExecutionContext, inp: Any) -> Any:
        before = await ctx.execute("fetch", {"n": 0})
        try:
            out = await ctx.child("child", inp, step_id="sub")
        except ChildExecutionError as exc:
            out = {"error": str(exc)}
        after = await ctx.execute("fetch", {"n": 2})
        return {"before": before, "child": out, "after": after}

    def fetch(value: Any) -> Any:
        calls.append(value)
        return value

    flows.register(child, name="child")
    flows.register(parent, name="parent")
    rt.effects.register("fetch", fetch, idempotent=True)
    return rt, calls


async def test_a_child_that_completes_is_its_own_execution_linked_to_the_parent_step() -> None:
    rt, calls = engine()
    result = await rt.start("parent", {"n": 1}, execution_id="p")
    assert result.status == "completed"
    assert result.output == {"before": {"n": 0}, "child": {"got": {"n": 1}}, "after": {"n": 2}}
    cid = child_execution_id("p", "sub")
    assert cid == "p/sub"
    child_events = rt.journal.read(cid)
    assert child_events[0].data["parent"] == {"execution": "p", "step": "sub"}
    assert kinds(child_events)[-1] == "execution_completed"
    parent_events = rt.journal.read("p")
    opened = [e for e in parent_events if e.kind == "gate_opened"]
    assert [(e.step_id, e.data["kind"]) for e in opened] == [("sub", CHILD_GATE)]
    assert rt.history("p").gates["sub"].resolution == {
        "status": "completed",
        "output": {"got": {"n": 1}},
        "error": None,
    }
    assert (await rt.replay("p")).reproduced and (await rt.replay(cid)).reproduced
    assert calls == [{"n": 0}, {"n": 1}, {"n": 2}]


async def test_a_child_gate_parks_the_parent_and_answering_it_resumes_both() -> None:
    rt, calls = engine()
    result = await rt.start("parent", {"n": 1, "gate": True}, execution_id="p")
    assert result.status == "suspended"
    cid = "p/sub"
    assert rt.result(cid).status == "suspended"
    # The parent shows the child's gate, under the child's id; %loom pending lists only that one.
    assert [(g.execution_id, g.gate_id) for g in rt.open_gates("p")] == [(cid, "ok")]
    assert [(g.execution_id, g.gate_id) for g in rt.open_gates()] == [(cid, "ok")]
    with pytest.raises(
        UsageError, match=r"waits for the child execution 'p/sub'.*answer the child's gates instead \(ok\)"
    ):
        await rt.resume("p", "sub", {"anything": 1})
    child = await rt.resume(cid, "ok", "yes")
    assert child.status == "completed" and child.output == {"got": {"n": 1, "gate": True}, "answer": "yes"}
    parent = rt.result("p")
    assert parent.status == "completed"
    assert parent.output["child"] == child.output and parent.output["after"] == {"n": 2}
    assert calls == [{"n": 0}, {"n": 1, "gate": True}, {"n": 2}]  # nothing ran twice
    assert (await rt.replay("p")).reproduced and (await rt.replay(cid)).reproduced


async def test_a_failed_child_raises_in_the_parent_with_its_id() -> None:
    rt, _ = engine()
    result = await rt.start("parent", {"n": 1, "fail": True}, execution_id="p")
    assert result.status == "completed"
    assert "child execution 'p/sub' failed (ValueError: child broke)" in result.output["child"]["error"]
    assert rt.result("p/sub").status == "failed"


async def test_recover_wakes_a_parent_whose_child_settled_before_the_crash() -> None:
    journal = InMemoryJournal()
    rt, _ = engine(journal)
    assert (await rt.start("parent", {"n": 1, "gate": True}, execution_id="p")).status == "suspended"
    # The child's answer and completion reach the journal, the parent's wake-up does not (a crash).
    answer = rt.answer("p/sub", "ok", "yes")
    rt2, _ = engine(journal)
    await rt2._drive_held(answer.history)  # drive the child without the wake-up that _drive adds
    assert rt2.result("p/sub").status == "completed" and rt2.result("p").status == "suspended"
    rt3, calls3 = engine(journal)
    results = await rt3.recover()
    assert [r.status for r in results] == ["completed"]
    assert rt3.result("p").output["child"]["answer"] == "yes"
    assert calls3 == [{"n": 2}]  # only the parent's step after the child ran


async def test_cancelling_a_parent_cancels_the_child_it_waits_for() -> None:
    rt, _ = engine()
    assert (await rt.start("parent", {"n": 1, "gate": True}, execution_id="p")).status == "suspended"
    assert (await rt.cancel("p", "stop")).status == "cancelled"
    assert rt.result("p/sub").status == "cancelled"
    assert rt.open_gates() == []


async def test_cancelling_a_parent_while_its_child_runs_cancels_both() -> None:
    rt, _ = engine()
    started = asyncio.Event()

    async def hang(value: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    rt.effects.register("fetch", hang, idempotent=True)

    async def parent(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.child("child", inp, step_id="sub")

    rt.flows.register(parent, name="parent2")
    task = asyncio.create_task(rt.start("parent2", {"n": 1}, execution_id="p"))
    await started.wait()
    assert (await rt.cancel("p", "stop")).status == "cancelled"
    assert rt.result("p/sub").status == "cancelled"
    assert (await task).status == "cancelled"


async def test_replaying_a_parent_replays_its_child_too() -> None:
    rt, _ = engine()
    assert (await rt.start("parent", {"n": 1}, execution_id="p")).status == "completed"
    report = await rt.replay("p")
    assert report.reproduced, report.message
    assert [(c.execution_id, c.reproduced, c.replayed_status) for c in report.children] == [
        ("p/sub", True, "completed")
    ]


async def test_a_changed_child_flow_makes_the_parent_replay_diverge_naming_child_and_step() -> None:
    journal = InMemoryJournal()
    rt, _ = engine(journal)
    assert (await rt.start("parent", {"n": 1}, execution_id="p")).status == "completed"
    rt2, _ = engine(journal)

    async def child(ctx: ExecutionContext, inp: Any) -> Any:  # the edited child: another step first
        await ctx.execute("fetch", {"extra": True})
        return {"got": await ctx.execute("fetch", inp)}

    rt2.flows.register(child, name="child")
    report = await rt2.replay("p")
    assert not report.reproduced and report.replayed_status == "diverged"
    assert "NonDeterminism" not in report.message  # the message, not the type, names what differs
    assert "child execution 'p/sub'" in report.message and "step 'sub' of execution 'p'" in report.message
    assert [(c.execution_id, c.reproduced) for c in report.children] == [("p/sub", False)]
    assert not (await rt2.replay("p/sub")).reproduced  # the child alone says the same


async def test_a_parent_that_now_starts_another_child_flow_or_input_diverges() -> None:
    journal = InMemoryJournal()
    rt, _ = engine(journal)
    assert (await rt.start("parent", {"n": 1}, execution_id="p")).status == "completed"
    rt2, _ = engine(journal)

    async def other(ctx: ExecutionContext, inp: Any) -> Any:
        return {"got": await ctx.execute("fetch", inp)}

    rt2.flows.register(other, name="other")

    async def parent(ctx: ExecutionContext, inp: Any) -> Any:  # the edited parent: another child flow
        before = await ctx.execute("fetch", {"n": 0})
        out = await ctx.child("other", inp, step_id="sub")
        return {"before": before, "child": out, "after": await ctx.execute("fetch", {"n": 2})}

    rt2.flows.register(parent, name="parent")
    report = await rt2.replay("p")
    assert not report.reproduced
    assert "now starts the flow 'other'" in report.message and "'p/sub' ran 'child'" in report.message
    rt3, _ = engine(journal)

    async def parent3(ctx: ExecutionContext, inp: Any) -> Any:  # the edited parent: another child input
        before = await ctx.execute("fetch", {"n": 0})
        out = await ctx.child("child", {"n": 99}, step_id="sub")
        return {"before": before, "child": out, "after": await ctx.execute("fetch", {"n": 2})}

    rt3.flows.register(parent3, name="parent")
    report = await rt3.replay("p")
    assert not report.reproduced and "another input" in report.message and "'p/sub'" in report.message


async def test_check_of_a_parked_parent_reports_a_child_that_would_diverge() -> None:
    journal = InMemoryJournal()
    rt, _ = engine(journal)
    assert (await rt.start("parent", {"n": 1, "gate": True}, execution_id="p")).status == "suspended"
    assert (await rt.check()).ok and (await rt.check(["p"])).ok
    rt2, _ = engine(journal)

    async def child(ctx: ExecutionContext, inp: Any) -> Any:  # the edited child: its gate has a new id
        got = await ctx.execute("fetch", inp)
        return {"got": got, "answer": await ctx.gate("ok-v2", "Approval", payload={"asks": inp})}

    rt2.flows.register(child, name="child")
    report = await rt2.check(["p"])  # the parent alone: the check descends into its child
    (parent,) = report.executions
    assert not parent.ok and parent.step == "sub"
    assert "child execution 'p/sub'" in str(parent)
    everything = await rt2.check()  # the child once, under its parent
    (top,) = everything.executions
    assert [c.execution_id for c in everything.diverging] == ["p"] and top.step == "sub"
    (nested,) = top.children
    assert nested.execution_id == "p/sub" and nested.step == "ok" and not nested.ok
    assert [c.execution_id for c in everything.all()] == ["p", "p/sub"]
    text = str(everything)
    assert text.count("p/sub (child, suspended): would diverge") == 1 and "  child p/sub" in text
    assert text.startswith("2 execution(s) checked, 2 would diverge")
    alone = await rt2.check(["p/sub"])  # a child checked without its parent stands on its own
    assert [c.execution_id for c in alone.executions] == ["p/sub"] and alone.executions[0].step == "ok"


async def test_cancelling_a_parent_while_two_children_run_at_once_cancels_both() -> None:
    rt, _ = engine()
    started: list[Any] = []
    both = asyncio.Event()

    async def hang(value: Any) -> Any:
        started.append(value)
        if len(started) == 2:
            both.set()
        await asyncio.Event().wait()

    rt.effects.register("fetch", hang, idempotent=True)

    async def parent(ctx: ExecutionContext, inp: Any) -> Any:  # two children at once (parallel tools)
        return await asyncio.gather(
            ctx.child("child", {"n": 1}, step_id="a"), ctx.child("child", {"n": 2}, step_id="b")
        )

    rt.flows.register(parent, name="parent-two")
    task = asyncio.create_task(rt.start("parent-two", None, execution_id="p"))
    await both.wait()
    assert (await rt.cancel("p", "stop")).status == "cancelled"
    assert rt.result("p/a").status == "cancelled" and rt.result("p/b").status == "cancelled"
    assert (await task).status == "cancelled"
    assert rt.open_gates() == [] and (await rt.recover()) == []


async def test_cancelling_a_parent_while_a_grandchild_runs_cancels_the_whole_tree() -> None:
    rt, _ = engine()
    started = asyncio.Event()

    async def hang(value: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    rt.effects.register("fetch", hang, idempotent=True)

    async def middle(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.child("child", inp, step_id="inner")

    async def top(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.child("middle", inp, step_id="outer")

    rt.flows.register(middle, name="middle")
    rt.flows.register(top, name="top")
    task = asyncio.create_task(rt.start("top", {"n": 1}, execution_id="p"))
    await started.wait()
    assert (await rt.cancel("p", "stop")).status == "cancelled"
    assert [rt.result(e).status for e in ("p", "p/outer", "p/outer/inner")] == ["cancelled"] * 3
    assert (await task).status == "cancelled" and (await rt.recover()) == []
