"""A model step killed mid-stream (a real SIGKILL of the process running it, ``docs/design.md``,
section 4, rule 8) loses at most the chunk it had not finished: every sentence the chunker cut is in
the journal (on PostgreSQL at once, ``PROMPT``; on DuckDB within ``StreamCommits.within``,
``DEFERRED``), and a fresh process recovers the run to its whole answer.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loom_nb.journal import EventKind
from tests import stores
from tests.crash import stream_kill_flow as flow
from tests.crash.harness import read_journal_file, run_script

SCRIPT = Path(__file__).with_name("stream_kill_flow.py")
#: Seconds the test waits once the model stalled before it kills the process: past the deferred
#: bound (0.2 s), with room for a loaded machine.
AFTER_STALL = 1.0


def test_a_kill_mid_stream_loses_at_most_the_unfinished_chunk(tmp_path: Path) -> None:
    target, marker = stores.target(tmp_path), tmp_path / "stalled"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), target, str(marker), "start"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                _, err = proc.communicate(timeout=10)
                pytest.fail(f"the model never stalled (exit {proc.returncode}): {err.decode()[-2000:]}")
            time.sleep(0.02)
        time.sleep(AFTER_STALL)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    events = read_journal_file(target, flow.EXECUTION_ID)
    chunks = [e.data["text"] for e in events if e.kind == EventKind.STREAM_CHUNK]
    assert chunks == flow.SENTENCES  # each sentence as its own chunk, in order; only TAIL is lost
    assert not any(e.kind == EventKind.STEP_COMPLETED for e in events)

    outcome = run_script(SCRIPT, target, str(marker), "recover")
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.result == {"status": "completed", "output": flow.answer()}
    after = read_journal_file(target, flow.EXECUTION_ID)
    assert [e.data["text"] for e in after if e.kind == EventKind.STREAM_CHUNK][: len(chunks)] == chunks
