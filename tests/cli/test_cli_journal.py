"""`loom-nb journal snapshot SRC DST`: a consistent single-file copy of a journal nobody holds; a
journal another process holds is a clear error that says to snapshot it in that process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loom_nb.journal import DuckDBJournal, Event

SNAPSHOT = [sys.executable, "-m", "loom_nb.cli", "journal", "snapshot"]


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SNAPSHOT, *map(str, args)], capture_output=True, text=True, timeout=120, check=False)


def _journal(path: Path, n: int) -> None:
    journal = DuckDBJournal(path)
    for i in range(n):
        journal.append(
            [
                Event(f"e{i}", 1, "execution_started", None, 1.0, {"flow": "f", "input": i, "principal": {}}),
                Event(f"e{i}", 2, "execution_completed", None, 2.0, {"output": i}),
            ]
        )
    journal.close()


@pytest.mark.slow
def test_snapshot_writes_the_copy_and_says_what_it_holds(tmp_path: Path) -> None:
    src, dst = tmp_path / "src.duckdb", tmp_path / "dst.duckdb"
    _journal(src, 12)
    out = _run(src, dst)
    assert out.returncode == 0, out.stderr
    size = dst.stat().st_size
    assert out.stdout.strip() == f"wrote {dst}: 24 events, 12 executions, 0 content blobs, {size} bytes"
    copy = DuckDBJournal(dst, read_only=True)
    assert len(copy.list_executions()) == 12 and len(copy.read("e11")) == 2
    copy.close()

    again = _run(src, dst)  # DST exists: refused, unless --overwrite
    assert again.returncode == 1
    assert f"{dst} already exists" in again.stderr and "--overwrite" in again.stderr
    assert _run(src, dst, "--overwrite").returncode == 0


@pytest.mark.slow
def test_a_missing_source_is_a_usage_error(tmp_path: Path) -> None:
    out = _run(tmp_path / "nope.duckdb", tmp_path / "dst.duckdb")
    assert out.returncode == 2
    assert f"there is no journal file {tmp_path / 'nope.duckdb'}" in out.stderr
    assert not (tmp_path / "dst.duckdb").exists()


@pytest.mark.slow
def test_a_journal_held_by_another_process_says_to_snapshot_it_there(tmp_path: Path) -> None:
    src, dst = tmp_path / "held.duckdb", tmp_path / "dst.duckdb"
    _journal(src, 3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom loom_nb import Runtime\n"
            f"rt = Runtime.open({str(src)!r})\nprint('ready', flush=True)\nsys.stdin.read()\nrt.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        out = _run(src, dst)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    assert out.returncode == 1
    assert f"the journal {src} is held by process {holder.pid}" in out.stderr
    assert "refuses even a read-only open" in out.stderr
    assert f"runtime.snapshot({str(dst)!r})" in out.stderr and f"%loom snapshot {dst}" in out.stderr
    assert "Traceback" not in out.stderr and "IO Error" not in out.stderr
    assert not dst.exists()
    assert _run(src, dst).returncode == 0  # once the holder is gone
