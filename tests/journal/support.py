"""Helpers for looking at journaled events, shared by every folder's tests.

Import as ``from tests.journal.support import kinds, shape, copy_prefix``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
