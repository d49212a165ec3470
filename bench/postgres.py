"""loom_nb's per-turn cost on a PostgreSQL journal beside a DuckDB file, in one run, same workload.

The workload is ``bench/agent.py``'s (a ``ScriptedModel`` turn of about 300 B of text and a tool
call of about 200 B of arguments, then a tool result of about 500 B; no sleeps). For N turns it
reports, per store, the wall time of the whole run / N (median of ``--runs`` runs, each on a fresh
file or schema) and the journal's bytes per turn (``len`` of every event's canonical JSON / N). It
then times the first call after a restart: a process runs N turns behind ``CrashingJournal`` and
dies about half way; a fresh process opens the journal and times ``recover()`` to the first NEW
model or tool call. Run: ``.venv/bin/python bench/postgres.py [--runs 3] [--turns 200] [--url URL]``

DBOS's own PostgreSQL workflow, the issue's anchor, is not run here (not installed in this change).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent as workload  # bench/agent.py: the same turns

import loom_nb as loom
from loom_nb.journal import DuckDBJournal
from loom_nb.journal.postgres_store import PostgresJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.testing import CrashingJournal

URL = os.environ.get("LOOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_schema(url: str, name: str) -> str:
    """A new empty schema; the URL searching it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        pg.execute(f"CREATE SCHEMA {name}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"


def drop_schema(url: str, name: str) -> None:
    """Drop a schema ``fresh_schema`` made."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def open_journal(target: str, crash_after: int | None = None) -> Any:
    journal: Any = PostgresJournal(target) if target.startswith("postgresql://") else DuckDBJournal(target)
    return journal if crash_after is None else CrashingJournal(journal, crash_after)


def one_run(target: str, turns: int) -> tuple[float, int, int]:
    """Seconds of one N-turn run, the journal's JSON bytes and its events."""
    agent = workload.build_agent(turns)
    rt = loom.Runtime(open_journal(target), flows=FlowRegistry())
    try:
        began = time.perf_counter()
        run = agent.start("Process every batch.", runtime=rt, execution_id=workload.EXECUTION_ID)
        wall = time.perf_counter() - began
        assert run.status == "completed", run
        events = rt.journal.read(workload.EXECUTION_ID)
    finally:
        rt.close()
    data = sum(len(json.dumps(e.data, separators=(",", ":"), ensure_ascii=False)) for e in events)
    return wall, data, len(events)


def child(target: str, turns: int, mode: str, crash_after: int) -> None:
    """``crash``: run ``turns`` and die after ``crash_after`` events; ``recover``: time recover()
    (started in a fresh process) to the first new model or tool call."""
    began = [0.0]
    first: list[float] = []

    def on_call(kind: str, key: str) -> None:
        if not first:
            first.append(time.perf_counter() - began[0])

    agent = workload.build_agent(turns, on_call if mode == "recover" else None)
    rt = loom.Runtime(open_journal(target, crash_after if mode == "crash" else None), flows=FlowRegistry())
    if mode == "crash":
        agent.start("Process every batch.", runtime=rt, execution_id=workload.EXECUTION_ID)
        raise SystemExit("the crash switch did not fire")
    agent.register(rt)
    began[0] = time.perf_counter()
    asyncio.run(rt.recover())
    rt.close()
    print(json.dumps({"first_call_ms": first[0] * 1e3 if first else None}))


def restart_ms(target: str, turns: int, events: int) -> float | None:
    """The first-call-after-restart time, from two fresh processes (killed after half the events)."""
    me = str(Path(__file__).resolve())
    half = str(events // 2)
    subprocess.run([sys.executable, me, "--child", target, str(turns), "crash", half], capture_output=True, timeout=300)
    out = subprocess.run(
        [sys.executable, me, "--child", target, str(turns), "recover", half],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1])["first_call_ms"] if out.returncode == 0 and lines else None


def main() -> None:
    """Both stores, one run each per repetition, a markdown table."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--url", default=URL)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, int, int]]] = {"duckdb": [], "postgres": []}
    restart: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):  # interleaved, so both stores see the same machine load
            results["duckdb"].append(one_run(os.path.join(tmp, f"r{i}.duckdb"), args.turns))
            name = f"bench_pg_{os.getpid()}_{i}"
            try:
                results["postgres"].append(one_run(fresh_schema(args.url, name), args.turns))
            finally:
                drop_schema(args.url, name)
        events = results["duckdb"][0][2]
        restart["duckdb"] = restart_ms(os.path.join(tmp, "restart.duckdb"), args.turns, events)
        name = f"bench_pg_{os.getpid()}_restart"
        try:
            restart["postgres"] = restart_ms(fresh_schema(args.url, name), args.turns, events)
        finally:
            drop_schema(args.url, name)
    print(f"N = {args.turns} turns, median of {args.runs}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
    print("| store | ms per turn | JSON bytes per turn | first call after a restart (ms) |")
    print("|---|---:|---:|---:|")
    per_turn = {}
    for store, runs in results.items():
        per_turn[store] = statistics.median(w for w, _, _ in runs) / args.turns * 1e3
        first = restart[store]
        shown = "n/a" if first is None else f"{first:.1f}"
        print(f"| {store} | {per_turn[store]:.2f} | {runs[0][1] / args.turns:,.0f} | {shown} |")
    print(f"\nPostgreSQL / DuckDB, ms per turn, same run: {per_turn['postgres'] / per_turn['duckdb']:.2f}")


if __name__ == "__main__":
    main()
