"""Worker throughput on a shared PostgreSQL journal: 1 and 2 ``loom-nb worker`` processes.

For each worker count (interleaved, ``--runs`` times, each on a fresh schema) it starts the workers
(``--import tests.workers.worker_agents``, ``--concurrency 16``), waits until they listen, submits
``--n`` runs of ``clerk`` (two model turns and one tool call each, no sleeps) from this process, and
times from the first submit until every execution is ``completed`` (this process polls the executions
table every 10 ms). Reports executions per second (median) and the ratio 2 workers / 1 worker.
Run: ``.venv/bin/python bench/workers.py [--runs 3] [--n 200] [--url URL]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loom_nb.runtime import Runtime  # noqa: E402
from tests.workers.worker_agents import clerk  # noqa: E402

URL = os.environ.get("LOOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def fresh_schema(url: str, name: str) -> str:
    """Drop and create schema ``name``; the URL whose search path is it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"


def one(url: str, workers: int, n: int, run: int) -> float:
    """Executions per second with ``workers`` worker processes."""
    schema_url = fresh_schema(url, f"bench_workers_{workers}_{run}")
    rt = Runtime.open(schema_url)  # migrates the schema before the workers open it
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loom_nb.cli",
                "worker",
                "--journal",
                schema_url,
                "--import",
                "tests.workers.worker_agents",
                "--concurrency",
                "16",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(workers)
    ]
    try:
        with psycopg.connect(url, autocommit=True) as conn:  # wait until every worker LISTENs
            listening = (
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' AND datname = current_database()"
            )
            while conn.execute(listening).fetchone()[0] < workers:  # type: ignore[index]
                time.sleep(0.05)
        began = time.perf_counter()
        for i in range(n):
            clerk.submit(f"item-{i}", f"job-{i:05d}", runtime=rt)
        while len(rt.journal.list_executions("completed")) < n:
            time.sleep(0.01)
        return n / (time.perf_counter() - began)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.communicate(timeout=30)
        rt.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS bench_workers_{workers}_{run} CASCADE")


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--url", default=URL)
    args = parser.parse_args()
    rates: dict[int, list[float]] = {1: [], 2: []}
    for run in range(args.runs):
        for workers in (1, 2):
            rates[workers].append(one(args.url, workers, args.n, run))
    load = os.getloadavg()[0]
    print(
        f"N = {args.n} executions (2 model turns + 1 tool call each), median of {args.runs}; "
        f"{os.cpu_count()} cores, load {load:.1f}\n"
    )
    print("| worker processes | executions per second | runs |")
    print("|---:|---:|---|")
    for workers, values in rates.items():
        print(f"| {workers} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")
    print(f"\n2 workers / 1 worker: {statistics.median(rates[2]) / statistics.median(rates[1]):.2f}")


if __name__ == "__main__":
    main()
