"""``agent.map`` throughput: items per second at concurrency 1 and 16, on one runtime.

Each item is a short agent run: a model turn that calls one tool, then a model turn that answers
(a ``ScriptedModel``; two model steps and one tool step per item). The journal is a DuckDB FILE
(strict durability: a commit per step boundary). Two model latencies:

- 0 ms: the scripted model answers at once, so nothing awaits I/O: every item's run goes from start
  to end without yielding, the runs cannot overlap, and the figure is the journal's write cost;
- 20 ms per model call (``asyncio.sleep``, standing in for a provider's network wait): the runs
  overlap while they wait, which is what concurrency is for; once on the file journal, once on
  an in-memory DuckDB (``:memory:``, no fsync) to show what the commits cost the overlap.

For each, items/s at concurrency 1 and 16 (median of ``--runs`` runs, each on a fresh file) and
their ratio, measured in the same run; then the cost of running the same ``map`` again over the
finished batch (every item skipped: the resumability check). Last, the batch view's cost: the same
map of ``--view-items`` items (in-memory journal, 5 ms per model call, concurrency 16, inside a running
loop as in a notebook)
with and without a ``BatchView`` watching it, and how many refreshes and item updates the view made.

Run: ``.venv/bin/python bench/batch.py [--runs 3] [--items 64] [--view-items 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import loom_nb as loom
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse


def build_agent(latency: float) -> loom.Agent:
    async def respond(request: ModelRequest) -> ModelResponse:
        if latency:
            await asyncio.sleep(latency)
        user = next(m.text for m in request.messages if m.role == "user")
        tool = next((m.text for m in request.messages if m.role == "tool"), None)
        if tool is None:
            return ModelResponse.tool_calls([("lookup", {"key": user})], text="Looking it up.")
        return ModelResponse.text(f"{user}: {tool}")

    @loom.tool(idempotent=True)
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    return loom.Agent(model=loom.ScriptedModel(respond), tools=[lookup], name="bench", model_retry=None)


def one(items: int, concurrency: int, latency: float, journal: str) -> tuple[float, float]:
    """Items/s of one map on a fresh journal, and the seconds a second (all-skipped) map took."""
    with tempfile.TemporaryDirectory() as tmp:
        target = ":memory:" if journal == "memory" else Path(tmp) / "bench.duckdb"
        rt = loom.Runtime.open(target, flows=FlowRegistry())
        try:
            agent = build_agent(latency)
            inputs = [f"item {i}" for i in range(items)]
            began = time.perf_counter()
            batch = agent.map(inputs, concurrency=concurrency, runtime=rt, progress=False)
            took = time.perf_counter() - began
            assert batch.done == items, batch
            began = time.perf_counter()
            again = agent.map(inputs, concurrency=concurrency, runtime=rt, progress=False)
            skipped = time.perf_counter() - began
            assert all(item.resumed for item in again.items) and again.done == items
            return items / took, skipped
        finally:
            rt.close()


def with_view(items: int, view: bool) -> tuple[float, int, int]:
    """Seconds for one map of ``items`` inside a running loop, and the view's refreshes and item updates."""
    from loom_nb.notebook.batch_view import BatchView

    async def body() -> tuple[float, int, int]:
        rt = loom.Runtime.open(":memory:", flows=FlowRegistry())
        try:
            began = time.perf_counter()
            inputs = [f"item {i}" for i in range(items)]
            batch = build_agent(0.005).map(inputs, concurrency=16, runtime=rt, view=False)
            watcher = BatchView(batch) if view else None
            await batch
            if watcher is not None:
                watcher.flush()
            took = time.perf_counter() - began
            assert batch.done == items
            return took, (watcher.refreshes if watcher else 0), (watcher.items_synced if watcher else 0)
        finally:
            rt.close()

    return asyncio.run(body())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--view-items", type=int, default=1000)
    args = parser.parse_args()
    print(f"agent.map: {args.items} items, 2 model turns + 1 tool call each, DuckDB, median of {args.runs}")
    print(
        f"{'journal':>8} {'model latency':>14} {'c=1 items/s':>12} {'c=16 items/s':>13} {'c16/c1':>7} "
        f"{'re-map (all skipped)':>21}"
    )
    for journal, latency in (("file", 0.0), ("file", 0.02), ("memory", 0.02)):
        rates: dict[int, list[float]] = {1: [], 16: []}
        skips: list[float] = []
        for _ in range(args.runs):
            for c in (1, 16):
                rate, skipped = one(args.items, c, latency, journal)
                rates[c].append(rate)
                skips.append(skipped)
        r1, r16 = statistics.median(rates[1]), statistics.median(rates[16])
        skip_ms = statistics.median(skips) * 1e3 / args.items
        print(
            f"{journal:>8} {latency * 1e3:>11.0f} ms {r1:>12.1f} {r16:>13.1f} {r16 / r1:>6.2f}x "
            f"{skip_ms:>14.3f} ms/item"
        )
    plain = statistics.median(with_view(args.view_items, False)[0] for _ in range(args.runs))
    runs = [with_view(args.view_items, True) for _ in range(args.runs)]
    viewed = statistics.median(r[0] for r in runs)
    print(
        f"batch view, {args.view_items} items (memory, 5 ms model latency, c=16): {plain:.2f} s without a view, "
        f"{viewed:.2f} s with one ({viewed / plain:.2f}x); refreshes {[r[1] for r in runs]}, "
        f"item updates {[r[2] for r in runs]}"
    )


if __name__ == "__main__":
    main()
