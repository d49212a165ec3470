"""Kernel cost on a DuckDB file journal with the real clock.

    .venv/bin/python bench/kernel.py [--sizes 10,50,200,1000] [--baseline 500]

For N turns of a flow whose turn is two instant effects (two steps), it measures: per-turn wall
time (``time.perf_counter`` around each turn inside the flow: median and mean; and total/N around
``start``), commits per turn (the journal's ``append`` calls / N), journal bytes per turn (file +
``.wal`` after ``CHECKPOINT``, / N; and canonical-JSON event payload bytes / N), the time of a pure
``replay`` of the N=1000 run, and the baseline cost of one committed DuckDB autocommit INSERT with
parameters (median of 500) in the same process and directory. Prints a markdown table with the
targets next to the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from loom_nb.journal import DuckDBJournal, canonical_json
from loom_nb.kernel import Engine, ExecutionContext, FlowRegistry
from loom_nb.testing import JournalProxy

TARGET_TURN_MS = 2.0
TARGET_FLAT = 1.1
TARGET_BYTES = (4.5, 5.5)
TARGET_REPLAY_MS = 100.0


class CountingJournal(JournalProxy):
    """Counts ``append`` calls (commits) and their time (``seconds``)."""

    @property
    def seconds(self) -> float:
        """Wall time spent committing."""
        return self.append_seconds


def file_bytes(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def run_size(directory: Path, n: int, *, replay: bool) -> dict[str, Any]:
    path = directory / f"kernel-{n}.duckdb"
    journal = CountingJournal(DuckDBJournal(path))
    flows = FlowRegistry()
    rt = Engine(journal, flows=flows)
    rt.effects.register("bench.a", lambda v: {"a": v["turn"]}, idempotent=True)
    rt.effects.register("bench.b", lambda v: {"b": v["turn"]})
    turn_s: list[float] = []

    async def turns(ctx: ExecutionContext, count: Any) -> Any:
        for i in range(count):
            t0 = time.perf_counter()
            a = await ctx.execute("bench.a", {"turn": i})
            await ctx.execute("bench.b", {"turn": i, "a": a})
            turn_s.append(time.perf_counter() - t0)
        return count

    flows.register(turns)
    empty = file_bytes(path)
    t0 = time.perf_counter()
    result = rt.start_sync("turns", n, execution_id=f"bench-{n}")
    total_s = time.perf_counter() - t0
    assert result.status == "completed", result
    written = file_bytes(path) - empty
    events = journal.read(f"bench-{n}")
    payload = sum(len(canonical_json(e.data).encode()) for e in events)
    out: dict[str, Any] = {
        "n": n,
        "median_ms": statistics.median(turn_s) * 1e3,
        "mean_ms": statistics.fmean(turn_s) * 1e3,
        "total_per_turn_ms": total_s / n * 1e3,
        "commit_per_turn_ms": journal.seconds / n * 1e3,
        "commits_per_turn": journal.appends / n,
        "written_per_turn": written / n,
        "events": len(events),
        "payload_per_turn": payload / n,
    }
    if replay:
        t0 = time.perf_counter()
        report = rt.replay_sync(f"bench-{n}")
        out["replay_ms"] = (time.perf_counter() - t0) * 1e3
        out["replay_steps"] = 2 * n
        assert report.reproduced, report.message
    journal.inner.connection.execute("CHECKPOINT")
    rt.close()
    out["file_per_turn"] = file_bytes(path) / n
    return out


def baseline_insert_ms(directory: Path, count: int) -> float:
    """Median of ``count`` committed autocommit INSERTs with parameters into an events-shaped table."""
    con = duckdb.connect(
        str(directory / "baseline.duckdb"),
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    con.execute(
        "CREATE TABLE events (execution_id VARCHAR, seq BIGINT, kind VARCHAR, step_id VARCHAR, "
        '"at" TIMESTAMP, data JSON, PRIMARY KEY (execution_id, seq))'
    )
    data = canonical_json({"effect": "bench.a", "input": {"turn": 1}, "attempt": 1})
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        con.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, make_timestamp(?), ?)",
            ["baseline", i + 1, "step_started", "#1", 1_767_225_600_000_000 + i, data],
        )
        times.append(time.perf_counter() - t0)
    con.close()
    return statistics.median(times) * 1e3


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,200,1000")
    parser.add_argument("--baseline", type=int, default=500)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as tmp:
        directory = Path(tmp)
        (directory / "warmup").mkdir()
        run_size(directory / "warmup", 20, replay=False)  # first commits of a process are slow
        base = baseline_insert_ms(directory, args.baseline)
        rows = {n: run_size(directory, n, replay=(n == max(sizes))) for n in sizes}
    python = sys.version.split()[0]
    print(f"# kernel bench: DuckDB {duckdb.__version__}, Python {python}, {os.cpu_count()} cpus\n")
    print(f"baseline: one committed autocommit INSERT with parameters: median {base:.3f} ms (of {args.baseline})\n")
    print(
        "| N | turn median ms | turn mean ms | total/N ms | in commits ms/turn | rest ms/turn "
        "| median / baseline insert | commits/turn | bytes written/turn (file+wal) "
        "| file+wal bytes/turn after CHECKPOINT | event data bytes/turn |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n, r in rows.items():
        rest = r["total_per_turn_ms"] - r["commit_per_turn_ms"]
        print(
            f"| {n} | {r['median_ms']:.3f} | {r['mean_ms']:.3f} | {r['total_per_turn_ms']:.3f} "
            f"| {r['commit_per_turn_ms']:.3f} | {rest:.3f} | {r['median_ms'] / base:.2f}x "
            f"| {r['commits_per_turn']:.2f} | {r['written_per_turn']:.0f} | {r['file_per_turn']:.0f} "
            f"| {r['payload_per_turn']:.0f} |"
        )
    print()
    print(
        f"A turn is two steps, and durability rule 1 commits each step_started before its effect runs: "
        f"the floor is 2 commits/turn = {2 * base:.3f} ms here.\n"
    )
    lines = []
    if 200 in rows:
        mid = rows[200]["median_ms"]
        lines.append(
            f"| per-turn median at N=200 | {mid:.3f} ms | <= {TARGET_TURN_MS} ms | {verdict(mid <= TARGET_TURN_MS)} |"
        )
        if 10 in rows:
            flat = mid / rows[10]["median_ms"]
            lines.append(
                f"| per-turn median N=200 / N=10 | {flat:.2f}x | <= {TARGET_FLAT}x | {verdict(flat <= TARGET_FLAT)} |"
            )
        if 1000 in rows:
            lo, hi = TARGET_BYTES
            fb = rows[1000]["file_per_turn"] * 1000 / (rows[200]["file_per_turn"] * 200)
            wb = rows[1000]["written_per_turn"] * 1000 / (rows[200]["written_per_turn"] * 200)
            eb = rows[1000]["payload_per_turn"] * 1000 / (rows[200]["payload_per_turn"] * 200)
            lines.append(
                f"| bytes written (file+wal) N=1000 / N=200 | {wb:.2f} | in [{lo}, {hi}] | {verdict(lo <= wb <= hi)} |"
            )
            lines.append(
                f"| file+wal after CHECKPOINT N=1000 / N=200 | {fb:.2f} | in [{lo}, {hi}] "
                f"| {verdict(lo <= fb <= hi)} (256 KiB blocks) |"
            )
            lines.append(
                f"| event data bytes N=1000 / N=200 | {eb:.2f} | in [{lo}, {hi}] | {verdict(lo <= eb <= hi)} |"
            )
    overhead = {n: r["total_per_turn_ms"] - r["commit_per_turn_ms"] for n, r in rows.items()}
    if 200 in rows:
        lines.append(f"| kernel time per turn outside commits at N=200 | {overhead[200]:.3f} ms | - | - |")
    big = rows[max(sizes)]
    if "replay_ms" in big:
        per_1000 = big["replay_ms"] * 1000 / big["replay_steps"]
        lines.append(
            f"| replay of N={big['n']} ({big['replay_steps']} steps, incl. reading the journal) "
            f"| {big['replay_ms']:.1f} ms | - | - |"
        )
        lines.append(
            f"| replay per 1000 steps | {per_1000:.1f} ms | < {TARGET_REPLAY_MS} ms "
            f"| {verdict(per_1000 < TARGET_REPLAY_MS)} |"
        )
    print("| target | measured | target | verdict |")
    print("|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
