"""A damaged or closed journal file is a ``JournalError`` that names the file and the fix, never a
raw DuckDB exception: a file cut in half, a file that is not a journal, overwritten blocks (a
checksum that does not match), a read after close. Each on a real file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loom_nb.errors import JournalCorruptError, JournalReadError
from loom_nb.journal import DuckDBJournal, Event, EventKind
from loom_nb.runtime import Runtime


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    """A real journal of about 2 MB (one execution with a large input)."""
    path = tmp_path / "journal.duckdb"
    journal = DuckDBJournal(path)
    started = {"flow": "f", "input": "x" * 300_000, "principal": None}
    journal.append([Event("e1", 1, EventKind.EXECUTION_STARTED, None, 1.0, started)])
    journal.close()
    return path


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        os.truncate(path, len(data) // 2)
        return
    if how == "not-a-journal":
        data[:64] = b"\xff" * 64
    else:  # overwritten blocks: every 16 KiB after the headers
        for offset in range(16384, len(data), 16384):
            data[offset : offset + 64] = b"\xab" * 64
    path.write_bytes(bytes(data))


def use(path: Path, read_only: bool) -> None:
    journal = DuckDBJournal(path, read_only=read_only)
    try:
        journal.list_executions()
        journal.read("e1")
    finally:
        journal.close()


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
@pytest.mark.parametrize("how", ["truncated", "not-a-journal", "overwritten"])
@pytest.mark.slow
def test_a_damaged_file_is_a_journal_corrupt_error_naming_the_file_and_the_fix(
    journal_file: Path, how: str, read_only: bool
) -> None:
    damage(journal_file, how)
    with pytest.raises(JournalCorruptError) as info:
        use(journal_file, read_only)
    message = str(info.value)
    assert str(journal_file) in message
    assert "Move the file aside" in message and "restore it from a copy" in message
    assert info.value.__cause__ is not None  # DuckDB's own words are kept


def test_runtime_open_on_a_damaged_file_is_a_journal_error(journal_file: Path) -> None:
    damage(journal_file, "truncated")
    with pytest.raises(JournalCorruptError, match="is damaged"):
        Runtime.open(journal_file).close()


def test_reading_a_closed_journal_says_to_open_it_again(journal_file: Path) -> None:
    journal = DuckDBJournal(journal_file, read_only=True)
    journal.close()
    for read in (lambda: journal.read("e1"), journal.list_executions, lambda: journal.get_execution("e1")):
        with pytest.raises(JournalReadError, match=r"is closed .* open it again"):
            read()


def test_a_text_file_is_not_a_duckdb_file_and_a_missing_folder_is_named(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(JournalCorruptError, match=r"is not a DuckDB file") as info:
        Runtime.open(notes).close()
    assert "damaged" not in str(info.value) and "cannot be recovered" not in str(info.value)
    with pytest.raises(JournalReadError, match=r"its folder .*nope does not exist\. Create the folder") as missing:
        Runtime.open(tmp_path / "nope" / "loom.duckdb").close()
    assert "another thread" not in str(missing.value)
