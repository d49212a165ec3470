"""The ring's chain bound once per effect spec (``EffectRegistry.chain``), leaving out the links whose
``acts_on(spec)`` is False, behaves as the whole ring bound afresh for every call: the same outputs,
errors, retries (``on_retry`` calls), guard verdicts, quota refusals and metering totals.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import FrozenInstanceError, fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.effects import ClaimCheck, EffectRing, Quota, RetryPolicy
from loom_nb.kernel import EffectCall, EffectContext, EffectResult, Principal
from loom_nb.kernel.effect_registry import EffectSpec, Next, call_effect_fn
from loom_nb.messages import Message, ModelRequest
from tests.effects.support import make, one_step


class DictStore:
    """A content store in a dict (deterministic refs)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        self.blobs[ref] = data
        return ref

    def get(self, digest: str) -> bytes | None:
        return self.blobs.get(digest)


def whole_ring(ring: EffectRing, call: EffectCall) -> Any:
    """The slow path: every interceptor of ``ring`` bound for this one call (no link left out)."""
    chain: Next = call_effect_fn
    for interceptor in reversed(ring.interceptors):
        chain = (lambda i, nxt: lambda c: i(c, nxt))(interceptor, chain)
    return chain(call)


def build_ring(config: dict[str, Any]) -> EffectRing:
    ring = EffectRing(
        per_execution=config["per_execution"],
        per_principal=config["per_principal"],
        default_retry=config["default_retry"],
    )
    if config["claim_check"]:
        ring.add_claim_check(ClaimCheck(tool_ids=["tools.x"]), DictStore())
    return ring


def register(ring: EffectRing, spec: dict[str, Any], log: list[Any]) -> EffectSpec:
    failures = {"left": spec["failures"]}

    def effect(value: Any) -> Any:
        log.append(value.model_dump(mode="json") if isinstance(value, ModelRequest) else value)
        if failures["left"]:
            failures["left"] -= 1
            raise spec["error"]("the service is away")
        if spec["output"] == "usage":
            return EffectResult(output={"text": "t"}, usage={"calls": 1, "input_tokens": 3, "output_tokens": 2})
        return spec["output"]

    return ring.register(
        spec["effect_id"],
        effect,
        scopes=spec["scopes"],
        retry=spec["retry"],
        quota=spec["quota"],
        timeout=spec["timeout"],
        kind=spec["kind"],
        trusted=spec["trusted"],
        idempotent=spec["idempotent"],
    )


def retry_log(n: int, retries: list[Any]) -> Any:
    """An ``on_retry`` hook for call ``n`` that logs each retry in ``retries``."""
    attempt = 1

    async def on_retry(error: BaseException, delay: float) -> int:
        nonlocal attempt
        retries.append((n, type(error).__name__, str(error), delay))
        attempt += 1
        return attempt

    return on_retry


async def run_calls(ring: EffectRing, spec: EffectSpec, inputs: list[Any], principal: Principal, bound: bool) -> Any:
    outcomes: list[Any] = []
    retries: list[Any] = []
    for n, value in enumerate(inputs):
        on_retry = retry_log(n, retries)

        async def sleep(_: float) -> None:
            return None

        context = EffectContext(
            execution_id="e",
            step_id=f"#{n}",
            effect_id=spec.effect_id,
            attempt=1,
            idempotency_key=f"e:#{n}",
            principal=principal,
            emit_delta=lambda _: None,
        )
        call = EffectCall(spec=spec, input=value, context=context, on_retry=on_retry, sleep=sleep)
        try:
            result = await (ring.invoke(call) if bound else whole_ring(ring, call))
        except Exception as exc:
            outcomes.append(("error", type(exc).__name__, str(exc)))
        else:
            outcomes.append(("ok", result.output, result.usage, result.tainted))
    totals = {name: t.as_dict() for name, t in ring.metering._principals.items()}
    return outcomes, retries, totals, ring.metering.totals("e").as_dict()


