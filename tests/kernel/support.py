"""Helpers for the kernel tests: a deterministic ``Engine`` and a recorder of effect invocations.

Import as ``from tests.kernel.support import ...``; fixtures built on them live in ``conftest.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom_nb.journal.store import JournalStore
from loom_nb.kernel import EffectContext, Engine, FlowRegistry
from loom_nb.testing import FakeClock, SeededRandom, SequentialIds
from tests import stores


def make_runtime(journal: JournalStore | None = None, *, flows: FlowRegistry | None = None) -> Engine:
    """A deterministic runtime: in-memory journal (a PostgreSQL one on the PostgreSQL run), fake clock
    (1 s per reading), sequential ids,
    seeded randomness and a private flow registry (tests never touch the process-wide one)."""
    return Engine(
        journal if journal is not None else stores.default_journal(),
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
