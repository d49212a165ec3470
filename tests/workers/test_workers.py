"""Workers on a shared PostgreSQL journal: ``agent.submit`` queues, ``loom-nb worker`` processes run.

Real worker subprocesses (``python -m loom_nb.cli worker``): two workers run 20 submitted executions,
each exactly once; a worker SIGKILLed mid-run is continued by another once its lease expires, with
no completed call made again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal.events import EventKind
from loom_nb.runtime import Runtime
from tests import stores
from tests.workers.worker_agents import clerk, courier

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


def seen_append(seen: list[int]) -> Any:
    """An event observer that appends each event's seq to ``seen``."""
    return lambda e: seen.append(e.seq)


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


def test_an_append_notifies_the_journal_channel(_postgres_server: str) -> None:
    rt = Runtime.open(stores.new_schema("notify"))
    conn = rt.journal.listener()
    try:
        clerk.submit("n", "job-n", runtime=rt)
        notes = list(conn.notifies(timeout=5, stop_after=1))
        assert [(n.channel, n.payload) for n in notes] == [(rt.journal.channel, "job-n")]
    finally:
        conn.close()
        rt.close()


@pytest.mark.slow
def test_a_notebook_follows_a_worker_run_and_its_answer_wakes_the_worker(_postgres_server: str, tmp_path: Path) -> None:
    """The test process is the notebook: it submits, follows the run a worker drives (woken by
    LISTEN), approves the gate; the worker, woken by the answer's NOTIFY, runs on."""
    url = stores.new_schema("follow")
    worker = _worker(url, tmp_path / "calls.log")
    rt = Runtime.open(url)

    async def scenario() -> list[float]:
        wakes = []
        for i in range(5):
            run = courier.submit(f"p{i}", f"job-p{i}", runtime=rt)
            seen: list[int] = []
            rt.observe(seen_append(seen), execution_id=run.id)
            await run.wait(until="suspended", timeout=30)
            run.gates[0].approve()
            await run.wait(timeout=30)
            assert run.status == "completed"
            events = rt.journal.read(run.id)
            # the live view's feed: every event the worker committed from when the follow began, in order
            assert seen and seen == list(range(seen[0], events[-1].seq + 1))
            assert any(e.kind == EventKind.EXECUTION_COMPLETED and e.seq in seen for e in events)
            resumed = next(e for e in events if e.kind == EventKind.EXECUTION_RESUMED)
            after = next(e for e in events if e.seq == resumed.seq + 1)
            wakes.append((after.at - resumed.at) * 1000)  # the worker's first commit after the answer
        return wakes

    try:
        wakes = asyncio.run(scenario())
        print(f"answer -> worker's next commit, ms: {[round(w, 1) for w in wakes]}; median {sorted(wakes)[2]:.1f}")
        assert sorted(wakes)[2] < 250  # the target is 50 ms; a loose bound for a shared 2-core machine
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
        rt.close()


