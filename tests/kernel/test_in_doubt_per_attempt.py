"""Every attempt of a non-idempotent step cut mid-call parks on its own in-doubt gate: an answer
("run it again") covers only the attempt it was given for, so nothing runs a third time unasked."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.journal import EventKind, step_ids
from loom_nb.kernel import Engine, ExecutionContext
from tests.kernel.support import make_runtime


class SimulatedCrash(BaseException):
    """The process dies mid-call (a BaseException: nothing in the flow catches it)."""


def charging_runtime(crash_on: set[int]) -> tuple[Engine, list[int]]:
    attempts: list[int] = []

    def charge(amount: Any) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) in crash_on:
            raise SimulatedCrash()
        return f"charged {amount}"

    async def checkout(ctx: ExecutionContext, amount: Any) -> Any:
        return await ctx.execute("charge", amount)

    rt = make_runtime()
    rt.flows.register(checkout, "checkout")
    rt.effects.register("charge", charge, idempotent=False)
    return rt, attempts


async def test_a_second_cut_after_run_again_asks_again_instead_of_running_a_third_time() -> None:
    rt, attempts = charging_runtime(crash_on={1, 2})
    with pytest.raises(SimulatedCrash):
        await rt.start("checkout", 5, execution_id="c")
    (parked,) = await rt.recover()
    assert [g.gate_id for g in parked.gates] == ["#1:in_doubt"]

    with pytest.raises(SimulatedCrash):  # the person says run it again; attempt 2 is cut too
        await rt.resume("c", "#1:in_doubt", {"action": "run_again"})
    assert attempts == [1, 2]

    (parked,) = await rt.recover()  # must not run attempt 3 on the old answer
    assert attempts == [1, 2]
    assert parked.status == "suspended"
    (gate,) = parked.gates
    assert gate.gate_id == step_ids.in_doubt_gate_id("#1", 2) == "#1:in_doubt:2"
    assert gate.payload["attempt"] == 2
    assert step_ids.parse_step_id(gate.gate_id).subject == "#1"
    in_doubt = [e.data for e in rt.journal.read("c") if e.kind == EventKind.STEP_IN_DOUBT]
    assert in_doubt == [{"effect": "charge", "attempt": 1}, {"effect": "charge", "attempt": 2}]

    done = await rt.resume("c", gate.gate_id, {"action": "run_again"})
    assert (done.status, done.output, attempts) == ("completed", "charged 5", [1, 2, 3])
    assert await rt.recover() == []


async def test_happened_on_the_second_attempt_records_it_without_running_again() -> None:
    rt, attempts = charging_runtime(crash_on={1, 2})
    with pytest.raises(SimulatedCrash):
        await rt.start("checkout", 7, execution_id="c")
    await rt.recover()
    with pytest.raises(SimulatedCrash):
        await rt.resume("c", "#1:in_doubt", {"action": "run_again"})
    await rt.recover()
    done = await rt.resume("c", "#1:in_doubt:2", {"action": "happened", "output": "charged 7 (seen on the card)"})
    assert (done.status, done.output, attempts) == ("completed", "charged 7 (seen on the card)", [1, 2])
    report = await rt.replay("c")
    assert report.reproduced, report.message
