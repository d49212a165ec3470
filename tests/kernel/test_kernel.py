"""The kernel: start / resume / recover / replay, step identity, gates, decisions, values, streams."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from loom_nb.errors import (
    FlowNotFoundError,
    InDoubtError,
    NonDeterminismError,
    ResumeValidationError,
    UsageError,
)
from loom_nb.journal import Event, EventKind, InMemoryJournal
from loom_nb.kernel import Decision, Engine, ExecutionContext, GateRequest, Suspend
from tests.journal.support import copy_prefix, kinds, shape
from tests.kernel.support import Calls, make_runtime, register_recording


class Custom(RuntimeError):
    pass


class Approval(BaseModel):
    approved: bool
    reason: str | None = None


def step_events(rt: Engine, eid: str, kind: str) -> list[Event]:
    return [e for e in rt.journal.read(eid) if e.kind == kind]


# -- start / complete / idempotent start ----------------------------------------------------------------
async def test_start_runs_to_completion_and_journals_each_step(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "add", lambda v: v["x"] + 1)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        a = await ctx.execute("add", {"x": inp["x"]})
        b = await ctx.execute("add", {"x": a})
        return {"sum": b}

    result = await rt.start(body, {"x": 1}, execution_id="e1")
    assert (result.execution_id, result.status, result.output, result.error) == (
        "e1",
        "completed",
        {"sum": 3},
        None,
    )
    assert kinds(rt.journal.read("e1")) == [
        "execution_started",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "execution_completed",
    ]
    first = rt.journal.read("e1")[1].data
    # event format 2: the key (e1:#1), the digest and the first attempt's number are derived on read
    assert first == {"effect": "add", "input": {"x": 1}}
    assert rt.journal.read("e1")[2].data == {"output": 2}
    assert rt.journal.read("e1")[0].data["flow"] == "body"
    rec = rt.journal.get_execution("e1")
    assert rec is not None and (rec.flow, rec.status) == ("body", "completed")
    assert [c[2:] for c in calls.log] == [("e1:#1", 1), ("e1:#2", 1)]
    assert rt.result("e1").output == {"sum": 3}


async def test_generated_execution_ids_come_from_the_id_source(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return inp

    assert (await rt.start(body, 1)).execution_id == "exec-1"
    assert (await rt.start(body, 2)).execution_id == "exec-2"


async def test_start_by_existing_id_returns_the_existing_result_without_rerunning(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("fx", inp)

    first = await rt.start(body, "a", execution_id="same")
    n_events = len(rt.journal.read("same"))
    second = await rt.start(body, "DIFFERENT INPUT", execution_id="same")
    assert second == first
    assert second.output == {"effect": "fx", "input": "a"}
    assert len(calls.log) == 1
    assert len(rt.journal.read("same")) == n_events


async def test_start_by_existing_id_of_a_suspended_run_returns_its_gates(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval", schema=Approval)

    first = await rt.start(body, None, execution_id="s")
    again = await rt.start(body, None, execution_id="s")
    assert again.status == "suspended"
    assert [g.gate_id for g in again.gates] == [g.gate_id for g in first.gates] == ["g"]


async def test_start_by_existing_id_with_another_flow_is_a_usage_error(rt: Engine) -> None:

    async def one(ctx: ExecutionContext, inp: Any) -> Any:
        return 1

    async def two(ctx: ExecutionContext, inp: Any) -> Any:
        return 2

    await rt.start(one, None, execution_id="x")
    with pytest.raises(UsageError, match=r"'x' already exists and runs flow 'one', not 'two'"):
        await rt.start(two, None, execution_id="x")


async def test_missing_flow_name_is_flow_not_found_naming_it(rt: Engine) -> None:
    with pytest.raises(FlowNotFoundError, match="no flow named 'nowhere'"):
        await rt.start("nowhere", None)
    assert rt.journal.list_executions() == []


async def test_resuming_a_run_whose_flow_is_not_registered_names_the_flow(rt: Engine) -> None:

    async def vanishing(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval")

    await rt.start(vanishing, None, execution_id="v")
    restarted = make_runtime(rt.journal)  # a new kernel: nothing registered
    with pytest.raises(FlowNotFoundError, match="'vanishing'"):
        await restarted.resume("v", "g", {"ok": True})


# -- gates and resume --------------------------------------------------------------------------------
async def test_resume_validates_the_payload_before_recording_anything(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "send")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        decision = await ctx.gate("approve", "Approval", payload={"to": "bob"}, schema=Approval)
        assert isinstance(decision, Approval)
        if decision.approved:
            return await ctx.execute("send", {"to": "bob"})
        return "refused"

    result = await rt.start(body, None, execution_id="r")
    assert result.status == "suspended"
    (gate,) = result.gates
    assert (gate.gate_id, gate.kind, gate.payload) == ("approve", "Approval", {"to": "bob"})
    assert gate.schema is not None and gate.schema.endswith(":Approval")
    before = shape(rt.journal.read("r"))

    with pytest.raises(ResumeValidationError) as info:
        await rt.resume("r", "approve", {"approved": "not a bool"})
    assert "'approve'" in str(info.value) and "'r'" in str(info.value)
    assert "Nothing was recorded" in str(info.value)
    assert (info.value.execution_id, info.value.gate_id) == ("r", "approve")
    assert shape(rt.journal.read("r")) == before
    assert [g.gate_id for g in rt.open_gates("r")] == ["approve"]
    assert rt.result("r").status == "suspended"
    assert calls.log == []

    done = await rt.resume("r", "approve", Approval(approved=True))
    assert done.status == "completed"
    assert done.output == {"effect": "send", "input": {"to": "bob"}}
    resolved = step_events(rt, "r", EventKind.GATE_RESOLVED)
    assert [e.data for e in resolved] == [{"payload": {"approved": True, "reason": None}}]
    assert len(calls.log) == 1


async def test_resume_errors_name_the_execution_and_gate(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.gate("first", "Approval")
        return await ctx.gate("second", "Approval")

    await rt.start(body, None, execution_id="e")
    with pytest.raises(UsageError, match=r"no execution 'ghost'"):
        await rt.resume("ghost", "first", {})
    with pytest.raises(UsageError, match=r"execution 'e' has no gate 'nope' \(open gates: first\)"):
        await rt.resume("e", "nope", {})
    suspended = await rt.resume("e", "first", {"n": 1})
    assert [g.gate_id for g in suspended.gates] == ["second"]
    with pytest.raises(UsageError, match=r"gate 'first' of execution 'e' is already decided: answered"):
        await rt.resume("e", "first", {"n": 2})
    assert len(step_events(rt, "e", EventKind.GATE_RESOLVED)) == 1
    done = await rt.resume("e", "second", {"n": 3})
    assert done.output == {"n": 3}
    with pytest.raises(UsageError, match="already decided"):
        await rt.resume("e", "second", {})


async def test_several_gates_resolve_one_by_one_and_the_body_waits_for_the_last(rt: Engine) -> None:
    runs: list[int] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        runs.append(1)
        return await ctx.gates(
            [GateRequest(gate_id=g, kind="Approval", payload={"g": g}, schema=Approval) for g in ("a", "b", "c")]
        )

    result = await rt.start(body, None, execution_id="m")
    assert [g.gate_id for g in result.gates] == ["a", "b", "c"]
    assert step_events(rt, "m", EventKind.EXECUTION_SUSPENDED)[0].data == {"gates": ["a", "b", "c"]}
    r = await rt.resume("m", "b", {"approved": False, "reason": "no"})
    assert (r.status, [g.gate_id for g in r.gates]) == ("suspended", ["a", "c"])
    r = await rt.resume("m", "a", {"approved": True})
    assert (r.status, [g.gate_id for g in r.gates]) == ("suspended", ["c"])
    assert len(runs) == 1  # the body is not re-run while a gate is still open
    assert rt.journal.get_execution("m").status == "suspended"  # type: ignore[union-attr]
    r = await rt.resume("m", "c", {"approved": True, "reason": "fine"})
    assert r.status == "completed"
    assert r.output == [
        {"approved": True, "reason": None},
        {"approved": False, "reason": "no"},
        {"approved": True, "reason": "fine"},
    ]
    assert len(runs) == 2
    assert len(step_events(rt, "m", EventKind.GATE_OPENED)) == 3
    assert len(step_events(rt, "m", EventKind.EXECUTION_RESUMED)) == 1


async def test_suspend_is_a_base_exception_the_body_cannot_swallow() -> None:
    assert issubclass(Suspend, BaseException) and not issubclass(Suspend, Exception)
    rt = make_runtime()

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        try:
            await ctx.gate("g", "Approval")
        except Exception:
            return "swallowed"
        return "resumed"

    result = await rt.start(body, None, execution_id="s")
    assert result.status == "suspended"
    assert (await rt.resume("s", "g", None)).output == "resumed"


# -- failures ----------------------------------------------------------------------------------------
async def test_recorded_failures_are_re_raised_on_replay_without_re_invoking(rt: Engine, calls: Calls) -> None:

    def boom(value: Any) -> Any:
        raise ValueError(f"bad input {value}")

    register_recording(rt, calls, "flaky", boom)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        try:
            await ctx.execute("flaky", 42)
            caught = "nothing"
        except ValueError as exc:
            caught = f"{type(exc).__name__}: {exc}"
        await ctx.gate("g", "Approval")
        return caught

    suspended = await rt.start(body, None, execution_id="f")
    assert suspended.status == "suspended"
    (failed,) = step_events(rt, "f", EventKind.STEP_FAILED)
    assert failed.data["will_retry"] is False
    assert failed.data["error"]["type"] == "builtins:ValueError"
    assert failed.data["error"]["message"] == "bad input 42"
    done = await rt.resume("f", "g", {})
    assert done.output == "ValueError: bad input 42"
    assert len(calls.log) == 1
    assert (await rt.replay("f")).reproduced


async def test_an_uncaught_failure_fails_the_execution_with_the_error_journaled(rt: Engine) -> None:

    def boom(value: Any) -> Any:
        raise Custom("kaput")

    rt.effects.register("boom", boom)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("boom", None)

    result = await rt.start(body, None, execution_id="x")
    assert result.status == "failed" and result.error is not None
    assert result.error["message"] == "kaput"
    assert result.error["type"].endswith("Custom")
    assert str(result) == "execution x: failed (Custom: kaput)"
    assert rt.journal.get_execution("x").status == "failed"  # type: ignore[union-attr]
    assert (await rt.replay("x")).reproduced


# -- non-determinism -----------------------------------------------------------------------------------
async def _record_then_change(change: str) -> tuple[Engine, Calls]:
    rt, calls = make_runtime(), Calls()
    register_recording(rt, calls, "fetch")
    register_recording(rt, calls, "other")

    async def pipeline(ctx: ExecutionContext, inp: Any) -> Any:
        a = await ctx.execute("fetch", {"page": 1})
        await ctx.gate("g", "Approval")
        return a

    async def changed(ctx: ExecutionContext, inp: Any) -> Any:
        if change == "effect":
            a = await ctx.execute("other", {"page": 1})
        else:
            a = await ctx.execute("fetch", {"page": 2})
        await ctx.gate("g", "Approval")
        return a

    assert (await rt.start(pipeline, None, execution_id="run-7")).status == "suspended"
    rt.flows.register(changed, name="pipeline")  # the notebook cell was edited and re-run
    return rt, calls


async def test_a_different_effect_for_a_recorded_step_is_non_determinism() -> None:
    rt, calls = await _record_then_change("effect")
    with pytest.raises(NonDeterminismError) as info:
        await rt.resume("run-7", "g", {})
    message = str(info.value)
    assert "execution 'run-7'" in message and "step '#1'" in message
    assert "effect 'fetch' was recorded but 'other' was requested" in message
    assert "Fork the run or start a new one" in message
    assert [c[0] for c in calls.log] == ["fetch"]
    # nothing the body did was journaled as a step; the execution stays running for a fix
    assert len(step_events(rt, "run-7", EventKind.STEP_STARTED)) == 1
    assert rt.journal.get_execution("run-7").status == "running"  # type: ignore[union-attr]


async def test_a_different_input_for_a_recorded_step_is_non_determinism() -> None:
    rt, calls = await _record_then_change("input")
    recorded = rt.history("run-7").steps["#1"].input_digest()
    with pytest.raises(NonDeterminismError) as info:
        await rt.resume("run-7", "g", {})
    message = str(info.value)
    assert "execution 'run-7'" in message and "step '#1'" in message
    assert f"input digest {recorded} was recorded but sha256:" in message
    assert "Fork the run or start a new one" in message
    assert len(calls.log) == 1


async def test_different_decision_options_are_non_determinism(rt: Engine) -> None:
    offered = [["a", "b"]]

    async def chooser(ctx: ExecutionContext, inp: Any) -> Any:
        choice = await ctx.decide("route", offered[0], lambda o: o[0])
        await ctx.gate("g", "Approval")
        return choice

    await rt.start(chooser, None, execution_id="d")
    offered[0] = ["a", "c"]
    with pytest.raises(NonDeterminismError, match=r"execution 'd', decision 'route'.*fork the run"):
        await rt.resume("d", "g", {})


# -- step ids ----------------------------------------------------------------------------------------
async def test_counter_step_ids_and_explicit_ids(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")
    seen: list[str] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        seen.append(ctx.next_step_id())
        await ctx.execute("fx", 1)
        await ctx.execute("fx", 2, step_id="named")
        seen.append(ctx.next_step_id())
        await ctx.execute("fx", 3)
        await ctx.execute("fx", 4)
        return None

    await rt.start(body, None, execution_id="ids")
    assert [e.step_id for e in step_events(rt, "ids", EventKind.STEP_STARTED)] == ["#1", "named", "#2", "#3"]
    assert seen == ["#1", "#2"]
    assert [c[2] for c in calls.log] == ["ids:#1", "ids:named", "ids:#2", "ids:#3"]


async def test_record_keeps_another_input_in_the_journal(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("fx", {"huge": "x" * 50}, record={"delta": 1})

    await rt.start(body, None, execution_id="rec")
    assert calls.log[0][1] == {"huge": "x" * 50}
    assert step_events(rt, "rec", EventKind.STEP_STARTED)[0].data["input"] == {"delta": 1}


@pytest.mark.parametrize("second", ["step", "gate", "decision"])
async def test_an_id_used_twice_is_a_usage_error(second: str, rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("fx", 1, step_id="dup")
        if second == "step":
            await ctx.execute("fx", 2, step_id="dup")
        elif second == "gate":
            await ctx.gate("dup", "Approval")
        else:
            await ctx.decide("dup", [1, 2], lambda o: o[0])
        return "unreachable"

    # The kernel journals a UsageError raised in the body as the execution's failure.
    result = await rt.start(body, None, execution_id="u")
    assert result.status == "failed"
    error = result.exception()
    assert isinstance(error, UsageError)
    assert "the id 'dup' is used twice in execution 'u'" in str(error)
    assert len(calls.log) == 1
    assert kinds(rt.journal.read("u"))[-1] == "execution_failed"


# -- recorded values ------------------------------------------------------------------------------------
async def test_now_uuid_random_are_recorded_and_served_on_re_run(rt: Engine) -> None:
    draws: list[list[Any]] = []

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        values = [ctx.now(), ctx.uuid(), ctx.random()]
        draws.append(values)
        await ctx.gate("g", "Approval")
        return [*values, ctx.now()]

    await rt.start(body, None, execution_id="v")
    done = await rt.resume("v", "g", {})
    assert len(draws) == 2 and draws[0] == draws[1]
    t, uid, rnd = draws[0]
    assert isinstance(t, float) and uid == "exec-1" and 0.0 <= rnd < 1.0
    recorded = step_events(rt, "v", EventKind.VALUE_RECORDED)
    assert [(e.step_id, e.data["kind"]) for e in recorded] == [
        ("#value:1", "now"),
        ("#value:2", "uuid"),
        ("#value:3", "random"),
        ("#value:4", "now"),
    ]
    assert [e.data["value"] for e in recorded[:3]] == draws[0]
    assert done.output == [*draws[0], recorded[3].data["value"]]
    assert recorded[3].data["value"] > t  # the fake clock moved on: a fresh reading, recorded once


# -- decisions ----------------------------------------------------------------------------------------
async def test_decide_records_everything_and_does_not_call_the_policy_on_re_run(rt: Engine) -> None:
    policy_calls: list[list[Any]] = []

    def softmax_policy(options: Any) -> Decision:
        policy_calls.append(list(options))
        return Decision(choice="r", probabilities=[0.25, 0.75])

    async def async_policy(options: Any) -> Any:
        policy_calls.append(list(options))
        return options[0]

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        a = await ctx.decide("side", ["l", "r"], softmax_policy)
        b = await ctx.decide("tool", [{"id": 1}, {"id": 2}], async_policy)
        c = await ctx.decide("given", [1, 2, 3], lambda o: Decision(choice=3, propensity=0.5))
        await ctx.gate("g", "Approval")
        return [a, b, c]

    await rt.start(body, None, execution_id="d")
    assert len(policy_calls) == 2
    done = await rt.resume("d", "g", {})
    assert done.output == ["r", {"id": 1}, 3]
    assert len(policy_calls) == 2  # served on re-run
    recorded = {e.step_id: e.data for e in step_events(rt, "d", EventKind.DECISION_RECORDED)}
    assert recorded["side"] == {
        "options": ["l", "r"],
        "choice": "r",
        "probabilities": [0.25, 0.75],
        "propensity": 0.75,
        "policy": test_decide_records_everything_and_does_not_call_the_policy_on_re_run.__qualname__
        + ".<locals>.softmax_policy",
    }
    assert recorded["tool"]["choice"] == {"id": 1}
    assert recorded["tool"]["probabilities"] is None and recorded["tool"]["propensity"] is None
    assert recorded["given"]["propensity"] == 0.5
    assert len(recorded) == 3


# -- streams ---------------------------------------------------------------------------------------------
async def test_stream_is_journaled_once_and_not_re_emitted_on_re_run(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")
    seen: list[str] = []
    rt.observe(lambda e: seen.append(e.data["text"]) if e.kind == EventKind.STREAM_CHUNK else None)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        ctx.stream("before ")
        await ctx.execute("fx", 1)
        ctx.stream("between ", channel="thinking")
        await ctx.gate("g", "Approval")
        ctx.stream("after")
        return "ok"

    await rt.start(body, None, execution_id="s")
    await rt.resume("s", "g", {})
    chunks = step_events(rt, "s", EventKind.STREAM_CHUNK)
    assert [(e.data["channel"], e.data["text"]) for e in chunks] == [
        ("assistant", "before "),
        ("thinking", "between "),
        ("assistant", "after"),
    ]
    assert seen == ["before ", "between ", "after"]


async def test_stream_before_a_step_cut_in_flight_is_not_re_emitted_by_recover(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx", idempotent=True)

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("fx", 1)
        ctx.stream("once")
        return await ctx.execute("fx", 2)

    await rt.start(body, None, execution_id="s")
    events = rt.journal.read("s")
    cut = next(e.seq for e in events if e.kind == EventKind.STEP_STARTED and e.step_id == "#2")
    crashed = make_runtime(copy_prefix(events, cut), flows=rt.flows)
    crashed.effects = rt.effects
    (result,) = await crashed.recover()
    assert result.status == "completed"
    assert [e.data["text"] for e in step_events(crashed, "s", EventKind.STREAM_CHUNK)] == ["once"]


# -- sync wrappers ------------------------------------------------------------------------------------
def test_start_sync_works_without_a_loop(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval")

    assert rt.start_sync(body, 1, execution_id="x").status == "suspended"
    assert rt.resume_sync("x", "g", {"y": 2}).output == {"y": 2}
    assert rt.replay_sync("x").reproduced
    assert rt.recover_sync() == []


async def test_sync_wrappers_refuse_inside_a_running_loop_and_say_await(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return 1

    with pytest.raises(
        UsageError, match=r"start_sync\(\) cannot run inside a running event loop.*`await runtime.start"
    ):
        rt.start_sync(body, None)
    with pytest.raises(UsageError, match=r"await runtime.recover"):
        rt.recover_sync()
    assert rt.journal.list_executions() == []  # nothing ran (and no "never awaited" warning: warnings are errors)


# -- replay ---------------------------------------------------------------------------------------------
async def test_replay_of_a_completed_run_reproduces_and_runs_no_effect(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        a = await ctx.execute("fx", inp)
        c = await ctx.decide("pick", [1, 2], lambda o: o[1])
        g = await ctx.gate("g", "Approval", schema=Approval)
        return [a, c, g.approved, ctx.now(), ctx.random()]

    await rt.start(body, "in", execution_id="p")
    await rt.resume("p", "g", {"approved": True})
    n_events, n_calls = len(rt.journal.read("p")), len(calls.log)
    report = await rt.replay("p")
    assert (report.reproduced, report.recorded_status, report.replayed_status) == (
        True,
        "completed",
        "completed",
    )
    assert report.message == "reproduced"
    assert report.served == 5  # step, decision, gate, two values
    assert report.trace == (
        ("step", "#1"),
        ("decision", "pick"),
        ("gate", "g"),
        ("value", "#value:1"),
        ("value", "#value:2"),
    )
    assert len(calls.log) == n_calls and len(rt.journal.read("p")) == n_events


async def test_replay_of_a_suspended_run_reproduces(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval")

    await rt.start(body, None, execution_id="p")
    report = await rt.replay("p")
    assert (report.reproduced, report.replayed_status) == (True, "suspended")


async def test_replay_with_a_changed_flow_reports_not_reproduced_and_does_not_raise(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("fx", 1)

    async def changed_input(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("fx", 2)

    async def extra_step(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("fx", 1)
        return await ctx.execute("fx", 3)

    async def changed_output(ctx: ExecutionContext, inp: Any) -> Any:
        return [await ctx.execute("fx", 1)]

    await rt.start(body, None, execution_id="p")
    events = shape(rt.journal.read("p"))

    rt.flows.register(changed_input, name="body")
    report = await rt.replay("p")
    assert (report.reproduced, report.replayed_status) == (False, "diverged")
    assert "execution 'p', step '#1'" in report.message and "Fork the run" in report.message

    rt.flows.register(extra_step, name="body")
    report = await rt.replay("p")
    assert (report.reproduced, report.replayed_status) == (False, "diverged")
    assert "step '#2'" in report.message and "does not hold" in report.message

    rt.flows.register(changed_output, name="body")
    report = await rt.replay("p")
    assert (report.reproduced, report.replayed_status) == (False, "completed")
    assert report.message == "the replay's output differs from the recorded output"

    assert len(calls.log) == 1 and shape(rt.journal.read("p")) == events


# -- recover and the in-doubt path ----------------------------------------------------------------------
def _two_step_flow(rt: Engine) -> None:
    async def transfer(ctx: ExecutionContext, inp: Any) -> Any:
        quote = await ctx.execute("quote", {"amount": inp})
        receipt = await ctx.execute("pay", {"quote": quote})
        return {"quote": quote, "receipt": receipt}

    rt.flows.register(transfer)


async def _crashed_in_pay(*, pay_idempotent: bool) -> tuple[Engine, Calls, list[Event], int]:
    """Run ``transfer`` to completion, then build a journal cut right after ``pay``'s step_started,
    as a crash in flight leaves it; return a fresh runtime on it (a restarted kernel)."""
    calls = Calls()
    rt = make_runtime()
    _two_step_flow(rt)
    register_recording(rt, calls, "quote", lambda v: v["amount"] * 2, idempotent=True)
    register_recording(rt, calls, "pay", lambda v: f"paid {v['quote']}", idempotent=pay_idempotent)
    done = await rt.start("transfer", 5, execution_id="t")
    assert done.output == {"quote": 10, "receipt": "paid 10"}
    events = rt.journal.read("t")
    cut = next(e.seq for e in events if e.kind == EventKind.STEP_STARTED and e.step_id == "#2")
    restarted = make_runtime(copy_prefix(events, cut), flows=rt.flows)
    restarted.effects = rt.effects
    calls.log.clear()
    assert restarted.journal.get_execution("t").status == "running"  # type: ignore[union-attr]
    return restarted, calls, events[:cut], cut


async def test_recover_re_invokes_an_idempotent_step_with_the_same_key_and_next_attempt() -> None:
    rt, calls, prefix, cut = await _crashed_in_pay(pay_idempotent=True)
    (result,) = await rt.recover()
    assert result.output == {"quote": 10, "receipt": "paid 10"}
    assert calls.log == [("pay", {"quote": 10}, "t:#2", 2)]
    events = rt.journal.read("t")
    assert shape(events[:cut]) == shape(prefix)
    assert kinds(events[cut:]) == ["step_started", "step_completed", "execution_completed"]
    assert events[cut].data == {"effect": "pay", "input": {"quote": 10}, "attempt": 2}  # key t:#2: derived
    assert await rt.recover() == []  # nothing left running


async def test_recover_parks_a_non_idempotent_step_on_an_in_doubt_gate() -> None:
    rt, calls, prefix, cut = await _crashed_in_pay(pay_idempotent=False)
    (result,) = await rt.recover()
    assert result.status == "suspended"
    (gate,) = result.gates
    assert (gate.gate_id, gate.kind) == ("#2:in_doubt", "InDoubt")
    assert gate.payload == {"effect": "pay", "step_id": "#2", "input": {"quote": 10}, "attempt": 1}
    assert calls.log == []
    events = rt.journal.read("t")
    assert shape(events[:cut]) == shape(prefix)
    assert kinds(events[cut:]) == ["step_in_doubt", "gate_opened", "execution_suspended"]
    assert events[cut].data == {"effect": "pay", "attempt": 1}
    assert [g.gate_id for g in rt.open_gates()] == ["#2:in_doubt"]
    assert await rt.recover() == []  # suspended, not running: recover leaves it parked
    with pytest.raises(ResumeValidationError):
        await rt.resume("t", "#2:in_doubt", {"action": "maybe"})
    assert len(rt.journal.read("t")) == len(events)


@pytest.fixture
async def parked() -> tuple[Engine, Calls, int]:
    """A run cut in flight in its non-idempotent ``pay`` step (``#2``), recovered onto the
    ``#2:in_doubt`` gate: the runtime, the invocations (none since the crash) and the cut's seq."""
    rt, calls, _, cut = await _crashed_in_pay(pay_idempotent=False)
    await rt.recover()
    return rt, calls, cut


async def test_in_doubt_resolved_as_happened_records_the_given_output(parked: tuple[Engine, Calls, int]) -> None:
    rt, calls, cut = parked
    done = await rt.resume("t", "#2:in_doubt", {"action": "happened", "output": "paid by hand", "reason": "bank"})
    assert done.output == {"quote": 10, "receipt": "paid by hand"}
    assert calls.log == []
    events = rt.journal.read("t")
    assert kinds(events[cut + 3 :]) == [
        "gate_resolved",
        "execution_resumed",
        "step_completed",
        "execution_completed",
    ]
    completed = events[cut + 5]
    assert (completed.step_id, completed.data) == (
        "#2",
        {"output": "paid by hand", "resolved_by": "#2:in_doubt"},  # effect and attempt: on step_started
    )
    assert (await rt.replay("t")).reproduced


async def test_in_doubt_resolved_as_run_again_invokes_with_the_same_key(parked: tuple[Engine, Calls, int]) -> None:
    rt, calls, cut = parked
    done = await rt.resume("t", "#2:in_doubt", {"action": "run_again"})
    assert done.output == {"quote": 10, "receipt": "paid 10"}
    assert calls.log == [("pay", {"quote": 10}, "t:#2", 2)]
    events = rt.journal.read("t")
    assert kinds(events[cut + 3 :]) == [
        "gate_resolved",
        "execution_resumed",
        "step_started",
        "step_completed",
        "execution_completed",
    ]
    assert events[cut + 5].data["attempt"] == 2
    assert (await rt.replay("t")).reproduced


async def test_in_doubt_resolved_as_fail_fails_the_step_with_in_doubt_error(parked: tuple[Engine, Calls, int]) -> None:
    rt, calls, cut = parked
    failed = await rt.resume("t", "#2:in_doubt", {"action": "fail", "reason": "bank says no"})
    assert failed.status == "failed"
    error = failed.exception()
    assert isinstance(error, InDoubtError)
    assert "step '#2' (effect 'pay') of execution 't' was cut in flight" in str(error)
    assert "bank says no" in str(error)
    assert calls.log == []
    events = rt.journal.read("t")
    assert kinds(events[cut + 3 :]) == [
        "gate_resolved",
        "execution_resumed",
        "step_failed",
        "execution_failed",
    ]
    assert events[cut + 5].data["will_retry"] is False
    assert events[cut + 5].data["error"]["type"] == "loom_nb.errors:InDoubtError"
    assert (await rt.replay("t")).reproduced


async def test_recover_skips_executions_that_are_not_running(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval")

    await rt.start(body, None, execution_id="parked")
    assert await rt.recover() == []


async def test_recover_of_a_run_cut_before_its_first_step_runs_it(rt: Engine, calls: Calls) -> None:
    register_recording(rt, calls, "fx")

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.execute("fx", inp)

    journal = InMemoryJournal()
    journal.append(
        [
            Event(
                "c",
                1,
                EventKind.EXECUTION_STARTED,
                None,
                1.0,
                {"flow": "body", "input": 3, "principal": {"name": "anonymous", "scopes": []}},
            )
        ]
    )
    rt.flows.register(body)
    restarted = make_runtime(journal, flows=rt.flows)
    restarted.effects = rt.effects
    (result,) = await restarted.recover()
    assert result.output == {"effect": "fx", "input": 3}
    assert calls.log == [("fx", 3, "c:#1", 1)]


async def test_concurrent_resumes_of_one_gate_record_one_resolution(rt: Engine) -> None:

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        return await ctx.gate("g", "Approval")

    await rt.start(body, None, execution_id="c")
    results = await asyncio.gather(rt.resume("c", "g", {"n": 1}), rt.resume("c", "g", {"n": 2}), return_exceptions=True)
    outcomes = sorted(type(r).__name__ for r in results)
    assert outcomes == ["ExecutionResult", "UsageError"]
    assert len(step_events(rt, "c", EventKind.GATE_RESOLVED)) == 1


async def test_recover_goes_on_past_an_execution_whose_flow_is_missing() -> None:
    journal = InMemoryJournal()
    first = make_runtime(journal)

    async def needs_x(ctx: ExecutionContext, value: Any) -> Any:
        return await ctx.execute("x", value, step_id="only")

    first.flows.register(needs_x, "needs_x")
    first.flows.register(needs_x, "also_needs_x")
    first.effects.register("x", lambda v: v, idempotent=True)
    # two executions a crash left running before their step: only execution_started is in the log
    for eid, flow_name in (("a", "needs_x"), ("b", "also_needs_x")):
        journal.append([Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": flow_name, "input": eid})])

    later = make_runtime(journal)  # a new process: only one of the two flows is defined again
    later.flows.register(needs_x, "also_needs_x")
    later.effects.register("x", lambda v: v, idempotent=True)
    results = {r.execution_id: r for r in await later.recover()}
    assert results["b"].status == "completed" and results["b"].output == "b"
    assert results["a"].status == "running"
    assert results["a"].error is not None and "needs_x" in results["a"].error["message"]
    assert journal.get_execution("a").status == "running"  # type: ignore[union-attr]
