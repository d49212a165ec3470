"""The fix a journal error ends with follows its cause (``loom_nb.journal.hints``), tried for real
where the fault can be made: a read-only filesystem (a read-only bind mount, needs root) on open and
on a commit, a duplicate key on every store, a folder given as the journal's path; "free disk space"
stays the fix of a full disk (``test_write_errors.py``)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from loom_nb.errors import JournalReadError, JournalWriteError
from loom_nb.journal import DuckDBJournal, Event, EventKind, JournalStore
from loom_nb.journal.hints import fix_for


@contextmanager
def read_only_mount(source: Path, target: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``target`` (a real read-only filesystem for writes)."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    source.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    for args in (["--bind", str(source), str(target)], ["-o", "remount,bind,ro", str(target)]):
        done = subprocess.run(["mount", *args], capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(target)], check=False)
            pytest.skip(f"cannot bind-mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def started(eid: str) -> list[Event]:
    return [Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": 1, "principal": None})]


def test_opening_a_journal_on_a_read_only_filesystem_says_so(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    journal = DuckDBJournal(source / "j.duckdb")
    journal.append(started("a"))
    journal.close()
    with read_only_mount(source, tmp_path / "ro") as ro, pytest.raises(JournalReadError) as info:
        DuckDBJournal(ro / "j.duckdb")
    message = str(info.value)
    assert "Read-only file system" in message and "cannot be written (a read-only filesystem" in message
    assert "another thread" not in message.lower()


def test_a_commit_refused_by_a_read_only_filesystem_says_so_not_free_disk_space(tmp_path: Path) -> None:
    journal = DuckDBJournal(tmp_path / "j.duckdb")
    journal.append(started("a"))
    journal.close()
    with read_only_mount(tmp_path / "src", tmp_path / "ro") as ro:
        # The WAL DuckDB opens at the next commit lies on the read-only mount.
        (tmp_path / "j.duckdb.wal").symlink_to(ro / "j.duckdb.wal")
        journal = DuckDBJournal(tmp_path / "j.duckdb")
        with pytest.raises(JournalWriteError) as info:
            journal.append([Event("a", 2, EventKind.WARNING, None, 2.0, {"code": "x", "message": "y"})])
        journal.close()
    message = str(info.value)
    assert "Read-only file system" in message and "cannot be written (a read-only filesystem" in message
    assert "free disk space" not in message.lower() and "runtime.recover()" in message


def test_a_duplicate_key_names_another_writer_not_free_disk_space(journal: JournalStore) -> None:
    journal.append(started("a"))
    with pytest.raises(JournalWriteError) as info:
        journal.append(started("a"))
    message = str(info.value)
    assert "Another runtime or process wrote this execution first" in message
    assert "free disk space" not in message.lower() and "runtime.recover()" in message


def test_a_folder_given_as_the_journal_says_it_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "folder.duckdb").mkdir()
    with pytest.raises(JournalReadError) as info:
        DuckDBJournal(tmp_path / "folder.duckdb")
    assert "is not a file" in str(info.value) and "another thread" not in str(info.value).lower()


def test_the_fix_follows_the_cause() -> None:
    default = "Fix the cause named above"
    notify = psycopg.errors.InvalidParameterValue("channel name too long")
    assert "NOTIFY" in fix_for(notify, default) and "disk" not in fix_for(notify, default)
    assert "disk space" in fix_for(OSError(28, "No space left on device"), default)
    assert "connection to the database server" in fix_for(
        psycopg.OperationalError("server closed the connection unexpectedly"), default
    )
    assert "thread" in fix_for(RuntimeError("the connection is busy"), default)
    wrapped = RuntimeError("commit failed")
    wrapped.__cause__ = OSError(30, "Read-only file system")
    assert "read-only" in fix_for(wrapped, default)
    assert fix_for(ValueError("something else"), default) == default
