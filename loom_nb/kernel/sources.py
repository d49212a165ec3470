"""Protocols for what the kernel is injected with: a clock, an id source, a random source."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """Where the kernel gets time from (never the wall clock directly)."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fake clock advances instantly)."""
        ...


class IdSource(Protocol):
    """Where execution ids come from."""

    def new_id(self) -> str:
        """A fresh id."""
        ...


class RandomSource(Protocol):
    """Where ``ctx.random()`` draws from."""

    def random(self) -> float:
        """A float in [0, 1)."""
        ...
