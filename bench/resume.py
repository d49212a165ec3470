"""Resume: from ``Runtime.open`` of a journal holding a crashed run to that run's first new call.

For each store (a DuckDB file, a PostgreSQL schema) and each of ``--runs`` repetitions, interleaved:

- a process runs ``bench/agent.py``'s workload (``--turns`` turns) behind ``CrashingJournal`` and
  dies (``os._exit``) after half its events, leaving the run ``running`` in the journal;
- a fresh process, with ``loom_nb`` imported and the agent defined (what a restarted notebook has
  once its cells ran), takes ``time.perf_counter()`` before ``Runtime.open(target)``, registers the
  agent, runs ``recover()`` and takes the time at the first NEW model or tool call: open -> first
  call, split into ``open`` (``Runtime.open`` returned) and the rest (recovery reading the run and
  replaying it to its next step);
- baseline, in a fresh process of the same repetition: the floor any resume pays, opening the
  store and reading the crashed run's events (``duckdb.connect`` + ``SELECT ... FROM events WHERE
  execution_id = ?``, ``duckdb`` imported as ``import loom_nb`` does; ``import psycopg`` +
  ``psycopg.connect`` + the same query, as ``Runtime.open`` of a URL imports the driver).

Medians over the repetitions. Target (issue 30): open -> first call <= 15 ms on both stores.
Run: ``.venv/bin/python bench/resume.py [--runs 5] [--turns 200] [--url URL]``
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
from postgres import URL, drop_schema, fresh_schema, open_journal

import loom_nb as loom
from loom_nb.kernel import FlowRegistry


def crash(target: str, turns: int, crash_after: int) -> None:
    """Run ``turns`` turns and die after ``crash_after`` events."""
    agent = workload.build_agent(turns)
    rt = loom.Runtime(open_journal(target, crash_after), flows=FlowRegistry())
    agent.start("Process every batch.", runtime=rt, execution_id=workload.EXECUTION_ID)
    raise SystemExit("the crash switch did not fire")


def resume(target: str, turns: int) -> dict[str, float | None]:
    """Time ``Runtime.open`` -> first new call of the crashed run (and the open alone)."""
    first: list[float] = []

    def on_call(kind: str, key: str) -> None:
        if not first:
            first.append(time.perf_counter())

    agent = workload.build_agent(turns, on_call)
    began = time.perf_counter()
    rt = loom.Runtime.open(target, flows=FlowRegistry())
    opened = time.perf_counter()
    agent.register(rt)
    asyncio.run(rt.recover())
    status = rt.journal.get_execution(workload.EXECUTION_ID)
    rt.close()
    assert status is not None and status.status == "completed", status
    return {
        "first_call_ms": (first[0] - began) * 1e3 if first else None,
        "open_ms": (opened - began) * 1e3,
    }


def floor(target: str) -> dict[str, float | None]:
    """Open the store and read the crashed run's events: what any resume pays."""
    query = "SELECT seq, kind, data FROM events WHERE execution_id = ? ORDER BY seq"
    if target.startswith("postgresql://"):
        began = time.perf_counter()  # the driver's import too: Runtime.open imports it as it opens
        import psycopg

        with psycopg.connect(target) as con:
            rows = con.execute(query.replace("?", "%s"), (workload.EXECUTION_ID,)).fetchall()
    else:
        import duckdb

        began = time.perf_counter()
        con = duckdb.connect(target)
        rows = con.execute(query, [workload.EXECUTION_ID]).fetchall()
        con.close()
    took = (time.perf_counter() - began) * 1e3
    assert rows, "the crashed run left no events"
    return {"floor_ms": took}


def child(argv: list[str]) -> None:
    mode, target, turns = argv[0], argv[1], int(argv[2])
    if mode == "crash":
        crash(target, turns, int(argv[3]))
    elif mode == "resume":
        print(json.dumps(resume(target, turns)))
    else:
        print(json.dumps(floor(target)))


def run_child(*argv: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *argv], capture_output=True, text=True, timeout=300
    )
    lines = out.stdout.strip().splitlines()
    if argv[0] == "crash":
        return {}
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{argv[0]} child failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def events_of_one_run(turns: int, tmp: str) -> int:
    """How many events a whole run of ``turns`` turns writes (to crash at half of them)."""
    path = os.path.join(tmp, "count.duckdb")
    agent = workload.build_agent(turns)
    rt = loom.Runtime(open_journal(path), flows=FlowRegistry())
    try:
        agent.start("Process every batch.", runtime=rt, execution_id=workload.EXECUTION_ID)
        return len(rt.journal.read(workload.EXECUTION_ID))
    finally:
        rt.close()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--url", default=URL)
    args = parser.parse_args()
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        half = str(events_of_one_run(args.turns, tmp) // 2)
        for i in range(args.runs):
            for store in ("duckdb", "postgres"):
                name = f"bench_resume_{os.getpid()}_{i}"
                target = os.path.join(tmp, f"r{i}.duckdb") if store == "duckdb" else fresh_schema(args.url, name)
                try:
                    run_child("crash", target, str(args.turns), half)
                    got = run_child("resume", target, str(args.turns)) | run_child("floor", target, str(args.turns))
                finally:
                    if store == "postgres":
                        drop_schema(args.url, name)
                for key, value in got.items():
                    if value is not None:
                        figures.setdefault(store, {}).setdefault(key, []).append(value)
    print(f"{args.runs} runs of {args.turns} turns, crashed after {half} events; medians (all runs)")
    print("| store | open -> first new call | of which Runtime.open | baseline: open + read the run |")
    print("|---|---:|---:|---:|")
    for store, got in figures.items():

        def cell(key: str, got: dict[str, list[float]] = got) -> str:
            values = got.get(key, [])
            if not values:
                return "-"
            runs = ", ".join(f"{v:.1f}" for v in values)
            return f"{statistics.median(values):.1f} ms ({runs})"

        print(f"| {store} | {cell('first_call_ms')} | {cell('open_ms')} | {cell('floor_ms')} |")
    for store, got in figures.items():
        if got.get("first_call_ms"):
            first = statistics.median(got["first_call_ms"])
            print(f"{store}: open -> first call {first:.1f} ms (target <= 15 ms)")


if __name__ == "__main__":
    main()
