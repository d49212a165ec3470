"""Property tests: generated flows replay exactly; canonical JSON round-trips with stable digests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.journal import canonical_json, digest_value
from loom_nb.kernel import Decision, ExecutionContext
from tests.kernel.support import Calls, make_runtime, register_recording

SETTINGS = settings(max_examples=50, deadline=None)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)

# One operation of a generated flow, as plain JSON (the body reads its program from its input).
operations = st.one_of(
    st.tuples(st.just("exec"), st.booleans(), st.sampled_from(["echo", "fail"]), json_values),
    st.tuples(st.just("decide"), st.lists(scalars, min_size=1, max_size=4), st.integers(0, 7)),
    st.tuples(st.sampled_from(["now", "uuid", "random"])),
    st.tuples(st.just("stream"), st.text(max_size=6)),
    st.tuples(st.just("gate"), json_values),
).map(list)


async def program(ctx: ExecutionContext, ops: Any) -> Any:
    """Interpret a generated list of operations through ``ctx``; return everything it saw."""
    seen: list[Any] = []
    for i, op in enumerate(ops):
        kind = op[0]
        if kind == "exec":
            _, explicit, effect, value = op
            try:
                seen.append(await ctx.execute(effect, value, step_id=f"s{i}" if explicit else None))
            except ValueError as exc:
                seen.append(f"error: {exc}")
        elif kind == "decide":
            _, options, k = op

            def policy(opts: Any, k: int = k) -> Decision:
                return Decision(choice=opts[k % len(opts)], probabilities=[1 / len(opts)] * len(opts))

            seen.append(await ctx.decide(f"d{i}", options, policy))
        elif kind == "now":
            seen.append(ctx.now())
        elif kind == "uuid":
            seen.append(ctx.uuid())
        elif kind == "random":
            seen.append(ctx.random())
        elif kind == "stream":
            ctx.stream(op[1])
        elif kind == "gate":
            seen.append(await ctx.gate(f"g{i}", "Generated", payload={"op": i}))
    return seen


async def run_and_replay(ops: list[Any]) -> None:
    rt, calls = make_runtime(), Calls()
    register_recording(rt, calls, "echo")

    def fail(value: Any) -> Any:
        raise ValueError(canonical_json(value)[:40])

    register_recording(rt, calls, "fail", fail)
    rt.flows.register(program)
    result = await rt.start("program", ops, execution_id="gen")
    gate_payloads = {f"g{i}": op[1] for i, op in enumerate(ops) if op[0] == "gate"}
    while result.status == "suspended":
        suspended = await rt.replay("gen")
        assert suspended.reproduced, suspended.message
        assert suspended.replayed_status == "suspended"
        (gate,) = result.gates
        result = await rt.resume("gen", gate.gate_id, gate_payloads[gate.gate_id])
    assert result.status == "completed", result
    # every effect ran exactly once, however often the body was re-run across gates
    assert len(calls.log) == sum(1 for op in ops if op[0] == "exec")
    assert len({key for _, _, key, _ in calls.log}) == len(calls.log)
    report = await rt.replay("gen")
    assert report.reproduced, report.message
    assert (report.recorded_status, report.replayed_status) == ("completed", "completed")
    assert len(calls.log) == sum(1 for op in ops if op[0] == "exec")
    chunks = [e.data["text"] for e in rt.journal.read("gen") if e.kind == "stream_chunk"]
    assert chunks == [op[1] for op in ops if op[0] == "stream" and op[1]]


@SETTINGS
@given(st.lists(operations, max_size=12))
def test_generated_flows_replay_reproduces(ops: list[Any]) -> None:
    asyncio.run(run_and_replay(ops))


@SETTINGS
@given(json_values)
def test_canonical_json_round_trips(value: Any) -> None:
    text = canonical_json(value)
    assert json.loads(text) == value
    assert canonical_json(json.loads(text)) == text


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@SETTINGS
@given(st.dictionaries(st.text(max_size=6), json_values, min_size=2, max_size=6), st.randoms())
def test_digest_is_stable_under_key_reordering(value: dict[str, Any], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    assert digest_value(shuffled) == digest_value(value) == digest_value(_reordered(value))
    assert canonical_json(_reordered(value)) == canonical_json(value)
    if len(set(map(canonical_json, value.values()))) > 1:  # a real change changes the digest
        keys = list(value)
        swapped = {**value, keys[0]: value[keys[1]], keys[1]: value[keys[0]]}
        if canonical_json(swapped) != canonical_json(value):
            assert digest_value(swapped) != digest_value(value)
