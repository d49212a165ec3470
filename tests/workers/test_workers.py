"""Workers on a shared PostgreSQL journal: ``agent.submit`` queues, ``loom-nb worker`` processes run.

Real worker subprocesses (``python -m loom_nb.cli worker``): two workers run 20 submitted executions,
each exactly once; a worker SIGKILLed mid-run is continued by another once its lease expires, with
no completed call made again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from loom_nb.journal.events import EventKind
from loom_nb.runtime import Runtime
from tests import stores
from tests.workers.worker_agents import clerk

ONE_STORE = "workers need the shared PostgreSQL journal"
ROOT = Path(__file__).resolve().parents[2]


def _worker(url: str, log: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "loom_nb.cli",
            "worker",
            "--journal",
            url,
            "--import",
            "tests.workers.worker_agents",
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "LOOM_WORKER_LOG": str(log), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _calls(log: Path) -> Counter[str]:
    return Counter(line.split(" ")[1] for line in log.read_text().splitlines()) if log.exists() else Counter()


def test_submit_records_a_queued_execution_and_runs_nothing(_postgres_server: str) -> None:
    rt = Runtime.open(stores.new_schema("submit"))
    try:
        run = clerk.submit("a", "job-a", runtime=rt)
        assert run.status == "queued"
        assert rt.journal.get_execution("job-a").status == "queued"
        assert [e.kind for e in rt.journal.read("job-a")] == [EventKind.EXECUTION_STARTED]
        assert rt.journal.list_executions("running") == []  # recover() leaves it to the workers
        assert clerk.submit("a", "job-a", runtime=rt).status == "queued"  # idempotent
        batch = clerk.map(["b", "c"], on="workers", runtime=rt, ids=["job-b", "job-c"])
        assert batch.counts["queued"] == 2
        assert {r.status for r in rt.journal.list_executions()} == {"queued"}
        # two claims never take the same execution
        first = rt.journal.claim_queued("w1", 30, 2)
        second = rt.journal.claim_queued("w2", 30, 5)
        assert sorted(first + second) == ["job-a", "job-b", "job-c"] and not set(first) & set(second)
        assert rt.journal.claim_queued("w3", 30, 5) == []
    finally:
        rt.close()


@pytest.mark.slow
def test_two_workers_run_twenty_submitted_executions_each_exactly_once(_postgres_server: str, tmp_path: Path) -> None:
    url = stores.new_schema("workers")
    log = tmp_path / "calls.log"
    rt = Runtime.open(url)
    try:
        ids = [f"job-{i:02d}" for i in range(20)]
        batch = clerk.map([f"item-{i}" for i in range(20)], ids=ids, on="workers", runtime=rt)
        assert batch.counts["queued"] == 20
        workers = [_worker(url, log, "--until-idle", "--concurrency", "4") for _ in range(2)]
        outs = [w.communicate(timeout=120) for w in workers]
        assert [w.returncode for w in workers] == [0, 0], [err for _, err in outs]
        batch.refresh()
        assert batch.counts["completed"] == 20
        for eid in ids:
            kinds = [e.kind for e in rt.journal.read(eid)]
            assert kinds.count(EventKind.EXECUTION_COMPLETED) == 1
            assert [e.seq for e in rt.journal.read(eid)] == list(range(1, len(kinds) + 1))
        assert _calls(log) == Counter({f"item-{i}": 1 for i in range(20)})  # each side effect once
        pids = Counter(line.split(" ")[2] for line in log.read_text().splitlines())
        print("executions per worker:", sorted(pids.values()))
    finally:
        rt.close()


@pytest.mark.slow
def test_a_sigkilled_worker_is_continued_by_another_once_its_lease_expires(
    _postgres_server: str, tmp_path: Path
) -> None:
    url = stores.new_schema("sigkill")
    log = tmp_path / "calls.log"
    rt = Runtime.open(url)
    try:
        clerk.submit("x", "job-x", runtime=rt)
        # The first worker makes the recorded call, then sits in its second model turn: kill it there.
        first = _worker(url, log, "--lease-seconds", "2", env={"LOOM_WORKER_SLOW_TURN": "0.5"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            kinds = [e.kind for e in rt.journal.read("job-x")]
            if kinds.count(EventKind.STEP_COMPLETED) >= 2:  # turn 0 and ``record`` committed
                break
            time.sleep(0.05)
        else:
            pytest.fail("the first worker never committed the call")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
        assert rt.journal.get_execution("job-x").status == "running"
        took = time.monotonic()
        second = _worker(url, log, "--lease-seconds", "2")  # waits on the queue; takes job-x once its lease expired
        try:
            while rt.journal.get_execution("job-x").status != "completed" and time.monotonic() < took + 60:
                time.sleep(0.05)
            finished = time.monotonic() - took
        finally:
            second.terminate()
            _, err = second.communicate(timeout=30)
        assert rt.result("job-x").status == "completed", err
        events = rt.journal.read("job-x")
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert _calls(log) == Counter({"x": 1})  # the completed call was not made again
        print(f"taken over and finished {finished:.2f} s after the kill (lease 2 s)")
    finally:
        rt.close()
