"""The real clock, id source and random source: the only place that reads them.

The kernel and the agent loop never call ``time.time()``, ``uuid4()`` or ``random`` themselves;
they use what the ``Runtime`` was given (these by default, fakes from ``loom_nb.testing`` in tests).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid


class SystemClock:
    """Wall-clock time and real sleeping."""

    def now(self) -> float:
        """Seconds since the epoch."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep without blocking the event loop."""
        await asyncio.sleep(seconds)


class RandomIds:
    """Random 32-hex ids (uuid4)."""

    def new_id(self) -> str:
        """A fresh id."""
        return uuid.uuid4().hex


class SystemRandom:
    """Uniform floats in [0, 1) from a process-local generator."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def random(self) -> float:
        """A float in [0, 1)."""
        return self._random.random()
