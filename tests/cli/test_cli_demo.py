"""`loom-nb demo`: runs end to end; interrupted with Ctrl-C at the prompt, run again, it resumes."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loom_nb.journal import DuckDBJournal, EventKind

DEMO = [sys.executable, "-m", "loom_nb.cli", "demo"]


def _run(cwd: Path, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DEMO, *args], cwd=cwd, capture_output=True, text=True, timeout=120, stdin=stdin)


@pytest.mark.slow
def test_demo_runs_end_to_end_with_yes(tmp_path: Path) -> None:
    out = _run(tmp_path, "--yes")
    assert out.returncode == 0, out.stderr
    assert "Starting run demo-1" in out.stdout
    assert "Approve delete_file(path=" in out.stdout
    assert "I deleted 2 file(s)" in out.stdout
    assert "#turn:1:tool:1" in out.stdout  # the steps table
    assert sorted(p.name for p in (tmp_path / "loom-demo-files").iterdir()) == ["notes.md"]


@pytest.mark.slow
def test_demo_without_a_tty_asks_for_yes(tmp_path: Path) -> None:
    out = _run(tmp_path)
    assert out.returncode == 2
    assert "pass --yes" in out.stderr


@pytest.mark.slow
def test_demo_refusal_reaches_the_model(tmp_path: Path) -> None:
    out = _run(tmp_path, "--no")
    assert out.returncode == 0, out.stderr
    assert "I deleted 0 file(s) and kept 2 you refused" in out.stdout
    assert len(list((tmp_path / "loom-demo-files").iterdir())) == 3


def _read_until(fd: int, needle: bytes, timeout: float = 60.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"never saw {needle!r}; got {seen.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.slow
def test_ctrl_c_at_the_prompt_then_run_again_resumes_the_same_run(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo on a terminal
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background CI shell may have it ignored
        os.chdir(tmp_path)
        os.execv(sys.executable, DEMO)
    status = -1
    try:
        _read_until(fd, b"[y/N]")
        # Ctrl-C: the terminal sends SIGINT to the process at the prompt (sent directly, since a pty
        # whose line discipline has ISIG off would only echo the ^C character).
        os.kill(pid, signal.SIGINT)
        tail = _read_until(fd, b"run the demo again")
        assert b"Interrupted" in tail
    finally:
        for _ in range(100):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130

    out = _run(tmp_path, "--yes")
    assert out.returncode == 0, out.stderr
    assert "Resuming run demo-1" in out.stdout
    assert "Starting run" not in out.stdout
    assert "I deleted 2 file(s)" in out.stdout

    journal = DuckDBJournal(tmp_path / "loom.duckdb")
    try:
        events = journal.read("demo-1")
        started = [e.step_id for e in events if e.kind == EventKind.STEP_STARTED]
        assert started.count("#turn:0") == 1, "turn 0 ran again after the interruption"
        assert started.count("#turn:0:tool:0") == 1, "list_files ran again after the interruption"
        assert [r.execution_id for r in journal.list_executions()] == ["demo-1"]
    finally:
        journal.close()
