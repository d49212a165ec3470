"""A flow whose NON-idempotent effect kills its own process mid-call: the in-doubt case, for real.

Usage::

    python tests/crash/in_doubt_flow.py <journal.duckdb> <marker_file> start [--catch]
    python tests/crash/in_doubt_flow.py <journal.duckdb> <marker_file> recover
    python tests/crash/in_doubt_flow.py <journal.duckdb> <marker_file> resolve <happened|run_again|fail>

The flow ``pay`` runs one step ``charge`` of the non-idempotent effect ``payments.charge`` through
the assembled ``loom_nb.runtime.Runtime`` (the effect ring included), then the idempotent
``mail.receipt``. The charge appends one JSON line (idempotency key, attempt, pid) to the marker
file, fsyncs it, and then, if the marker file was empty before, dies with ``os._exit(86)``: the
``step_started`` is committed, the effect has started, and no outcome is recorded. Invoked again
(the file is no longer empty) it returns normally.

``start`` starts execution ``pay-1`` (``--catch``: the flow catches ``InDoubtError``); it is meant
to die. ``recover`` calls ``runtime.recover()``; ``resolve`` resumes the ``charge:in_doubt`` gate
with an ``InDoubtResolution``. Both print one JSON line: the journal's events before and after,
the result, and the marker lines.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from loom_nb.errors import InDoubtError
from loom_nb.journal import Event
from loom_nb.kernel import EffectContext, ExecutionContext, ExecutionResult, FlowRegistry, Principal
from loom_nb.runtime import Runtime

EXECUTION_ID = "pay-1"
STEP_ID = "charge"
GATE_ID = f"{STEP_ID}:in_doubt"
CRASH_EXIT_CODE = 86
#: What a person who checked the payment provider says the charge returned.
OPERATOR_OUTPUT = {"receipt": "rcpt-manual-42", "amount": 42, "by": "operator"}
FLOWS = FlowRegistry()
MARKER = Path()


def charge(request: dict[str, Any], info: EffectContext) -> dict[str, Any]:
    """NOT idempotent: log the invocation durably, then die if this is the first invocation ever."""
    first = not MARKER.exists() or MARKER.stat().st_size == 0
    line = {"key": info.idempotency_key, "attempt": info.attempt, "pid": os.getpid(), "input": request}
    with MARKER.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if first:
        sys.stdout.flush()
        os._exit(CRASH_EXIT_CODE)  # mid-effect: step_started committed, no outcome
    return {"receipt": f"rcpt-{info.idempotency_key}-{info.attempt}", "amount": request["amount"]}


def receipt_mail(receipt: dict[str, Any]) -> str:
    """Idempotent follow-up that uses the charge's output."""
    return f"mailed {receipt['receipt']}"


async def pay(ctx: ExecutionContext, inp: dict[str, Any]) -> dict[str, Any]:
    """charge (non-idempotent, scope ``payments``) -> mail the receipt."""
    try:
        receipt = await ctx.execute("payments.charge", {"amount": inp["amount"]}, step_id=STEP_ID)
    except InDoubtError as exc:
        if not inp.get("catch"):
            raise
        return {"charged": False, "why": str(exc)}
    mail = await ctx.execute("mail.receipt", receipt, step_id="mail")
    return {"charged": True, "receipt": receipt, "mail": mail}


FLOWS.register(pay)


def open_runtime(path: str) -> Runtime:
    rt = Runtime.open(path, flows=FLOWS, principal=Principal.of("cashier", ["payments"]))
    rt.effects.register("payments.charge", charge, idempotent=False, scopes=["payments"])
    rt.effects.register("mail.receipt", receipt_mail, idempotent=True)
    return rt


def events_json(events: list[Event]) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "kind": e.kind, "step_id": e.step_id, "data": e.data} for e in events]


def result_json(result: ExecutionResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "output": result.output,
        "error": result.error,
        "gates": [{"gate_id": g.gate_id, "kind": g.kind, "payload": g.payload} for g in result.gates],
    }


def marker_lines() -> list[dict[str, Any]]:
    if not MARKER.exists():
        return []
    return [json.loads(line) for line in MARKER.read_text(encoding="utf-8").splitlines() if line]


async def main(argv: list[str]) -> dict[str, Any]:
    global MARKER
    path, MARKER, command = argv[0], Path(argv[1]), argv[2]
    with open_runtime(path) as rt:
        before = rt.journal.read(EXECUTION_ID)
        if command == "start":
            inp = {"amount": 42, "catch": "--catch" in argv[3:]}
            results = [await rt.start(pay, inp, execution_id=EXECUTION_ID)]
        elif command == "recover":
            results = await rt.recover()
        elif command == "resolve":
            action = argv[3]
            payload: dict[str, Any] = {"action": action, "reason": f"checked by hand: {action}"}
            if action == "happened":
                payload["output"] = OPERATOR_OUTPUT
            results = [await rt.resume(EXECUTION_ID, GATE_ID, payload)]
        else:
            raise SystemExit(f"unknown command {command!r}")
        after = rt.journal.read(EXECUTION_ID)
        status = rt.result(EXECUTION_ID).status
    return {
        "command": command,
        "results": [result_json(r) for r in results],
        "status": status,
        "before": events_json(before),
        "after": events_json(after),
        "marker": marker_lines(),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
