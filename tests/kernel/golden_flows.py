"""The flow behind the golden journal ``tests/kernel/golden/kernel_order.jsonl``, and a deliberately changed one.

The golden journal is a contract: a kernel change that alters what a run journals (event kinds,
step ids, payload shapes, digests) shows up as a diff against it, and old journals must still replay.

There is one golden file per event format (``loom_nb.journal.event_format``): ``kernel_order.jsonl``
(format 1, recorded before formats were versioned) and ``kernel_order_v2.jsonl`` (format 2). Both must
replay, and the kernel, told to write a format, must still journal that format's file identically.
``golden/kernel_order_cancelled.jsonl`` is the same flow (format 1) cancelled while its charge was in
flight. ``golden/kernel_order_queued.jsonl`` (format 2) is the same flow submitted for a worker
(``execution_started`` with ``"queued": true``), taken and driven by the worker to its gates, answered
from elsewhere (the answer only recorded), and driven on by the worker to the end. Write the golden
files that are missing with::

Regenerate one (only for a deliberate, migrated change of the journal's shapes) with::

    .venv/bin/python tests/kernel/golden_flows.py --write [--format 2]

and regenerate existing ones (only for a deliberate, migrated change of the journal's shapes) with
``--write --force``.

which records ``golden_order`` with ``FakeClock(tick=1)``, ``SequentialIds`` and ``SeededRandom(7)``
on an ``InMemoryJournal`` and writes one event per line (canonical JSON with ``execution_id``, ``seq``,
``kind``, ``step_id``, ``at``, ``data``). Without ``--write`` it prints the lines instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from loom_nb.journal import Event, ExecutionRecord, InMemoryJournal, canonical_json
from loom_nb.journal.event_format import CURRENT_FORMAT
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import Decision, Engine, ExecutionContext, FlowRegistry, GateRequest
from loom_nb.testing import FakeClock, SeededRandom, SequentialIds

GOLDEN = Path(__file__).with_name("golden") / "kernel_order.jsonl"
#: The golden file of each event format.
GOLDENS = {1: GOLDEN, 2: Path(__file__).with_name("golden") / "kernel_order_v2.jsonl"}
#: The same flow cancelled while its non-idempotent charge was in flight (``execution_cancelled``).
GOLDEN_CANCELLED = Path(__file__).with_name("golden") / "kernel_order_cancelled.jsonl"
CANCEL_REASON = "the customer called"
#: The same flow submitted for a worker (``Engine.submit``), run by the worker, answered from a notebook.
GOLDEN_QUEUED = Path(__file__).with_name("golden") / "kernel_order_queued.jsonl"
QUEUED_ID = "golden-queued"
EXECUTION_ID = "golden-1"
FLOW_NAME = "golden_order"
INPUT = {"sku": "A-1", "qty": 2}


class Approval(BaseModel):
    """Resume payload of the approval gates."""

    approved: bool
    reason: str | None = None


def lookup(value: Any) -> Any:
    """Effect ``catalog.lookup``."""
    return {"sku": value["sku"], "price": 12.5}


def reserve(value: Any) -> Any:
    """Effect ``stock.reserve``: always out of stock (a recorded failure the flow handles)."""
    raise ValueError(f"no stock for {value['sku']}")


def charge(value: Any) -> Any:
    """Effect ``payments.charge``."""
    return {"receipt": f"r-{value['amount']}"}


def cheapest(options: Any) -> Decision:
    """The carrier policy."""
    return Decision(choice=options[1], probabilities=[0.3, 0.7])


async def golden_order(ctx: ExecutionContext, inp: Any) -> Any:
    """Counter and explicit step ids, a handled failure, a decision, two gates at once, values, streams."""
    item = await ctx.execute("catalog.lookup", {"sku": inp["sku"]})
    try:
        await ctx.execute("stock.reserve", {"sku": inp["sku"], "qty": inp["qty"]}, step_id="reserve")
        backorder = False
    except ValueError as exc:
        ctx.stream(f"backorder: {exc}")
        backorder = True
    carrier = await ctx.decide("carrier", ["post", "courier"], cheapest)
    approvals = await ctx.gates(
        [
            GateRequest(gate_id="manager", kind="Approval", payload={"item": item}, schema=Approval),
            GateRequest(gate_id="finance", kind="Approval", payload={"qty": inp["qty"]}, schema=Approval),
        ]
    )
    if not all(a.approved for a in approvals):
        return {"status": "refused"}
    receipt = await ctx.execute("payments.charge", {"amount": item["price"] * inp["qty"], "carrier": carrier})
    ctx.stream("charged")
    return {
        "status": "ordered",
        "backorder": backorder,
        "carrier": carrier,
        "receipt": receipt,
        "at": ctx.now(),
        "ref": ctx.uuid(),
        "lucky": ctx.random(),
    }


async def golden_order_changed(ctx: ExecutionContext, inp: Any) -> Any:
    """The same flow after a careless edit: the charge's input gained a field."""
    item = await ctx.execute("catalog.lookup", {"sku": inp["sku"]})
    with contextlib.suppress(ValueError):
        await ctx.execute("stock.reserve", {"sku": inp["sku"], "qty": inp["qty"]}, step_id="reserve")
    carrier = await ctx.decide("carrier", ["post", "courier"], cheapest)
    await ctx.gates(
        [
            GateRequest(gate_id="manager", kind="Approval", payload={"item": item}, schema=Approval),
            GateRequest(gate_id="finance", kind="Approval", payload={"qty": inp["qty"]}, schema=Approval),
        ]
    )
    receipt = await ctx.execute(
        "payments.charge", {"amount": item["price"] * inp["qty"], "carrier": carrier, "currency": "EUR"}
    )
    return {"status": "ordered", "receipt": receipt}


