"""Shared helpers for the kernel and journal tests.

Imported as ``kernel_helpers`` (tests/ is not a package; pytest puts it on ``sys.path``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom_nb.journal import DuckDBJournal, Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import EffectContext, Engine, FlowRegistry
from loom_nb.testing import FakeClock, SeededRandom, SequentialIds


def make_runtime(journal: JournalStore | None = None, *, flows: FlowRegistry | None = None) -> Engine:
    """A deterministic runtime: in-memory journal, fake clock (1 s per reading), sequential ids,
    seeded randomness and a private flow registry (tests never touch the process-wide one)."""
    return Engine(
        journal if journal is not None else InMemoryJournal(),
        clock=FakeClock(tick=1.0),
        ids=SequentialIds(),
        random=SeededRandom(7),
        flows=flows if flows is not None else FlowRegistry(),
    )


@dataclass
class Calls:
    """Records every effect invocation: ``(effect_id, input, idempotency_key, attempt)``."""

    log: list[tuple[str, Any, str, int]] = field(default_factory=list)

    def of(self, effect_id: str) -> list[tuple[str, Any, str, int]]:
        """The invocations of one effect."""
        return [c for c in self.log if c[0] == effect_id]


def register_recording(rt: Engine, calls: Calls, effect_id: str, fn: Any = None, *, idempotent: bool = False) -> None:
    """Register ``effect_id`` so that every invocation is appended to ``calls`` before ``fn`` runs
    (``fn(input)``; the default echoes ``{"effect": effect_id, "input": input}``)."""

    def effect(value: Any, ctx: EffectContext) -> Any:
        calls.log.append((effect_id, value, ctx.idempotency_key, ctx.attempt))
        if fn is None:
            return {"effect": effect_id, "input": value}
        return fn(value)

    rt.effects.register(effect_id, effect, idempotent=idempotent)


def kinds(events: Iterable[Event]) -> list[str]:
    """The kinds of ``events``, in order."""
    return [str(e.kind) for e in events]


def shape(events: Iterable[Event]) -> list[tuple[int, str, str | None, dict[str, Any]]]:
    """``(seq, kind, step_id, data)`` of each event: what must never change once committed."""
    return [(e.seq, str(e.kind), e.step_id, e.data) for e in events]


def copy_prefix(events: list[Event], upto_seq: int) -> InMemoryJournal:
    """A fresh in-memory journal holding ``events`` up to and including ``upto_seq``, appended as one
    batch, as a crash right after that commit would have left it."""
    journal = InMemoryJournal()
    journal.append([e for e in events if e.seq <= upto_seq])
    return journal


@dataclass
class ScriptOutcome:
    """How a crash-test script's process ended: its exit code, the JSON result it printed, stderr."""

    returncode: int
    result: dict[str, Any] | None
    stderr: str


def run_script(script: Path, journal: Path, log: Path, crash: int | str | None, mode: str) -> ScriptOutcome:
    """Run ``python <script> <journal> <log> <crash|none> <mode>`` in a fresh process; the last
    line it prints (when it exits 0) is its JSON result."""
    proc = subprocess.run(
        [sys.executable, str(script), str(journal), str(log), "none" if crash is None else str(crash), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    return ScriptOutcome(proc.returncode, result, proc.stderr)


def read_journal_file(path: Path, execution_id: str) -> list[Event]:
    """One execution's events from a DuckDB journal file nobody else holds (opened read-only)."""
    journal = DuckDBJournal(path, read_only=True)
    try:
        return journal.read(execution_id)
    finally:
        journal.close()
