"""A small flow run in a subprocess that a crash switch kills after the Nth committed event.

Usage::

    python tests/crash/crash_flow.py <journal_path> <invocations_log> <crash_after|none> <mode>

``mode`` is ``start`` (start execution ``run-1`` and drive it to the end, approving the approval
gate as a person would) or ``recover`` (``runtime.recover()``, then resolve whatever gate is open:
the approval gate with ``approved=True``, an ``InDoubt`` gate with ``happened`` and the output the
effect would have given, until the run completes). The final result is printed as one JSON line.
With ``crash_after`` = N the process dies (exit code 86) right after the commit that brings the
events committed *by this process* to N or more. With ``crash_after`` = ``effect:<effect_id>`` it
dies inside that effect, after logging the invocation and before returning: the effect happened
but its outcome was never journaled.

Every effect appends ``<effect> <idempotency_key> <attempt>`` to the invocations log (flushed and
fsynced) when invoked, so the parent test sees exactly which effects ran, across crashes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from loom_nb.kernel import Decision, EffectContext, Engine, ExecutionContext, ExecutionResult, FlowRegistry
from loom_nb.testing import CrashingJournal, FakeClock, SequentialIds

EXECUTION_ID = "run-1"
CRASH_EXIT_CODE = 86
FLOWS = FlowRegistry()

#: effect id -> idempotent?
EFFECTS: dict[str, bool] = {"inventory.fetch": True, "payments.charge": False, "shipping.ship": True}


class Approval(BaseModel):
    """The approval gate's resume payload."""

    approved: bool
    reason: str | None = None


def effect_output(effect_id: str, value: Any) -> Any:
    """What each effect returns (pure, so a person resolving an in-doubt step can say it)."""
    if effect_id == "inventory.fetch":
        return {"sku": value["sku"], "stock": 7, "price": 12}
    if effect_id == "payments.charge":
        return {"receipt": f"rcpt-{value['sku']}-{value['amount']}", "amount": value["amount"]}
    if effect_id == "shipping.ship":
        return {"tracking": f"trk-{value['carrier']}-{value['receipt']}"}
    raise KeyError(effect_id)


def cheapest(options: Any) -> Decision:
    """The carrier policy: the first option, with its probabilities."""
    return Decision(choice=options[0], probabilities=[0.8, 0.2])


async def order(ctx: ExecutionContext, inp: Any) -> Any:
    """fetch (idempotent) -> decide -> charge (NOT idempotent) -> approval gate -> ship (idempotent)."""
    item = await ctx.execute("inventory.fetch", {"sku": inp["sku"]})
    ctx.stream(f"{item['sku']}: {item['stock']} in stock")
    carrier = await ctx.decide("carrier", ["post", "courier"], cheapest)
    charge = await ctx.execute("payments.charge", {"sku": inp["sku"], "amount": item["price"] * inp["qty"]})
    approval = await ctx.gate("approval", "ShipApproval", payload={"charge": charge}, schema=Approval)
    if not approval.approved:
        return {"shipped": False}
    shipment = await ctx.execute("shipping.ship", {"carrier": carrier, "receipt": charge["receipt"]}, step_id="ship")
    return {"shipped": True, "carrier": carrier, "charge": charge, "shipment": shipment, "ref": ctx.uuid()}


FLOWS.register(order)


def build(journal_path: str, log_path: str, crash_after: int | None, crash_in: str | None = None) -> Engine:
    """The runtime over the real DuckDB file, wrapped in the crash switch, with every effect registered."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    journal = CrashingJournal(stores.open_journal(journal_path), crash_after, exit_code=CRASH_EXIT_CODE)
    rt = Engine(journal, clock=FakeClock(tick=1.0), ids=SequentialIds(), flows=FLOWS)

    def register(effect_id: str, idempotent: bool) -> None:
        def effect(value: Any, ctx: EffectContext) -> Any:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(f"{effect_id} {ctx.idempotency_key} {ctx.attempt}\n")
                fh.flush()
                os.fsync(fh.fileno())
            if effect_id == crash_in:
                sys.stdout.flush()
                os._exit(CRASH_EXIT_CODE)
            return effect_output(effect_id, value)

        rt.effects.register(effect_id, effect, idempotent=idempotent)

    for effect_id, idempotent in EFFECTS.items():
        register(effect_id, idempotent)
    return rt


async def drive(rt: Engine, result: ExecutionResult, resolved: list[str]) -> ExecutionResult:
    """Resolve open gates until the run settles."""
    while result.status == "suspended":
        gate = result.gates[0]
        payload: Any
        if gate.kind == "InDoubt":
            payload = {
                "action": "happened",
                "output": effect_output(gate.payload["effect"], gate.payload["input"]),
                "reason": "checked by hand after the crash",
            }
        else:
            payload = {"approved": True}
        resolved.append(gate.gate_id)
        result = await rt.resume(result.execution_id, gate.gate_id, payload)
    return result


async def run(
    journal_path: str, log_path: str, crash_after: int | None, mode: str, crash_in: str | None = None
) -> dict[str, Any]:
    """Run ``mode`` and return what to print."""
    rt = build(journal_path, log_path, crash_after, crash_in)
    resolved: list[str] = []
    recovered: list[str] = []
    try:
        if mode == "start":
            result = await rt.start(order, {"sku": "A-1", "qty": 2}, execution_id=EXECUTION_ID)
        elif mode == "recover":
            recovered = [f"{r.execution_id}:{r.status}" for r in await rt.recover()]
            result = rt.result(EXECUTION_ID)
        else:
            raise SystemExit(f"unknown mode {mode!r}: use start or recover")
        result = await drive(rt, result, resolved)
    finally:
        rt.close()
    return {"status": result.status, "output": result.output, "resolved": resolved, "recovered": recovered}


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <invocations_log> <crash_after|none> <mode>``."""
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    journal_path, log_path, crash, mode = argv
    crash_in = crash.removeprefix("effect:") if crash.startswith("effect:") else None
    crash_after = None if crash == "none" or crash_in else int(crash)
    print(json.dumps(asyncio.run(run(journal_path, log_path, crash_after, mode, crash_in)), sort_keys=True))
    return 0


if __name__ == "__main__":
    # Launched by path: run through the importable module ``tests.crash.crash_flow`` (the repository root on
    # ``sys.path``) so persisted names (the gate schema) read ``tests.crash.crash_flow:...``, which the test
    # process resolves too.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import crash_flow

    sys.exit(crash_flow.main(sys.argv[1:]))