@pytest.mark.slow
def test_a_non_idempotent_call_cut_by_a_sigkill_goes_in_doubt_on_the_next_worker(
    _postgres_server: str, tmp_path: Path
) -> None:
    url = stores.new_schema("indoubt")
    log = tmp_path / "calls.log"
    rt = Runtime.open(url)
    try:
        clerk.submit("y", "job-y", runtime=rt)
        first = _worker(url, log, "--lease-seconds", "2", env={"LOOM_WORKER_PAUSE": "30"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # ``record`` made its call and sleeps in it
            if _calls(log):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the first worker never started the call")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=10)
        second = _worker(url, log, "--lease-seconds", "2")
        try:
            while rt.journal.get_execution("job-y").status == "running" and time.monotonic() < deadline + 30:
                time.sleep(0.05)
        finally:
            second.terminate()
            _, err = second.communicate(timeout=30)
        result = rt.result("job-y")
        assert result.status == "suspended", err
        assert [g.kind for g in result.gates] == ["InDoubt"]
        assert _calls(log) == Counter({"y": 1})  # made once by the killed worker, not made again
    finally:
        rt.close()


def test_a_worker_needs_a_shared_journal() -> None:
    from loom_nb.errors import UsageError
    from loom_nb.worker import Worker

    rt = Runtime.open(":memory:")
    try:
        with pytest.raises(UsageError, match="shared PostgreSQL journal"):
            Worker(rt)
        with pytest.raises(UsageError, match="on="):
            clerk.map(["a"], on="elsewhere", runtime=rt)  # type: ignore[arg-type]
    finally:
        rt.close()


def _approval_cards(widget: Any) -> list[Any]:
    from loom_nb.notebook.cards import ApprovalCard

    found = [widget] if isinstance(widget, ApprovalCard) else []
    for child in getattr(widget, "children", ()):
        found += _approval_cards(child)
    return found


def _at_store_precision(state: Any, stored: Any) -> Any:
    """``state`` with each gate time that is within 2 µs of ``stored``'s taken from ``stored``: the
    answer this process commits is handed to its observers with the clock's float, and PostgreSQL
    keeps it to the microsecond (a float near 1.8e9 s holds about 0.2 µs, so rounding both sides
    can still land on neighbouring microseconds). A time further off stays, and fails the check."""
    from dataclasses import replace

    def near(t: float | None, u: float | None) -> float | None:
        return u if t is not None and u is not None and abs(t - u) <= 2e-6 else t

    gates = {}
    for k, g in state.gates.items():
        s = stored.gates.get(k)
        gates[k] = (
            g
            if s is None
            else replace(g, opened_at=near(g.opened_at, s.opened_at), resolved_at=near(g.resolved_at, s.resolved_at))
        )
    return replace(state, gates=gates)


@pytest.mark.slow
def test_the_live_view_follows_a_worker_run_and_its_approve_button_works(_postgres_server: str, tmp_path: Path) -> None:
    """A notebook's live view of a run a worker drives: it shows the worker's events as they commit
    (woken by LISTEN), and its card's Approve click wakes the worker, which finishes the run."""
    from loom_nb.agent.run import Run
    from loom_nb.notebook.run_view import RunView

    url = stores.new_schema("view")
    worker = _worker(url, tmp_path / "calls.log")
    rt = Runtime.open(url)

    async def scenario() -> str:
        run = courier.submit("v", "job-v", runtime=rt, view=False)
        view = RunView(run)  # built before the worker's first commit: everything after comes by NOTIFY
        await run.wait(until="suspended", timeout=30)
        await asyncio.sleep(0.05)  # the view hears the gate's events
        cards = _approval_cards(view)
        assert len(cards) == 1
        cards[0].approve.click()
        await run.wait(timeout=30)
        await asyncio.sleep(0.05)
        # the followed view folds the same events as a view rebuilt from the journal (it hears
        # "completed" before the worker's last events reach it, and reads them before it settles)
        rebuilt = RunView(Run.attach(Runtime.open(url), run.id, agent=courier))
        assert _at_store_precision(view.state, rebuilt.state) == rebuilt.state
        assert view.usage_text() == rebuilt.usage_text() and "over 2 model call(s)" in view.usage_text()
        assert [r.text() for r in view.tool_rows.values()] == [r.text() for r in rebuilt.tool_rows.values()]
        rebuilt.run.runtime.close()
        return view.text()

    try:
        text = asyncio.run(scenario())
        assert "completed" in text and "sent v" in text, text
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
        rt.close()


@pytest.mark.slow
def test_a_run_cancelled_from_a_notebook_stops_on_its_worker_and_its_call_in_flight_goes_in_doubt(
    _postgres_server: str, tmp_path: Path
) -> None:
    """The test process is the notebook: it cancels a run a worker drives while the worker is inside
    a non-idempotent call (``record`` sleeps 30 s after making it). The cancel is recorded with the
    call in doubt; the worker, woken by the cancel's NOTIFY, stops the run at once (its lease is
    released within seconds, not when the call returns) and records nothing more."""
    url = stores.new_schema("cancel")
    log = tmp_path / "calls.log"
    rt = Runtime.open(url)
    worker = _worker(url, log, env={"LOOM_WORKER_PAUSE": "30"})

    async def scenario() -> float:
        run = clerk.submit("c", "job-c", runtime=rt, view=False)
        deadline = time.monotonic() + 60
        while not _calls(log) and time.monotonic() < deadline:  # ``record`` made its call, sleeps in it
            await asyncio.sleep(0.05)
        assert _calls(log) == Counter({"c": 1})
        assert rt.journal.lease_owner("job-c") not in (None, rt.lease_owner)  # the worker drives it
        result = run.cancel("the customer called")
        if not hasattr(result, "status"):
            result = await result
        assert result.status == "cancelled"
        cancelled_at = time.monotonic()
        while rt.journal.lease_owner("job-c") is not None and time.monotonic() < cancelled_at + 20:
            await asyncio.sleep(0.05)
        return time.monotonic() - cancelled_at

    try:
        released = asyncio.run(scenario())
        assert released < 10, f"the worker held the run {released:.1f} s after the cancel"
        time.sleep(0.5)
        kinds = [(e.kind, e.step_id) for e in rt.journal.read("job-c")]
        assert kinds[-2:] == [(EventKind.STEP_IN_DOUBT, "#turn:0:tool:0"), (EventKind.EXECUTION_CANCELLED, None)]
        assert rt.result("job-c").status == "cancelled"
        assert worker.poll() is None  # the worker goes on serving the queue
        print(f"the worker let the cancelled run go {released:.2f} s after the cancel")
    finally:
        worker.kill()
        _, err = worker.communicate(timeout=30)
        rt.close()
    assert "Traceback" not in err, err[-2000:]


def test_a_second_notebook_does_not_call_a_run_a_worker_drives_left_by_a_crash(_postgres_server: str) -> None:
    """``%load_ext`` / ``%loom pending`` / ``%loom recover`` in a notebook on the shared journal: a
    running execution whose lease another process holds is driven, not left by a crash; once nobody
    holds it, it is."""
    from loom_nb.notebook.extension import crash_report, left_running

    rt = Runtime.open(stores.new_schema("left-running"))
    try:
        clerk.submit("l", "job-l", runtime=rt, view=False)
        assert rt.journal.claim_queued("a-worker", 30, 1) == ["job-l"]  # a worker took it and drives it
        assert left_running(rt) == [] and not any("left running" in line for line in crash_report(rt))
        rt.journal.release_lease("job-l", "a-worker")  # as if its lease had expired: nobody drives it
        assert left_running(rt) == ["job-l"]
        assert any("left running" in line and "job-l" in line for line in crash_report(rt))
    finally:
        rt.close()
