"""A failed append is a ``JournalWriteError`` whose cause is the real error (never DuckDB's
"cannot rollback - no transaction is active"), nothing of it is written, and the store works
again once the fault clears: on a real full disk (a 2 MiB tmpfs, needs root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.errors import JournalWriteError
from loom_nb.journal import DuckDBJournal, Event, EventKind
from tests.journal.support import fill, full_tmpfs

BIG = "x" * 200_000


def started(eid: str) -> list[Event]:
    return [
        Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": BIG, "principal": None}),
        Event(eid, 2, EventKind.STEP_STARTED, "#1", 2.0, {"effect": "e", "input": BIG}),
    ]


def steps(eid: str) -> list[Event]:
    return [Event(eid, 3, EventKind.STEP_COMPLETED, "#1", 3.0, {"effect": "e", "output": BIG})]


@pytest.mark.parametrize("path", ["transaction", "autocommit"])
def test_a_full_disk_fails_the_append_with_its_cause_and_writes_nothing(tmp_path: Path, path: str) -> None:
    with full_tmpfs(tmp_path / "disk") as disk:
        journal = DuckDBJournal(disk / "journal.duckdb")
        if path == "autocommit":  # events alone: one INSERT with no explicit transaction
            journal.append(started("e1"))
        before = journal.read("e1")
        filler = fill(disk)
        batch = started("e1") if path == "transaction" else steps("e1")
        with pytest.raises(JournalWriteError) as info:
            journal.append(batch)
        error = info.value
        assert "No space left on device" in str(error.__cause__)
        assert "no transaction is active" not in str(error) + str(error.__cause__)
        assert error.execution_id == "e1" and str(disk / "journal.duckdb") in str(error)
        assert "free disk space" in str(error).lower() and "runtime.recover()" in str(error)
        assert journal.read("e1") == before

        filler.unlink()
        journal.append(batch)  # the connection is usable again: no transaction was left open
        assert [e.seq for e in journal.read("e1")] == [e.seq for e in before + batch]
        journal.close()
