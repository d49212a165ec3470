"""loom_nb's per-turn cost on a PostgreSQL journal beside a DuckDB file, in one run, same workload.

The workload is ``bench/agent.py``'s (a ``ScriptedModel`` turn of about 300 B of text and a tool
call of about 200 B of arguments, then a tool result of about 500 B; no sleeps). For N turns it
reports, per store, the wall time of the whole run / N (median of ``--runs`` runs, each on a fresh
file or schema) and the journal's bytes per turn (``len`` of every event's canonical JSON / N). It
then times the first call after a restart: a process runs N turns behind ``CrashingJournal`` and
dies about half way; a fresh process opens the journal and times ``recover()`` to the first NEW
model or tool call. Run: ``.venv/bin/python bench/postgres.py [--runs 3] [--turns 200] [--url URL]``

DBOS's own PostgreSQL-backed workflow for the same workload (``bench/dbos_workload.py``: a model step
and a tool step per turn) runs in the same repetitions on the same server, its system database a
database of its own (``loom_bench_dbos_<pid>``, made on the server of ``--url`` and dropped after);
its bytes per turn are the text DBOS stored (serialized step outputs, workflow inputs and output) / N,
its first call after a restart is timed from just before ``DBOS.launch()`` (whose recovery resumes
the workflow) to the first new step. Needs the ``bench`` extra
(``pip install -c constraints.txt -e '.[postgres,bench]'``: DBOS, pinned); without it DBOS's row says so.
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


DBOS_SCRIPT = str(Path(__file__).resolve().parent / "dbos_workload.py")


def dbos_url(url: str, name: str) -> str:
    """``url`` with the database ``name`` (DBOS's system database) instead of its own."""
    base = url.partition("?")[0]
    return base.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str, name: str) -> None:
    """Drop the database ``name`` on ``url``'s server (DBOS's system database)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def dbos_available() -> bool:
    """True when ``dbos`` is installed."""
    import importlib.util

    return importlib.util.find_spec("dbos") is not None


def dbos_call(*argv: str) -> dict[str, Any] | None:
    """One ``bench/dbos_workload.py`` process; its JSON line (None when it failed)."""
    out = subprocess.run([sys.executable, DBOS_SCRIPT, *argv], capture_output=True, text=True, timeout=600)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        print(f"DBOS {argv[2]} failed: {out.stderr[-600:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def dbos_run(sys_url: str, turns: int, workflow_id: str) -> tuple[float, int, int] | None:
    """Seconds of one DBOS workflow of N turns and the bytes DBOS stored for it."""
    out = dbos_call(sys_url, str(turns), "run", workflow_id)
    return None if out is None else (float(out["wall"]), int(out["bytes"]), 0)


def dbos_restart_ms(sys_url: str, turns: int) -> float | None:
    """DBOS's first call after a restart: a process dies at turn N/2, a fresh one launches DBOS."""
    half = str(turns // 2)
    subprocess.run(
        [sys.executable, DBOS_SCRIPT, sys_url, str(turns), "crash", "restart", half], capture_output=True, timeout=300
    )
    out = dbos_call(sys_url, str(turns), "recover", "restart", half)
    return None if out is None or out["first_call_ms"] is None else float(out["first_call_ms"])


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
    with_dbos = dbos_available()
    results: dict[str, list[tuple[float, int, int]]] = {"duckdb": [], "postgres": [], "dbos-postgres": []}
    restart: dict[str, float | None] = {}
    dbos_db = f"loom_bench_dbos_{os.getpid()}"
    sys_url = dbos_url(args.url, dbos_db)
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):  # interleaved, so every store sees the same machine load
            results["duckdb"].append(one_run(os.path.join(tmp, f"r{i}.duckdb"), args.turns))
            name = f"bench_pg_{os.getpid()}_{i}"
            try:
                results["postgres"].append(one_run(fresh_schema(args.url, name), args.turns))
            finally:
                drop_schema(args.url, name)
            if with_dbos:
                took = dbos_run(sys_url, args.turns, f"bench-{i}")
                if took is not None:
                    results["dbos-postgres"].append(took)
        events = results["duckdb"][0][2]
        restart["duckdb"] = restart_ms(os.path.join(tmp, "restart.duckdb"), args.turns, events)
        name = f"bench_pg_{os.getpid()}_restart"
        try:
            restart["postgres"] = restart_ms(fresh_schema(args.url, name), args.turns, events)
        finally:
            drop_schema(args.url, name)
        try:
            restart["dbos-postgres"] = dbos_restart_ms(sys_url, args.turns) if with_dbos else None
        finally:
            if with_dbos:
                drop_database(args.url, dbos_db)
    print(f"N = {args.turns} turns, median of {args.runs}; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
    print("| store | ms per turn | bytes per turn | first call after a restart (ms) | runs (ms per turn) |")
    print("|---|---:|---:|---:|---|")
    per_turn: dict[str, float] = {}
    per_bytes: dict[str, float] = {}
    for store, runs in results.items():
        label = {"duckdb": "loom_nb DuckDB", "postgres": "loom_nb PostgreSQL", "dbos-postgres": "DBOS PostgreSQL"}[
            store
        ]
        if not runs:
            print(f"| {label} | not run (DBOS not installed: pip install -e '.[postgres,bench]') | | | |")
            continue
        per_turn[store] = statistics.median(w for w, _, _ in runs) / args.turns * 1e3
        per_bytes[store] = runs[0][1] / args.turns
        first = restart.get(store)
        shown = "n/a" if first is None else f"{first:.1f}"
        each = ", ".join(f"{w / args.turns * 1e3:.2f}" for w, _, _ in runs)
        print(f"| {label} | {per_turn[store]:.2f} | {per_bytes[store]:,.0f} | {shown} | {each} |")
    print(f"\nloom_nb PostgreSQL / DuckDB, ms per turn, same run: {per_turn['postgres'] / per_turn['duckdb']:.2f}")
    if "dbos-postgres" in per_turn:
        ratio = per_turn["postgres"] / per_turn["dbos-postgres"]
        print(f"loom_nb PostgreSQL / DBOS, ms per turn, same run: {ratio:.2f}x (target <= 0.35x)")
        below = "below" if per_bytes["postgres"] < per_bytes["dbos-postgres"] else "NOT below"
        print(
            f"bytes per turn: loom_nb {per_bytes['postgres']:,.0f} (event JSON) vs DBOS "
            f"{per_bytes['dbos-postgres']:,.0f} (stored text): {below}"
        )
    first_pg = restart.get("postgres")
    if first_pg is not None:
        print(f"loom_nb PostgreSQL first call after a restart: {first_pg:.1f} ms (target < 50 ms)")


if __name__ == "__main__":
    main()
