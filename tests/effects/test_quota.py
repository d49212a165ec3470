"""Quotas and metering (``loom_nb.effects.quota``): per-execution, per-principal and per-effect call,
token and cost limits, usage recorded on ``step_completed``, limits that still hold in a new runtime
over the same journal, and replayed steps that are not metered again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.effects import Quota, RetryPolicy
from loom_nb.effects.quota import UsageTotals, usage_of
from loom_nb.errors import NotAuthorizedError, QuotaExceededError
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.kernel import EffectResult, FlowRegistry, Principal
from loom_nb.messages import Message, ModelRequest, ModelResponse
from loom_nb.runtime import Runtime
from loom_nb.testing import FakeClock, SequentialIds
from tests.effects.support import Flow, counting, error_type, make, model_response, of_kind, one_step, step_events
from tests.journal.support import kinds


async def test_a_per_execution_calls_limit_refuses_the_next_call_before_it_runs() -> None:
    calls: list[Any] = []
    rt = make(quota=Quota(calls=2))
    rt.effects.register("tick", counting(calls))

    async def flow(ctx: Any, _: Any) -> None:
        for i in range(3):
            await ctx.execute("tick", i)

    result = await rt.start(flow, None)
    assert result.status == "failed"
    assert calls == [0, 1]
    error = result.exception()
    assert isinstance(error, QuotaExceededError)
    message = str(error)
    assert "quota calls of execution 'exec-1' exceeded" in message
    assert "limit 2, used 2, asked 1 more call" in message
    assert "Quota(calls=...)" in message
    assert kinds(step_events(rt, "exec-1", "#3")) == ["step_started", "step_failed"]
    assert error_type(step_events(rt, "exec-1", "#3")[-1].data) == "QuotaExceededError"
    assert len(of_kind(rt, "exec-1", EventKind.STEP_COMPLETED)) == 2


async def test_each_execution_has_its_own_calls_quota() -> None:
    calls: list[Any] = []
    rt = make(quota=Quota(calls=1))
    rt.effects.register("tick", counting(calls))
    first = await rt.start(one_step("tick", "a"), None)
    second = await rt.start(one_step("tick", "b"), None)
    assert (first.status, second.status, calls) == ("completed", "completed", ["a", "b"])


async def test_a_per_principal_quota_spans_executions_of_that_principal() -> None:
    calls: list[Any] = []
    rt = make(principal_quota=Quota(calls=2))
    rt.effects.register("tick", counting(calls))
    bob = Principal.of("bob")
    results = [await rt.start(one_step("tick", i), None, principal=bob) for i in range(3)]
    alice = await rt.start(one_step("tick", "alice"), None, principal=Principal.of("alice"))
    assert [r.status for r in results] == ["completed", "completed", "failed"]
    assert "quota calls of principal 'bob' exceeded: limit 2, used 2" in str(results[2].exception())
    assert alice.status == "completed"
    assert calls == [0, 1, "alice"]


async def test_a_per_effect_quota_limits_that_effect_only(rt: Runtime) -> None:
    calls: list[Any] = []
    rt.effects.register("expensive", counting(calls), quota=Quota(calls=1))
    rt.effects.register("cheap", counting(calls))

    async def flow(ctx: Any, _: Any) -> None:
        await ctx.execute("expensive", 1)
        await ctx.execute("cheap", 2)
        await ctx.execute("cheap", 3)
        await ctx.execute("expensive", 4)

    result = await rt.start(flow, None)
    assert result.status == "failed"
    assert calls == [1, 2, 3]
    assert "quota calls of effect 'expensive' in execution 'exec-1' exceeded: limit 1, used 1" in str(
        result.exception()
    )


async def test_token_usage_of_a_model_effect_is_recorded_on_step_completed_and_totalled(rt: Runtime) -> None:
    rt.effects.register("model.fake", lambda req: model_response(cost=0.25), kind="model")

    async def flow(ctx: Any, _: Any) -> str:
        request = ModelRequest(messages=(Message.user("hi"),))
        first = await ctx.execute("model.fake", request)
        await ctx.execute("model.fake", request)
        return str(first["message"]["text"])

    result = await rt.start(flow, None)
    assert (result.status, result.output) == ("completed", "done")
    completed = of_kind(rt, result.execution_id, EventKind.STEP_COMPLETED)
    assert all("usage" not in e.data for e in completed)  # event format 2: it is the output's usage
    assert [s.usage for s in rt.history(result.execution_id).steps.values()] == [
        {"calls": 1, "input_tokens": 60, "output_tokens": 30, "cost": 0.25}
    ] * 2
    totals = rt.usage(result.execution_id)
    assert totals.as_dict() == {"calls": 2, "input_tokens": 120, "output_tokens": 60, "cost": 0.5}


async def test_an_effect_without_usage_counts_one_call_and_records_no_usage(rt: Runtime) -> None:
    rt.effects.register("plain", lambda x: {"value": x})
    result = await rt.start(one_step("plain", 1), None)
    (completed,) = of_kind(rt, result.execution_id, EventKind.STEP_COMPLETED)
    assert "usage" not in completed.data
    assert rt.usage(result.execution_id).as_dict() == {
        "calls": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost": 0.0,
    }


@pytest.mark.parametrize(
    ("quota", "name", "used"),
    [
        (Quota(tokens=100), "tokens", 180),
        (Quota(input_tokens=100), "input_tokens", 120),
        (Quota(output_tokens=50), "output_tokens", 60),
        (Quota(cost=0.4), "cost", 0.5),
    ],
)
async def test_token_and_cost_limits_refuse_a_call_once_the_used_amount_reaches_them(
    quota: Quota, name: str, used: float
) -> None:
    calls: list[Any] = []

    def model(request: ModelRequest) -> ModelResponse:
        calls.append(request)
        return model_response(cost=0.25)

    rt = make(quota=quota)
    rt.effects.register("model.fake", model, kind="model")

    async def flow(ctx: Any, _: Any) -> None:
        for _i in range(3):
            await ctx.execute("model.fake", ModelRequest(messages=(Message.user("hi"),)))

    result = await rt.start(flow, None)
    assert result.status == "failed"
    assert len(calls) == 2  # the third is refused before it runs
    message = str(result.exception())
    limit = getattr(quota, name)
    assert f"quota {name} of execution 'exec-1' exceeded: limit {limit:g}, used {used:g}" in message
    assert "asked another call" in message
    assert f"Quota({name}=...)" in message
    assert error_type(step_events(rt, "exec-1", "#3")[-1].data) == "QuotaExceededError"


async def test_usage_an_effect_reports_in_its_effect_result_counts_against_token_limits() -> None:
    calls: list[Any] = []

    def effect(value: Any) -> EffectResult:
        calls.append(value)
        return EffectResult(output={"ok": value}, usage={"input_tokens": 80, "output_tokens": 30})

    rt = make(quota=Quota(tokens=100))
    rt.effects.register("llm.raw", effect)

    async def flow(ctx: Any, _: Any) -> None:
        await ctx.execute("llm.raw", 1)
        await ctx.execute("llm.raw", 2)

    result = await rt.start(flow, None)
    assert calls == [1]
    assert result.status == "failed"
    assert "quota tokens of execution 'exec-1' exceeded: limit 100, used 110" in str(result.exception())
    (completed,) = of_kind(rt, "exec-1", EventKind.STEP_COMPLETED)
    assert completed.data["usage"] == {"input_tokens": 80, "output_tokens": 30}
    assert rt.usage("exec-1").as_dict()["input_tokens"] == 80


async def test_a_call_refused_by_authorization_does_not_use_quota() -> None:
    calls: list[Any] = []
    rt = make(quota=Quota(calls=1), principal=Principal.of("ops", ["read"]))
    rt.effects.register("admin", counting(calls), scopes=["admin"])
    rt.effects.register("read", counting(calls), scopes=["read"])

    async def flow(ctx: Any, _: Any) -> str:
        with pytest.raises(NotAuthorizedError):
            await ctx.execute("admin", 1)
        return str(await ctx.execute("read", 2))

    result = await rt.start(flow, None)
    assert (result.status, calls) == ("completed", [2])
    assert rt.usage(result.execution_id).calls == 1


async def test_a_quota_refusal_is_not_retried() -> None:
    calls: list[Any] = []
    rt = make(quota=Quota(calls=1), default_retry=RetryPolicy(attempts=5, jitter=0, retryable=lambda e: True))
    rt.effects.register("tick", counting(calls))

    async def flow(ctx: Any, _: Any) -> None:
        await ctx.execute("tick", 1)
        await ctx.execute("tick", 2)

    result = await rt.start(flow, None)
    assert isinstance(result.exception(), QuotaExceededError)
    assert calls == [1]
    assert kinds(step_events(rt, "exec-1", "#2")) == ["step_started", "step_failed"]
    assert isinstance(rt.clock, FakeClock) and rt.clock.slept == []


def quota_flow(flows: FlowRegistry) -> Flow:
    async def metered(ctx: Any, _: Any) -> None:
        await ctx.execute("tick", 1)
        await ctx.execute("tick", 2)
        await ctx.gate("more", "Approval")
        await ctx.execute("tick", 3)

    flows.register(metered)
    return metered


async def test_the_calls_limit_still_holds_in_a_new_runtime_over_the_same_journal() -> None:
    flows = FlowRegistry()
    journal = InMemoryJournal()
    calls: list[Any] = []
    flow = quota_flow(flows)
    first = make(journal, flows=flows, quota=Quota(calls=2))
    first.effects.register("tick", counting(calls))
    suspended = await first.start(flow, None)
    assert suspended.status == "suspended"

    second = make(journal, flows=flows, quota=Quota(calls=2))
    second.effects.register("tick", counting(calls))
    assert second.usage(suspended.execution_id).calls == 2
    result = await second.resume(suspended.execution_id, "more", None)
    assert result.status == "failed"
    assert "limit 2, used 2, asked 1 more call" in str(result.exception())
    assert calls == [1, 2]


async def test_the_calls_limit_still_holds_after_re_opening_a_duckdb_journal(tmp_path: Path) -> None:
    flows = FlowRegistry()
    path = tmp_path / "loom.duckdb"
    calls: list[Any] = []
    flow = quota_flow(flows)
    options: dict[str, Any] = {"ids": SequentialIds(), "flows": flows, "quota": Quota(calls=2)}
    with Runtime.open(path, clock=FakeClock(), **options) as first:
        first.effects.register("tick", counting(calls))
        suspended = await first.start(flow, None)
    assert suspended.status == "suspended"

    with Runtime.open(path, clock=FakeClock(), **options) as second:
        second.effects.register("tick", counting(calls))
        result = await second.resume(suspended.execution_id, "more", None)
        assert result.status == "failed"
        assert "quota calls of execution 'exec-1' exceeded: limit 2, used 2" in str(result.exception())
    assert calls == [1, 2]


async def test_the_token_limit_still_holds_after_re_opening() -> None:
    flows = FlowRegistry()
    journal = InMemoryJournal()
    calls: list[Any] = []

    def model(request: ModelRequest) -> ModelResponse:
        calls.append(request)
        return model_response(inp=70, out=40)

    async def chat(ctx: Any, _: Any) -> None:
        request = ModelRequest(messages=(Message.user("hi"),))
        await ctx.execute("model.fake", request)
        await ctx.gate("more", "Approval")
        await ctx.execute("model.fake", request)

    flows.register(chat)
    first = make(journal, flows=flows, quota=Quota(tokens=100))
    first.effects.register("model.fake", model, kind="model")
    suspended = await first.start(chat, None)

    second = make(journal, flows=flows, quota=Quota(tokens=100))
    second.effects.register("model.fake", model, kind="model")
    result = await second.resume(suspended.execution_id, "more", None)
    assert result.status == "failed"
    assert "quota tokens of execution 'exec-1' exceeded: limit 100, used 110" in str(result.exception())
    assert len(calls) == 1


async def test_a_per_effect_limit_still_holds_in_a_new_runtime_over_the_same_journal() -> None:
    flows = FlowRegistry()
    journal = InMemoryJournal()
    calls: list[Any] = []
    flow = quota_flow(flows)
    first = make(journal, flows=flows)
    first.effects.register("tick", counting(calls), quota=Quota(calls=2))
    suspended = await first.start(flow, None)

    second = make(journal, flows=flows)
    second.effects.register("tick", counting(calls), quota=Quota(calls=2))
    result = await second.resume(suspended.execution_id, "more", None)
    assert result.status == "failed"
    assert "quota calls of effect 'tick' in execution 'exec-1' exceeded: limit 2, used 2" in str(result.exception())
    assert calls == [1, 2]


async def test_replayed_steps_are_not_metered_again() -> None:
    calls: list[Any] = []
    flows = FlowRegistry()
    flow = quota_flow(flows)
    rt = make(flows=flows, quota=Quota(calls=3))
    rt.effects.register("tick", counting(calls))
    suspended = await rt.start(flow, None)
    result = await rt.resume(suspended.execution_id, "more", None)  # the body re-runs from the top
    assert (result.status, calls) == ("completed", [1, 2, 3])
    assert rt.usage(result.execution_id).calls == 3


@settings(max_examples=200, deadline=None)
@given(
    calls=st.integers(0, 10**6),
    inp=st.integers(0, 10**6),
    out=st.integers(0, 10**6),
    cost=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    output=st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
)
def test_counting_a_call_without_usage_is_adding_one_call(
    calls: int, inp: int, out: int, cost: float, output: Any
) -> None:
    fast = UsageTotals(calls=calls, input_tokens=inp, output_tokens=out, cost=cost)
    slow = UsageTotals(calls=calls, input_tokens=inp, output_tokens=out, cost=cost)
    fast.add_call()
    slow.add({"calls": 1})
    assert fast.as_dict() == slow.as_dict()
    assert [type(v) for v in fast.as_dict().values()] == [type(v) for v in slow.as_dict().values()]
    assert usage_of(output) is None  # a plain output carries no usage (the fast path's answer)
