"""Consistent copies of a journal (``docs/design.md``, section 7, "A journal copied without its
.wal"): a closed journal is one self-contained file, and ``snapshot`` writes a single-file copy while
runs go on, with every committed event, the executions projection, the content and the migrations."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.errors import UsageError
from loom_nb.journal import ContentBlob, DuckDBJournal, Event, digest_bytes
from loom_nb.journal.run_state import RunState
from loom_nb.kernel import FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds


def open_runtime(path: Path | str, **kwargs: Any) -> loom.Runtime:
    return loom.Runtime.open(path, clock=FakeClock(), ids=SequentialIds(), flows=FlowRegistry(), **kwargs)


def wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def fill(journal: DuckDBJournal, n: int) -> bytes:
    """``n`` executions of three events each, and one content blob; returns the blob's bytes."""
    data = b"the claim-checked bytes"
    for i in range(n):
        eid = f"e{i}"
        journal.append(
            [
                Event(eid, 1, "execution_started", None, 1.0, {"flow": "f", "input": i, "principal": {}}),
                Event(eid, 2, "value_recorded", "#v1", 2.0, {"kind": "now", "value": i}),
                Event(eid, 3, "execution_completed", None, 3.0, {"output": i}),
            ],
            [ContentBlob(digest_bytes(data), data, "text/plain", False)] if i == 0 else [],
        )
    return data


def test_a_closed_journal_is_one_self_contained_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    journal = DuckDBJournal(path)
    data = fill(journal, 40)
    assert wal(path).exists()  # open: the commits are in the WAL
    journal.close()
    assert not wal(path).exists() or wal(path).stat().st_size == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(path, elsewhere / "copy.duckdb")  # the main file alone
    copy = DuckDBJournal(elsewhere / "copy.duckdb", read_only=True)
    assert len(copy.list_executions()) == 40
    assert [e.seq for e in copy.read("e39")] == [1, 2, 3]
    assert copy.get_content(digest_bytes(data)) == data
    copy.close()


def test_a_snapshot_of_a_journal_in_use_holds_everything_committed(tmp_path: Path) -> None:
    path, target = tmp_path / "journal.duckdb", tmp_path / "snap.duckdb"
    journal = DuckDBJournal(path)
    data = fill(journal, 30)
    assert wal(path).exists()
    info = journal.snapshot(target)
    assert (info.path, info.events, info.executions, info.contents) == (target, 90, 30, 1)
    assert info.size == target.stat().st_size
    assert str(info) == f"wrote {target}: 90 events, 30 executions, 1 content blobs, {info.size} bytes"
    assert not wal(target).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if "snap" in p.name) == ["snap.duckdb"]  # no leftovers
    journal.append([Event("later", 1, "execution_started", None, 4.0, {"flow": "f", "input": 0, "principal": {}})])
    journal.close()
    # the copy alone, moved away from its source, opens with Runtime.open and reads back everything
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(target, moved / "snap.duckdb")
    rt = open_runtime(moved / "snap.duckdb")
    assert rt.journal.applied_migrations() == ["m001_initial", "m002_leases"]
    assert sorted(r.execution_id for r in rt.journal.list_executions()) == sorted(f"e{i}" for i in range(30))
    assert [r.status for r in rt.journal.list_executions()] == ["completed"] * 30
    assert rt.journal.get_content(digest_bytes(data)) == data
    assert [e.data for e in rt.journal.read("e29")][2] == {"output": 29}
    rt.close()


async def test_a_snapshot_taken_mid_run_is_a_consistent_prefix_that_recovers(tmp_path: Path) -> None:
    path, target = tmp_path / "journal.duckdb", tmp_path / "mid-run.duckdb"
    rt = open_runtime(path)
    taken: list[int] = []

    def add(value: Any) -> int:
        return int(value) + 1

    def snap(value: Any) -> int:
        # inside a step: earlier steps are committed, this one's events are staged
        taken.append(rt.snapshot(target).events)
        return int(value) * 10

    rt.effects.register("add", add, idempotent=True)
    rt.effects.register("snap", snap, idempotent=True)

    async def body(ctx: Any, value: Any) -> Any:
        a = await ctx.execute("add", value)
        b = await ctx.execute("snap", a)
        return await ctx.execute("add", b)

    flow = rt.flows.register(body, "snapshotting")
    result = await rt.start(flow, 1, execution_id="run-1")
    assert (result.status, result.output) == ("completed", 21)
    final = rt.journal.read("run-1")
    rt.close()

    copy = open_runtime(target)
    events = copy.journal.read("run-1")
    assert len(events) == taken[0] and 0 < len(events) < len(final)
    assert events == final[: len(events)]  # a prefix of what was committed, nothing staged in it
    state = RunState(execution_id="run-1")
    for e in events:
        state.apply(e)
    record = copy.journal.get_execution("run-1")
    assert record is not None and record.status == "running"
    # the copy is a journal like any other: recovery finishes the run from its prefix
    again: list[Any] = []
    copy.effects.register("add", add, idempotent=True)
    copy.effects.register("snap", lambda v: again.append(v) or int(v) * 10, idempotent=True)
    copy.flows.register(body, "snapshotting")
    (recovered,) = await copy.recover()
    assert (recovered.status, recovered.output) == ("completed", 21)
    copy.close()
    await asyncio.sleep(0)


