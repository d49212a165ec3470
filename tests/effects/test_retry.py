"""Retry (``loom_nb.effects.retry``): every attempt journaled, delays waited on the fake clock (never on
the wall clock), ``Retry-After`` honoured, retries exhausted on replay too, and recovery that continues
the attempt count with the same idempotency key."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from loom_nb.effects import RetryPolicy
from loom_nb.errors import ProviderHTTPError, RetriesExhaustedError
from loom_nb.journal import Event, EventKind, InMemoryJournal
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.runtime import Runtime
from loom_nb.testing import FakeClock
from tests.effects.support import error_type, make, of_kind, one_step, step_events
from tests.journal.support import attempts_of, copy_prefix, kinds


def flaky(errors: list[BaseException], seen: list[int], output: Any = "ok") -> Callable[..., Any]:
    """An effect raising ``errors`` one per attempt, then returning ``output``; logs attempts."""
    keys: set[str] = set()

    def effect(value: Any, info: EffectContext) -> Any:
        seen.append(info.attempt)
        keys.add(info.idempotency_key)
        assert len(keys) == 1, "the idempotency key changed between attempts"
        if errors:
            raise errors.pop(0)
        return output

    return effect


def http(status: int, retry_after: float | None = None) -> ProviderHTTPError:
    return ProviderHTTPError(f"HTTP {status}", status_code=status, body="{}", retry_after=retry_after)


async def test_retry_journals_every_attempt_and_waits_on_the_fake_clock() -> None:
    seen: list[int] = []
    clock = FakeClock()
    rt = make(clock=clock)
    policy = RetryPolicy(attempts=4, initial=1.5, multiplier=2.0, jitter=0)
    rt.effects.register("fetch", flaky([http(500), http(503)], seen), retry=policy)

    began = time.perf_counter()
    result = await rt.start(one_step("fetch"), None)
    assert time.perf_counter() - began < 1.0
    assert (result.status, result.output) == ("completed", "ok")
    assert seen == [1, 2, 3]
    assert clock.slept == [1.5, 3.0]
    events = step_events(rt, result.execution_id, "#1")
    assert [(e.kind, a) for e, a in zip(events, attempts_of(events), strict=True)] == [
        ("step_started", 1),
        ("step_failed", 1),
        ("step_started", 2),
        ("step_failed", 2),
        ("step_started", 3),
        ("step_completed", 3),
    ]
    failed = [e.data for e in events if e.kind == EventKind.STEP_FAILED]
    assert [(d["will_retry"], d["delay"], d["error"]["attrs"]["status_code"]) for d in failed] == [
        (True, 1.5, 500),
        (True, 3.0, 503),
    ]
    assert all("idempotency_key" not in e.data for e in events)  # event format 2: <execution_id>:<step_id>


async def test_the_failed_attempt_is_journaled_before_the_wait_and_the_next_after_it() -> None:
    clock = FakeClock(start=1000.0)
    rt = make(clock=clock)
    rt.effects.register("fetch", flaky([http(502)], []), retry=RetryPolicy(attempts=2, initial=10, jitter=0))
    result = await rt.start(one_step("fetch"), None)
    events = step_events(rt, result.execution_id, "#1")
    assert [(e.kind, e.at) for e in events] == [
        ("step_started", 1000.0),
        ("step_failed", 1000.0),  # committed before the backoff: a crash while waiting is not "in doubt"
        ("step_started", 1010.0),
        ("step_completed", 1010.0),
    ]


async def test_retry_honours_a_429_retry_after_longer_than_the_backoff() -> None:
    seen: list[int] = []
    clock = FakeClock()
    rt = make(clock=clock)
    policy = RetryPolicy(attempts=3, initial=1.0, jitter=0)
    rt.effects.register(
        "model.fake", flaky([http(429, retry_after=42.0), http(429, retry_after=0.5)], seen), retry=policy, kind="model"
    )
    result = await rt.start(one_step("model.fake", {"messages": [{"role": "user", "text": "hi"}]}), None)
    assert result.status == "completed"
    assert clock.slept == [42.0, 2.0]  # retry_after wins only when longer than the backoff
    delays = [e.data["delay"] for e in of_kind(rt, result.execution_id, EventKind.STEP_FAILED)]
    assert delays == [42.0, 2.0]


def test_retry_policy_delays_cap_at_max_delay_and_apply_jitter_from_its_rng() -> None:
    error = RuntimeError("x")
    policy = RetryPolicy(initial=1.0, multiplier=10.0, max_delay=50.0, jitter=0)
    assert [policy.delay(k, error) for k in (1, 2, 3, 4)] == [1.0, 10.0, 50.0, 50.0]
    high = RetryPolicy(initial=2.0, jitter=0.5, rng=lambda: 1.0)
    low = RetryPolicy(initial=2.0, jitter=0.5, rng=lambda: 0.0)
    assert (high.delay(1, error), low.delay(1, error)) == (3.0, 1.0)


async def test_the_default_retry_policy_applies_to_effects_registered_without_one() -> None:
    seen: list[int] = []
    clock = FakeClock()
    rt = make(clock=clock, default_retry=RetryPolicy(attempts=2, initial=0.25, jitter=0))
    rt.effects.register("fetch", flaky([TimeoutError("slow")], seen))
    result = await rt.start(one_step("fetch"), None)
    assert (result.status, seen, clock.slept) == ("completed", [1, 2], [0.25])


async def test_without_a_policy_a_retryable_error_fails_the_step_at_once(rt: Runtime) -> None:
    seen: list[int] = []
    rt.effects.register("fetch", flaky([http(503)], seen))
    result = await rt.start(one_step("fetch"), None)
    assert (result.status, seen) == ("failed", [1])
    assert isinstance(result.exception(), ProviderHTTPError)


@pytest.mark.parametrize("error", [ValueError("bad input"), http(400), http(401)])
async def test_a_non_retryable_error_is_not_retried(error: BaseException) -> None:
    seen: list[int] = []
    clock = FakeClock()
    rt = make(clock=clock)
    rt.effects.register("fetch", flaky([error], seen), retry=RetryPolicy(attempts=5, jitter=0))
    result = await rt.start(one_step("fetch"), None)
    assert result.status == "failed"
    assert type(result.exception()) is type(error)
    assert seen == [1]
    assert clock.slept == []
    events = step_events(rt, result.execution_id, "#1")
    assert kinds(events) == ["step_started", "step_failed"]
    assert events[-1].data["will_retry"] is False


async def test_a_custom_retryable_predicate_decides(rt: Runtime) -> None:
    seen: list[int] = []
    policy = RetryPolicy(attempts=3, initial=1, jitter=0, retryable=lambda e: isinstance(e, KeyError))
    rt.effects.register("lookup", flaky([KeyError("k"), KeyError("k")], seen), retry=policy)
    assert (await rt.start(one_step("lookup"), None)).status == "completed"
    assert seen == [1, 2, 3]


async def test_exhausted_retries_raise_retries_exhausted_caused_by_the_last_error_also_on_replay() -> None:
    seen: list[int] = []
    caught: list[BaseException] = []
    clock = FakeClock()
    rt = make(clock=clock)
    policy = RetryPolicy(attempts=3, initial=1.0, jitter=0)
    rt.effects.register("fetch", flaky([http(500), http(502), http(503)], seen), retry=policy)

    async def flow(ctx: Any, _: Any) -> str:
        try:
            await ctx.execute("fetch", "q", step_id="fetch")
        except RetriesExhaustedError as exc:
            caught.append(exc)
            await ctx.gate("ack", "Ack")
            return "gave up"
        return "fetched"

    result = await rt.start(flow, None)
    assert result.status == "suspended"
    assert seen == [1, 2, 3]
    assert clock.slept == [1.0, 2.0]
    live = caught[-1]
    assert "effect 'fetch' (step 'fetch' of execution 'exec-1') failed 3 attempts" in str(live)
    assert "the last: ProviderHTTPError: HTTP 503" in str(live)
    assert isinstance(live.__cause__, ProviderHTTPError) and live.__cause__.status_code == 503

    events = step_events(rt, "exec-1", "fetch")
    assert [(e.kind, a, e.data.get("will_retry")) for e, a in zip(events, attempts_of(events), strict=True)] == [
        ("step_started", 1, None),
        ("step_failed", 1, True),
        ("step_started", 2, None),
        ("step_failed", 2, True),
        ("step_started", 3, None),
        ("step_failed", 3, False),
    ]
    final = events[-1].data["error"]
    assert error_type(events[-1].data) == "RetriesExhaustedError"
    assert final["cause"]["attrs"]["status_code"] == 503

    done = await rt.resume("exec-1", "ack", None)  # the body re-runs; the step is served from the log
    assert (done.status, done.output) == ("completed", "gave up")
    assert seen == [1, 2, 3]
    replayed = caught[-1]
    assert replayed is not live
    assert isinstance(replayed, RetriesExhaustedError)
    assert str(replayed) == str(live)
    assert isinstance(replayed.__cause__, ProviderHTTPError)
    assert replayed.__cause__.status_code == 503
    assert replayed.__cause__.retry_after is None
    report = await rt.replay("exec-1")
    assert report.reproduced, report.message
    assert isinstance(caught[-1], RetriesExhaustedError)
    assert isinstance(caught[-1].__cause__, ProviderHTTPError)


async def retry_journal(*, idempotent: bool) -> tuple[list[Event], FlowRegistry]:
    """The events of a run whose step ``fetch`` failed once, was retried, and completed on attempt 3."""
    flows = FlowRegistry()

    async def fetcher(ctx: Any, _: Any) -> Any:
        return await ctx.execute("fetch", "q", step_id="fetch")

    flows.register(fetcher)
    rt = make(flows=flows)
    policy = RetryPolicy(attempts=3, initial=1.0, jitter=0)
    rt.effects.register("fetch", flaky([http(500), http(500)], []), retry=policy, idempotent=idempotent)
    assert (await rt.start(fetcher, None)).status == "completed"
    return rt.journal.read("exec-1"), flows


def cut_at_attempt(events: list[Event], attempt: int) -> InMemoryJournal:
    """A journal as a crash during attempt ``attempt`` (its ``step_started`` committed) leaves it."""
    (started,) = [e for e in events if e.kind == EventKind.STEP_STARTED and e.data.get("attempt", 1) == attempt]
    return copy_prefix(events, started.seq)


async def test_recovery_of_an_idempotent_effect_continues_the_attempt_count_with_the_same_key() -> None:
    events, flows = await retry_journal(idempotent=True)
    journal = cut_at_attempt(events, 2)
    assert [e.kind for e in journal.read("exec-1")][-3:] == ["step_started", "step_failed", "step_started"]

    seen: list[tuple[int, str]] = []

    def fetch(value: Any, info: EffectContext) -> str:
        seen.append((info.attempt, info.idempotency_key))
        return "fetched"

    clock = FakeClock()
    rt = make(journal, flows=flows, clock=clock)
    rt.effects.register("fetch", fetch, idempotent=True, retry=RetryPolicy(attempts=3, initial=1.0, jitter=0))
    (result,) = await rt.recover()
    assert (result.status, result.output) == ("completed", "fetched")
    assert seen == [(3, "exec-1:fetch")]
    assert clock.slept == []
    tail = step_events(rt, "exec-1", "fetch")[-2:]
    assert [(e.kind, a) for e, a in zip(tail, attempts_of(tail), strict=True)] == [
        ("step_started", 3),
        ("step_completed", 3),
    ]
    assert "idempotency_key" not in tail[0].data  # event format 2: always <execution_id>:<step_id>
    assert of_kind(rt, "exec-1", EventKind.STEP_IN_DOUBT) == []


async def test_recovery_counts_the_cut_attempts_toward_the_retry_limit() -> None:
    events, flows = await retry_journal(idempotent=True)
    journal = cut_at_attempt(events, 2)
    seen: list[int] = []
    rt = make(journal, flows=flows)
    rt.effects.register(
        "fetch", flaky([http(500)], seen), idempotent=True, retry=RetryPolicy(attempts=3, initial=1.0, jitter=0)
    )
    (result,) = await rt.recover()
    assert seen == [3]
    error = result.exception()
    assert isinstance(error, RetriesExhaustedError)
    assert "failed 3 attempts" in str(error)


async def test_recovery_of_a_non_idempotent_effect_cut_during_a_retry_is_in_doubt() -> None:
    events, flows = await retry_journal(idempotent=False)
    journal = cut_at_attempt(events, 2)
    seen: list[int] = []
    rt = make(journal, flows=flows)
    rt.effects.register("fetch", flaky([], seen), retry=RetryPolicy(attempts=3, jitter=0))
    (result,) = await rt.recover()
    assert result.status == "suspended"
    assert [(g.gate_id, g.kind) for g in result.gates] == [("fetch:in_doubt", "InDoubt")]
    assert result.gates[0].payload["attempt"] == 2
    assert seen == []
    (in_doubt,) = of_kind(rt, "exec-1", EventKind.STEP_IN_DOUBT)
    assert in_doubt.data == {"effect": "fetch", "attempt": 2}


async def test_long_backoffs_cost_no_wall_time_on_the_fake_clock() -> None:
    seen: list[int] = []
    clock = FakeClock()
    rt = make(clock=clock)
    policy = RetryPolicy(attempts=6, initial=60.0, multiplier=3.0, max_delay=3600.0, jitter=0)
    rt.effects.register("fetch", flaky([http(503)] * 5, seen), retry=policy)
    began = time.perf_counter()
    result = await rt.start(one_step("fetch"), None)
    assert time.perf_counter() - began < 0.5
    assert result.status == "completed"
    assert clock.slept == [60.0, 180.0, 540.0, 1620.0, 3600.0]


async def test_event_format_2_keeps_the_text_of_a_failed_attempt_and_holds_the_next_ones() -> None:
    """A retried step's first attempt streamed text no output holds: it is journaled before its
    step_failed. The attempt that completes streams again; its output holds that text."""
    rt = make(clock=FakeClock())
    attempts: list[int] = []

    def talk(value: Any, info: EffectContext) -> Any:
        attempts.append(info.attempt)
        info.emit_delta(f"attempt {info.attempt} says hi. ")
        if info.attempt == 1:
            raise http(503)
        return {"text": "done"}

    rt.effects.register("talk", talk, retry=RetryPolicy(attempts=2, initial=1.0, jitter=0), idempotent=True)

    async def body(ctx: Any, _: Any) -> Any:
        return await ctx.execute("talk", None, step_id="s", on_delta=lambda t: ctx.stream(t, step_id="s"))

    result = await rt.start(body, None)
    assert (result.status, attempts) == ("completed", [1, 2])
    events = rt.journal.read(result.execution_id)
    chunks = [e.data["text"] for e in events if e.kind == EventKind.STREAM_CHUNK]
    assert chunks == ["attempt 1 says hi. "]
    assert kinds(events)[1:5] == ["step_started", "stream_chunk", "step_failed", "step_started"]
