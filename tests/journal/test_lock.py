"""DuckDB is single-writer per file across processes: a second process gets ``JournalLockedError``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loom_nb.journal import DuckDBJournal

# Runs in a second process: try to open the journal, report what was raised as JSON.
_CHILD = """
import json, sys
from loom_nb.journal import DuckDBJournal
from loom_nb import Runtime
path, how = sys.argv[1], sys.argv[2]
try:
    if how == "runtime":
        Runtime.open(path)
    else:
        DuckDBJournal(path, read_only=(how == "read_only"))
except BaseException as exc:
    print(json.dumps({"module": type(exc).__module__, "type": type(exc).__name__,
                      "mro": [c.__name__ for c in type(exc).__mro__], "message": str(exc)}))
else:
    print(json.dumps({"type": None}))
"""


def _open_in_child(path: Path, how: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), how],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("how", ["read_write", "read_only", "runtime"])
@pytest.mark.slow
def test_second_process_gets_journal_locked_error(tmp_path: Path, how: str) -> None:
    path = tmp_path / "held.duckdb"
    holder = DuckDBJournal(path)
    try:
        got = _open_in_child(path, how)
    finally:
        holder.close()
    assert (got["module"], got["type"]) == ("loom_nb.errors", "JournalLockedError")
    assert "JournalError" in got["mro"]  # type: ignore[operator]
    message = str(got["message"])
    assert str(path) in message
    assert f"process {os.getpid()}" in message
    assert "Close that kernel or process first" in message
    assert "read-only" in message and "PostgreSQL journal" in message and "loom-nb journal snapshot" in message
    assert "(command " in message and "opened 20" in message  # the lock record names who opened it
    # how to make a consistent copy, in the process that holds it (copying the file misses its .wal)
    assert "runtime.snapshot('copy.duckdb') or %loom snapshot copy.duckdb; then open the copy" in message
    said = re.sub(r" \(command .*?, opened [^)]*\)", "", message.replace(str(path), "P"))
    assert len(said) <= 3 * 130, said  # three lines at most, besides the path and who holds it
    # DuckDB's own words do not reach the user
    assert "IO Error" not in message and "Could not set lock" not in message


@pytest.mark.slow
def test_after_the_holder_closes_another_process_can_open_it(tmp_path: Path) -> None:
    path = tmp_path / "released.duckdb"
    DuckDBJournal(path).close()
    assert _open_in_child(path, "read_write") == {"type": None}