def test_a_snapshot_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    path, target = tmp_path / "journal.duckdb", tmp_path / "snap.duckdb"
    target.write_bytes(b"precious")
    rt = open_runtime(path)
    with pytest.raises(UsageError) as info:
        rt.snapshot(target)
    assert str(target) in str(info.value) and "overwrite=True" in str(info.value)
    assert target.read_bytes() == b"precious"
    with pytest.raises(UsageError, match="onto itself"):
        rt.snapshot(tmp_path / "." / "journal.duckdb", overwrite=True)
    other = DuckDBJournal(tmp_path / "other.duckdb")  # a journal this process has open is no target
    with pytest.raises(UsageError, match="a journal open in this process holds it"):
        rt.snapshot(tmp_path / "other.duckdb", overwrite=True)
    other.close()
    assert rt.snapshot(target, overwrite=True).executions == 0
    rt.close()
    assert DuckDBJournal(target, read_only=True).list_executions() == []


def test_an_in_memory_journal_has_nothing_to_snapshot(tmp_path: Path) -> None:
    rt = open_runtime(":memory:")
    with pytest.raises(UsageError, match="in-memory journal"):
        rt.snapshot(tmp_path / "snap.duckdb")
    rt.close()
    assert not (tmp_path / "snap.duckdb").exists()


# Runs in a second process: commits events, then dies without closing (its WAL is left behind).
_KILLED_WRITER = """
import os, sys
from loom_nb.journal import DuckDBJournal, Event
journal = DuckDBJournal(sys.argv[1])
for i in range(25):
    journal.append([Event(f"e{i}", 1, "execution_started", None, 1.0, {"flow": "f", "input": i, "principal": {}})])
os._exit(0)
"""


@pytest.mark.slow
def test_a_read_only_snapshot_folds_in_the_wal_a_killed_writer_left(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    DuckDBJournal(path).close()  # the schema is checkpointed; the writer's events will only be in its WAL
    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], check=True, timeout=60)
    assert wal(path).stat().st_size > 0
    lone = tmp_path / "lone.duckdb"
    shutil.copyfile(path, lone)  # the main file without its WAL: the tail is silently missing
    with_no_wal = DuckDBJournal(lone, read_only=True)
    assert with_no_wal.list_executions() == []
    with_no_wal.close()

    reader = DuckDBJournal(path, read_only=True)
    info = reader.snapshot(tmp_path / "snap.duckdb")
    reader.close()
    assert (info.events, info.executions) == (25, 25)
    assert not wal(tmp_path / "snap.duckdb").exists()
    copy = DuckDBJournal(tmp_path / "snap.duckdb", read_only=True)
    assert len(copy.list_executions()) == 25
    copy.close()


@pytest.mark.slow
def test_snapshots_while_another_thread_commits_are_each_consistent(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    journal = DuckDBJournal(path)
    stop = threading.Event()
    errors: list[BaseException] = []

    def commit_runs() -> None:
        i = 0
        try:
            while not stop.is_set():
                eid = f"t{i}"
                journal.append(
                    [Event(eid, 1, "execution_started", None, 1.0, {"flow": "f", "input": i, "principal": {}})]
                )
                journal.append([Event(eid, 2, "value_recorded", "#v1", 2.0, {"kind": "now", "value": i})])
                journal.append([Event(eid, 3, "execution_completed", None, 3.0, {"output": i})])
                i += 1
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=commit_runs)
    writer.start()
    try:
        infos = [journal.snapshot(tmp_path / f"snap-{n}.duckdb") for n in range(8)]
    finally:
        stop.set()
        writer.join(timeout=60)
    journal.close()
    assert errors == []
    for info in infos:
        copy = DuckDBJournal(info.path, read_only=True)
        records = copy.list_executions()
        assert len(records) == info.executions
        for record in records:
            seqs = [e.seq for e in copy.read(record.execution_id)]
            assert seqs == list(range(1, len(seqs) + 1))  # a prefix, never a gap
            assert record.status == ("completed" if len(seqs) == 3 else "running")
        copy.close()