QUOTAS = st.sampled_from([None, Quota(calls=2), Quota(tokens=6)])
POLICIES = st.sampled_from([None, RetryPolicy(attempts=2, jitter=0), RetryPolicy(attempts=4, initial=0.1, jitter=0)])
SPECS = st.fixed_dictionaries(
    {
        "effect_id": st.sampled_from(["tools.x", "tools.y", "model.m"]),
        "scopes": st.sets(st.sampled_from(["read", "write"]), max_size=2),
        "retry": POLICIES,
        "quota": QUOTAS,
        "timeout": st.sampled_from([None, 30.0]),
        "kind": st.sampled_from(["effect", "tool", "model", "summarizer"]),
        "trusted": st.booleans(),
        "idempotent": st.booleans(),
        "failures": st.integers(0, 3),
        "error": st.sampled_from([ConnectionError, ValueError]),
        "output": st.sampled_from(["text", "usage", {"n": 1}]),
    }
)
CONFIGS = st.fixed_dictionaries(
    {
        "per_execution": QUOTAS,
        "per_principal": QUOTAS,
        "default_retry": POLICIES,
        "claim_check": st.booleans(),
    }
)
REQUESTS = st.lists(
    st.builds(
        lambda texts: ModelRequest(
            messages=tuple(Message(role=role, text=text, tainted=tainted) for role, text, tainted in texts)
        ),
        st.lists(
            st.tuples(st.sampled_from(["system", "user", "tool"]), st.sampled_from(["hi", "<<<x>>>"]), st.booleans()),
            min_size=1,
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(config=CONFIGS, spec=SPECS, requests=REQUESTS, held=st.sets(st.sampled_from(["read", "write"])))
def test_the_bound_chain_behaves_as_the_whole_ring_bound_per_call(
    config: dict[str, Any], spec: dict[str, Any], requests: list[ModelRequest], held: set[str]
) -> None:
    principal = Principal.of("ana", held)
    inputs: list[Any] = list(requests) if spec["kind"] in ("model", "summarizer") else [{"q": 1}, {"q": 2}, {"q": 3}]
    seen: list[Any] = []
    for bound in (True, False):
        ring = build_ring(config)
        log: list[Any] = []
        registered = register(ring, spec, log)
        seen.append((asyncio.run(run_calls(ring, registered, inputs, principal, bound)), log))
    assert seen[0] == seen[1]


class Spy:
    """An interceptor that counts its calls and says whether it acts on a spec."""

    def __init__(self, acts: bool | None) -> None:
        self.calls = 0
        if acts is not None:
            self.acts_on = lambda spec: acts

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        self.calls += 1
        return await next(call)


def plain_call(spec: EffectSpec) -> EffectCall:
    async def on_retry(error: BaseException, delay: float) -> int:
        raise AssertionError("no retry expected")

    async def sleep(_: float) -> None:
        return None

    context = EffectContext(
        execution_id="e",
        step_id="#1",
        effect_id=spec.effect_id,
        attempt=1,
        idempotency_key="e:#1",
        principal=Principal(),
        emit_delta=lambda _: None,
    )
    return EffectCall(spec=spec, input=1, context=context, on_retry=on_retry, sleep=sleep)


def test_a_link_that_does_not_act_on_a_spec_is_left_out_and_the_chain_is_bound_once() -> None:
    ring = EffectRing()
    skipped, kept, unsaid = Spy(False), Spy(True), Spy(None)
    for spy in (skipped, kept, unsaid):
        ring.use(spy)
    spec = ring.register("tools.x", lambda x: x + 1, kind="tool")
    assert ring.chain(spec) is ring.chain(spec)
    for _ in range(2):
        assert asyncio.run(ring.invoke(plain_call(spec))).output == 2
    assert (skipped.calls, kept.calls, unsaid.calls) == (0, 2, 2)


def test_registering_again_or_adding_a_link_binds_the_chain_anew() -> None:
    ring = EffectRing()
    first = ring.register("tools.x", lambda x: x + 1, kind="tool")
    chain = ring.chain(first)
    second = ring.register("tools.x", lambda x: x + 2, kind="tool")
    assert ring.chain(second) is not chain
    assert asyncio.run(ring.invoke(plain_call(second))).output == 3
    spy = Spy(True)
    bound = ring.chain(second)
    ring.use(spy)
    assert ring.chain(second) is not bound
    asyncio.run(ring.invoke(plain_call(second)))
    assert spy.calls == 1


def acting(ring: EffectRing, spec: EffectSpec) -> list[str]:
    """The interceptors of ``ring`` that act on ``spec`` (one without ``acts_on`` always does)."""
    return [type(i).__name__ for i in ring.interceptors if getattr(i, "acts_on", lambda _: True)(spec)]


def test_the_builtin_links_say_when_they_act() -> None:
    ring = EffectRing()
    plain = ring.register("tools.plain", lambda x: x, kind="tool")
    assert acting(ring, plain) == ["Metering"]
    full = ring.register("model.full", lambda x: x, kind="model", scopes={"read"}, retry=RetryPolicy(), timeout=5.0)
    assert acting(ring, full) == ["Authorization", "Metering", "Retry", "PromptGuard", "Timeout", "ImageContent"]
    assert acting(EffectRing(default_retry=RetryPolicy()), plain) == ["Metering", "Retry"]


def test_the_per_step_context_call_and_result_hold_every_field() -> None:
    """``frozen_instance`` builds them without their ``__init__``: a field added later must be passed."""
    seen: list[Any] = []

    class Peek:
        async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
            result = await next(call)
            seen.extend([call, call.context, result])
            return result

    rt = make()
    rt.effects.use(Peek())
    rt.effects.register("double", lambda x: x * 2)
    assert asyncio.run(rt.start(one_step("double", 4))).output == 8
    assert [type(v) for v in seen] == [EffectCall, EffectContext, EffectResult]
    for value in seen:
        assert list(vars(value)) == [f.name for f in fields(value)]
        assert value == replace(value)  # equal to one its generated __init__ builds
        with pytest.raises(FrozenInstanceError):
            value.output = None
