"""One read-write journal per file in a process (``docs/design.md``, section 7, "A second runtime in
one process"): a second ``Runtime.open`` of a file this process holds is a ``JournalLockedError``
naming the file and the fix, so its ``recover()`` cannot take over a run the first one is running."""

from __future__ import annotations

import asyncio
import gc
import os
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.errors import JournalError, JournalLockedError, UsageError
from loom_nb.journal import DuckDBJournal
from loom_nb.journal.events import EventKind
from loom_nb.kernel import FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds


def open_runtime(path: Path | str) -> loom.Runtime:
    return loom.Runtime.open(path, clock=FakeClock(), ids=SequentialIds(), flows=FlowRegistry())


async def test_a_second_runtime_on_a_file_this_process_holds_is_refused_while_a_run_is_live(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    first = open_runtime(path)
    entered, release = asyncio.Event(), asyncio.Event()
    charges: list[int] = []

    async def charge(value: Any) -> str:
        entered.set()
        await release.wait()
        charges.append(1)
        return "charged"

    first.effects.register("charge", charge)

    async def body(ctx: Any, input: Any) -> Any:
        return await ctx.execute("charge", input)

    flow = first.flows.register(body, "pay")
    run = asyncio.ensure_future(first.start(flow, 5, execution_id="pay-1"))
    await entered.wait()  # the charge is in flight in the first runtime

    for spelling in (path, tmp_path / "." / "journal.duckdb"):
        with pytest.raises(JournalLockedError) as info:
            open_runtime(spelling)
        message = str(info.value)
        assert str(spelling) in message and "already open read-write in this process" in message
        assert "Use the runtime you have" in message and "close it first" in message

    release.set()
    result = await run
    assert result.status == "completed" and charges == [1]
    kinds = [e.kind for e in first.journal.read("pay-1")]
    assert EventKind.STEP_IN_DOUBT not in kinds and EventKind.GATE_OPENED not in kinds
    first.close()

    again = open_runtime(path)  # closed: the file may be opened again
    assert again.result("pay-1").status == "completed"
    again.close()


def test_read_only_beside_read_only_and_memory_journals_are_not_held(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    open_runtime(path).close()
    a, b = loom.Runtime.open(path, read_only=True), loom.Runtime.open(path, read_only=True)
    m1, m2 = open_runtime(":memory:"), open_runtime(":memory:")
    for rt in (a, b, m1, m2):
        rt.close()


@pytest.mark.slow
def test_a_journal_dropped_without_close_does_not_hold_the_file(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    dropped = DuckDBJournal(path)
    with pytest.raises(JournalLockedError):
        DuckDBJournal(path)
    del dropped
    gc.collect()
    DuckDBJournal(path).close()


def test_a_second_path_to_the_same_file_through_a_hard_link_is_refused(tmp_path: Path) -> None:
    """The guard keys a file by device and inode, not by its path: a hard link (or a bind mount)
    is another path to the same file, and a second DuckDB database on it would lose commits."""
    path = tmp_path / "journal.duckdb"
    first = open_runtime(path)
    link = tmp_path / "link.duckdb"
    os.link(path, link)

    with pytest.raises(JournalLockedError) as info:
        open_runtime(link)
    message = str(info.value)
    assert str(link) in message and str(path) in message, message
    assert "already open read-write in this process" in message
    with pytest.raises(JournalError, match="this process already has it open read-write") as read_only:
        DuckDBJournal(link, read_only=True)
    assert str(path) in str(read_only.value)  # a read-only second database on it would read stale rows

    async def body(ctx: Any, input: Any) -> Any:
        return input

    flow = first.flows.register(body, "echo")
    assert asyncio.run(first.start(flow, 1, execution_id="kept")).status == "completed"
    first.close()
    again = open_runtime(link)  # closed: the file may be opened again through either path
    assert again.result("kept").status == "completed"
    again.close()


def test_a_snapshot_onto_a_hard_link_of_the_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    journal = DuckDBJournal(path)
    journal.close()
    os.link(path, tmp_path / "link.duckdb")
    journal = DuckDBJournal(path)
    with pytest.raises(UsageError, match="onto itself"):
        journal.snapshot(tmp_path / "link.duckdb", overwrite=True)
    journal.close()
