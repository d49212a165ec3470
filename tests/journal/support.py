"""Helpers for looking at journaled events, shared by every folder's tests.

Import as ``from tests.journal.support import kinds, shape, copy_prefix``; ``full_tmpfs`` and
``fill`` make a real full disk.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import Event, InMemoryJournal


def kinds(events: Iterable[Event]) -> list[str]:
    """The kinds of ``events``, in order."""
    return [str(e.kind) for e in events]


def attempts_of(events: Iterable[Event]) -> list[int | None]:
    """The attempt each event is about, in either event format (format 2 leaves out a first
    ``step_started``'s number and a ``step_completed``'s: the step's latest attempt); None for an
    event that is not about a step attempt."""
    latest: dict[str | None, int] = {}
    out: list[int | None] = []
    for e in events:
        attempt = e.data.get("attempt")
        if attempt is None and e.kind == "step_started":
            attempt = 1
        elif attempt is None and e.kind == "step_completed":
            attempt = latest.get(e.step_id)
        if e.kind == "step_started":
            latest[e.step_id] = attempt
        out.append(attempt)
    return out


def shape(events: Iterable[Event]) -> list[tuple[int, str, str | None, dict[str, Any]]]:
    """``(seq, kind, step_id, data)`` of each event: what must never change once committed."""
    return [(e.seq, str(e.kind), e.step_id, e.data) for e in events]


def copy_prefix(events: list[Event], upto_seq: int) -> InMemoryJournal:
    """A fresh in-memory journal holding ``events`` up to and including ``upto_seq``, appended as one
    batch, as a crash right after that commit would have left it."""
    journal = InMemoryJournal()
    journal.append([e for e in events if e.seq <= upto_seq])
    return journal


@contextmanager
def full_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    """A real ``size`` tmpfs mounted at ``path`` (a fresh folder), unmounted afterwards; skips
    the test unless it runs as root (mounting needs it) and ``mount`` works.

    Yields ``path``; fill it with ``fill(path)``."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a real full disk) needs root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until the disk is full; returns it (unlink it to free the space)."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler
