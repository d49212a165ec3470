"""An effect that cannot tell whether its call took effect (``OutcomeUnknownError``) puts a
non-idempotent step in doubt at once, as a crash would: a person decides; nothing runs twice unasked."""

from __future__ import annotations

from typing import Any

from loom_nb.errors import OutcomeUnknownError
from loom_nb.journal import EventKind
from loom_nb.kernel import Engine, ExecutionContext
from tests.kernel.support import make_runtime


def charging(*, idempotent: bool, cut_first: int = 1) -> tuple[Engine, list[int]]:
    attempts: list[int] = []

    def charge(amount: Any) -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) <= cut_first:
            raise OutcomeUnknownError("the payment service hung up mid-call")
        return f"charged {amount}"

    async def checkout(ctx: ExecutionContext, amount: Any) -> Any:
        try:
            return await ctx.execute("charge", amount)
        except OutcomeUnknownError as exc:
            return f"failed: {exc}"

    rt = make_runtime()
    rt.flows.register(checkout, "checkout")
    rt.effects.register("charge", charge, idempotent=idempotent)
    return rt, attempts


async def test_a_non_idempotent_step_whose_outcome_is_unknown_parks_on_an_in_doubt_gate() -> None:
    rt, attempts = charging(idempotent=False)
    parked = await rt.start("checkout", 5, execution_id="c")
    assert parked.status == "suspended"
    (gate,) = parked.gates
    assert (gate.gate_id, gate.kind, gate.payload["attempt"]) == ("#1:in_doubt", "InDoubt", 1)
    kinds = [e.kind for e in rt.journal.read("c")]
    assert EventKind.STEP_FAILED not in kinds and EventKind.STEP_IN_DOUBT in kinds
    assert attempts == [1]  # the flow's own except clause never saw it: a person decides

    done = await rt.resume("c", "#1:in_doubt", {"action": "happened", "output": "charged 5 (per the bank)"})
    assert (done.status, done.output, attempts) == ("completed", "charged 5 (per the bank)", [1])
    assert (await rt.replay("c")).reproduced


async def test_run_again_invokes_it_once_more() -> None:
    rt, attempts = charging(idempotent=False)
    await rt.start("checkout", 5, execution_id="c")
    done = await rt.resume("c", "#1:in_doubt", {"action": "run_again"})
    assert (done.status, done.output, attempts) == ("completed", "charged 5", [1, 2])


async def test_an_idempotent_step_whose_outcome_is_unknown_fails_as_usual() -> None:
    rt, attempts = charging(idempotent=True)
    done = await rt.start("checkout", 5, execution_id="c")
    assert (done.status, done.output) == ("completed", "failed: the payment service hung up mid-call")
    assert attempts == [1]  # no retry policy: it is not run again by itself
    failed = [e for e in rt.journal.read("c") if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].data["error"]["type"] == "loom_nb.errors:OutcomeUnknownError"