def make_runtime(journal: JournalStore, body: Any = golden_order, *, event_format: int = CURRENT_FORMAT) -> Engine:
    """A deterministic runtime with the golden effects and ``body`` registered as ``golden_order``,
    writing new executions in ``event_format``."""
    flows = FlowRegistry()
    flows.register(body, name=FLOW_NAME)
    rt = Engine(journal, clock=FakeClock(tick=1.0), ids=SequentialIds(), random=SeededRandom(7), flows=flows)
    rt.event_format = event_format
    rt.effects.register("catalog.lookup", lookup, idempotent=True)
    rt.effects.register("stock.reserve", reserve)
    rt.effects.register("payments.charge", charge)
    return rt


async def record(event_format: int = 1) -> list[Event]:
    """Run the golden flow to completion (approving both gates) in ``event_format``; return its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal, event_format=event_format)
    result = await rt.start(FLOW_NAME, INPUT, execution_id=EXECUTION_ID)
    assert result.status == "suspended", result
    await rt.resume(EXECUTION_ID, "finance", {"approved": True})
    result = await rt.resume(EXECUTION_ID, "manager", {"approved": True, "reason": "ok"})
    assert result.status == "completed", result
    return journal.read(EXECUTION_ID)


async def record_cancelled() -> list[Event]:
    """Run the golden flow past both gates, then cancel it while the (non-idempotent) charge is in
    flight: the charge is recorded in doubt, then ``execution_cancelled``. Returns its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal, event_format=1)
    charging = asyncio.Event()

    async def hanging_charge(value: Any) -> Any:
        charging.set()
        await asyncio.Event().wait()  # never answers: the cancel cuts it

    rt.effects.register("payments.charge", hanging_charge)
    await rt.start(FLOW_NAME, INPUT, execution_id=EXECUTION_ID)
    await rt.resume(EXECUTION_ID, "finance", {"approved": True})
    resumed = asyncio.ensure_future(rt.resume(EXECUTION_ID, "manager", {"approved": True}))
    await charging.wait()
    result = await rt.cancel(EXECUTION_ID, CANCEL_REASON)
    assert result.status == "cancelled", result
    assert (await resumed).status == "cancelled"
    return journal.read(EXECUTION_ID)


