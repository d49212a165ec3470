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
