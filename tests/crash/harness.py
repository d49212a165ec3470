"""The crash harness shared by the crash suites: run a flow script in a fresh process (that a crash
switch may kill), then read what it left behind: the DuckDB journal file and the calls log.

Each script is launched by path with this interpreter (``python tests/crash/<flow>.py ...``) and
imports itself back as ``tests.crash.<flow>`` (see its ``__main__`` block), so the names it persists
(gate schemas) resolve in the test process too. Import as ``from tests.crash.harness import ...``;
the fixtures built on it (``uninterrupted``) live in ``conftest.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loom_nb.journal import Event, EventKind
from tests import stores

#: The journal file every script writes, in the directory a test gives it (on the DuckDB run;
#: ``stores.target`` gives the PostgreSQL schema on the other).
JOURNAL = "journal.duckdb"


@dataclass
class ScriptOutcome:
    """How a crash-test script's process ended: its exit code, the JSON result it printed, stderr."""

    returncode: int
    result: dict[str, Any] | None
    stderr: str


def run_script(script: Path, *args: str) -> ScriptOutcome:
    """Run ``python <script> <args...>`` in a fresh process; the last line it prints (when it exits 0)
    is its JSON result."""
    proc = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=120, check=False
    )
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    return ScriptOutcome(proc.returncode, result, proc.stderr)


def read_journal_file(path: Path | str, execution_id: str) -> list[Event]:
    """One execution's events from a DuckDB journal file nobody else holds (opened read-only), or
    from a PostgreSQL journal (a URL, ``stores.target``)."""
    journal = stores.open_journal(str(path), read_only=True)
    try:
        return journal.read(execution_id)
    finally:
        journal.close()


@dataclass(frozen=True)
class CrashScript:
    """A flow script of the ``<journal> <calls log> <crash|none> <mode>`` kind, in a test's directory.

    Attributes:
        script: The script's path.
        execution_id: The execution it starts.
        log: The name of the calls log it appends ``<what> <idempotency key> <attempt>`` lines to.
    """

    script: Path
    execution_id: str
    log: str = "calls.log"

    def run(self, where: Path, crash: int | str | None, mode: str) -> ScriptOutcome:
        """Run ``mode`` (``start`` or ``recover``) over the journal in ``where``; ``crash`` as the
        script reads it (``None``: do not crash)."""
        crash_arg = "none" if crash is None else str(crash)
        return run_script(self.script, stores.target(where), str(where / self.log), crash_arg, mode)

    def events(self, where: Path) -> list[Event]:
        """The execution's events in ``where``'s journal (of the running test's store)."""
        return read_journal_file(stores.target(where), self.execution_id)

    def calls(self, where: Path) -> list[tuple[str, str, int]]:
        """``(what, idempotency key, attempt)`` of every call the log holds, in order."""
        path = where / self.log
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            what, key, attempt = line.split(" ")
            out.append((what, key, int(attempt)))
        return out

    def step_of(self, key: str) -> str:
        """The step id an idempotency key names."""
        return key.removeprefix(f"{self.execution_id}:")


def completed(events: list[Event]) -> set[str]:
    """Step ids with a ``step_completed``."""
    return {e.step_id or "" for e in events if e.kind == EventKind.STEP_COMPLETED}


def in_flight(events: list[Event]) -> dict[str, Event]:
    """Steps whose last ``step_started`` has no outcome: step id -> that step_started."""
    open_steps: dict[str, Event] = {}
    for e in events:
        if e.kind == EventKind.STEP_STARTED:
            open_steps[e.step_id or ""] = e
        elif e.kind in (EventKind.STEP_COMPLETED, EventKind.STEP_FAILED, EventKind.STEP_IN_DOUBT):
            open_steps.pop(e.step_id or "", None)
    return open_steps