class QueueJournal(InMemoryJournal):
    """An ``InMemoryJournal`` whose queued executions a worker can take, as ``PostgresJournal.claim_queued``
    does (the row turns ``running``; no event is written)."""

    def take(self, execution_id: str) -> None:
        """Take the queued execution ``execution_id`` (its row becomes ``running``)."""
        row = self._executions[execution_id]
        assert row.status == "queued", row
        self._executions[execution_id] = ExecutionRecord(
            row.execution_id, row.flow, "running", row.created_at, row.updated_at
        )


async def record_queued() -> list[Event]:
    """Submit the golden flow (format 2) for a worker, let the worker take and drive it to its gates,
    answer them without driving (as a notebook does for a worker's run), and let the worker drive it
    to the end; return its events."""
    journal = QueueJournal()
    rt = make_runtime(journal, event_format=2)
    submitted = rt.submit(FLOW_NAME, INPUT, execution_id=QUEUED_ID)
    assert submitted.status == "queued", submitted
    assert await rt.recover() == []  # a queued execution is the workers' to take, never recover()'s
    journal.take(QUEUED_ID)
    (parked,) = await rt.recover(execution_ids=[QUEUED_ID])
    assert parked.status == "suspended", parked
    rt.answer(QUEUED_ID, "finance", {"approved": True}, drive_here=False)
    rt.answer(QUEUED_ID, "manager", {"approved": True, "reason": "ok"}, drive_here=False)
    (done,) = await rt.recover(execution_ids=[QUEUED_ID])
    assert done.status == "completed", done
    return journal.read(QUEUED_ID)


def to_lines(events: list[Event]) -> list[str]:
    """One canonical JSON line per event."""
    return [
        canonical_json(
            {
                "execution_id": e.execution_id,
                "seq": e.seq,
                "kind": str(e.kind),
                "step_id": e.step_id,
                "at": e.at,
                "data": e.data,
            }
        )
        for e in events
    ]


def load(path: Path = GOLDEN, *, upto_seq: int | None = None) -> InMemoryJournal:
    """An ``InMemoryJournal`` holding a golden file's events (optionally only up to ``upto_seq``)."""
    import json

    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if upto_seq is None or row["seq"] <= upto_seq:
            events.append(Event(row["execution_id"], row["seq"], row["kind"], row["step_id"], row["at"], row["data"]))
    journal = InMemoryJournal()
    journal.append(events)
    return journal


def main(argv: list[str]) -> int:
    """``--write`` writes the golden files (of ``--format N``, 1 by default; the cancelled run is
    format 1) that do not exist yet (``--write --force`` rewrites them); otherwise print the lines a
    fresh recording gives."""
    event_format = int(argv[argv.index("--format") + 1]) if "--format" in argv else 1
    recorders: list[tuple[Path, Any]] = [(GOLDENS[event_format], lambda: record(event_format))]
    if event_format == 1:
        recorders.append((GOLDEN_CANCELLED, record_cancelled))
    if event_format == 2:
        recorders.append((GOLDEN_QUEUED, record_queued))
    for path, recorder in recorders:
        text = "\n".join(to_lines(asyncio.run(recorder()))) + "\n"
        if "--write" in argv:
            if path.exists() and "--force" not in argv:
                print(f"kept {path} (it exists; --force rewrites it)")
                continue
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path} ({text.count(chr(10))} events)")
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    # Launched by path: run through the importable module ``tests.kernel.golden_flows`` (the repository root on
    # ``sys.path``) so persisted names (the gate schema) read ``tests.kernel.golden_flows:...``, which the test
    # process resolves too.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kernel import golden_flows

    sys.exit(golden_flows.main(sys.argv[1:]))
