"""Live streaming to a follower in another process, on a shared PostgreSQL journal.

A real worker process (this script with ``--worker``: ``Worker`` over ``Runtime.open(url,
stream_commits=...)``, importing ``tests.workers.stream_agents``) drives ``narrator``, whose paced
model streams 8 sentences of about 50 characters a word at a time (``--pace`` seconds apart) and logs
when it handed on each delta (wall time). This process submits the run and follows it
(``Run.follow``: LISTEN/NOTIFY), timing each event an observer is handed. For every chunk the chunker
cuts it reports the delay from the worker handing on the delta that completed the chunk to this
process having the chunk's text (a stream chunk reaching past it, or the step's completion when none
came first): median, p95 and max over ``--runs`` runs per policy, interleaved, each policy with its own
worker and schema:

- ``prompt``: ``PROMPT`` (``StreamCommits(within=0)``), the default on PostgreSQL now: chunks committed
  on the event loop's next turn;
- ``deferred``: ``DEFERRED`` (the default on DuckDB: deltas wait, chunks held, committed every 0.2 s);
- ``baseline``: ``StreamCommits(within=inf)``, the code path before ``StreamCommits``
  (chunks held until the step completes, fails, or 64 wait).

Run: ``.venv/bin/python bench/live_stream.py [--runs 5] [--pace 0.02] [--url URL]``
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loom_nb.journal.events import EventKind  # noqa: E402
from loom_nb.kernel import DEFERRED, PROMPT, StreamCommits  # noqa: E402
from loom_nb.runtime import Runtime  # noqa: E402
from loom_nb.worker import Worker  # noqa: E402
from tests.workers.stream_agents import answer, narrator, read_delta_log, shown_delays  # noqa: E402

URL = os.environ.get("LOOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
POLICIES = {"prompt": PROMPT, "deferred": DEFERRED, "baseline": StreamCommits(within=math.inf)}


def fresh_schema(url: str, name: str) -> str:
    """Drop and create schema ``name``; the URL whose search path is it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"


def drop_schema(url: str, name: str) -> None:
    """Drop schema ``name``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def work(url: str, policy: str) -> None:
    """``--worker``: drive the submitted runs under ``policy`` until terminated."""
    rt = Runtime.open(url, stream_commits=POLICIES[policy])
    try:
        asyncio.run(Worker(rt, poll_seconds=0.5).run())
    finally:
        rt.close()


async def follow_one(rt: Runtime, run_id: str, log: Path) -> tuple[list[float], int]:
    """Submit ``run_id``, follow it to its end; the delays of its chunks and how many chunk events came."""
    log.write_text("", encoding="utf-8")
    arrivals: list[tuple[float, Any]] = []
    stop = rt.observe(lambda e: arrivals.append((time.time(), e)), execution_id=run_id)
    try:
        run = narrator.submit(run_id, run_id, runtime=rt, view=False)
        await run.wait(timeout=120)
    finally:
        stop()
    assert run.status == "completed", run
    done = next(t for t, e in arrivals if e.kind == EventKind.STEP_COMPLETED and e.step_id == "#turn:0")
    chunks = [(t, e.data["text"]) for t, e in arrivals if e.kind == EventKind.STREAM_CHUNK]
    return shown_delays(answer(run_id), read_delta_log(str(log)), chunks, done), len(chunks)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


async def bench(url: str, runs: int, pace: float) -> None:
    """Start one worker per policy, run and follow ``runs`` runs of each (interleaved), report."""
    tmp = Path(tempfile.mkdtemp(prefix="loom-live-stream-"))
    names = {p: f"bench_live_stream_{p}" for p in POLICIES}
    urls = {p: fresh_schema(url, names[p]) for p in POLICIES}
    runtimes = {p: Runtime.open(urls[p]) for p in POLICIES}  # migrates before the worker opens it
    workers = {}
    for p in POLICIES:
        env = {**os.environ, "LOOM_STREAM_LOG": str(tmp / f"{p}.log"), "LOOM_STREAM_PACE": str(pace)}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", urls[p], "--policy", p]
        workers[p] = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    delays: dict[str, list[float]] = {p: [] for p in POLICIES}
    chunk_events: dict[str, int] = dict.fromkeys(POLICIES, 0)
    try:
        for i in range(runs):
            for p in POLICIES:
                got, n = await follow_one(runtimes[p], f"run-{i}", tmp / f"{p}.log")
                delays[p] += got
                chunk_events[p] += n
    finally:
        for proc in workers.values():
            proc.terminate()
            proc.communicate(timeout=30)
        for p in POLICIES:
            runtimes[p].close()
            drop_schema(url, names[p])
    print(f"delta completing a chunk (worker) -> follower process has its text; pace {pace * 1000:.0f} ms/word")
    print(f"{'policy':<10}{'chunks':>8}{'events':>8}{'median ms':>11}{'p95 ms':>9}{'max ms':>9}")
    for p in POLICIES:
        d = [x * 1000 for x in delays[p]]
        print(
            f"{p:<10}{len(d):>8}{chunk_events[p]:>8}{statistics.median(d):>11.1f}"
            f"{percentile(d, 0.95):>9.1f}{max(d):>9.1f}"
        )


def main() -> None:
    """Parse the arguments; run the benchmark (or, with ``--worker``, one worker)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.02)
    parser.add_argument("--url", default=URL)
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--policy", choices=sorted(POLICIES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work(args.worker, args.policy)
        return
    asyncio.run(bench(args.url, args.runs, args.pace))


if __name__ == "__main__":
    main()
