"""``Throttle``: coalesce display updates to at most one per interval, keeping the last one.

A model streams deltas far faster than a browser should be told about them. The view keeps every
delta in a buffer and asks a ``Throttle`` to refresh the display: the first request refreshes at
once, later ones within ``interval`` seconds are folded into one trailing refresh scheduled on the
running event loop. Without a loop (a script, a test) the trailing refresh waits for the next
request after the interval, or for ``flush()``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Throttle:
    """Call ``refresh`` at most once per ``interval`` seconds, never dropping the last request.

    Args:
        refresh: What to call (e.g. copy a text buffer into a widget).
        interval: The least time between two calls, in seconds (0.05: at most 20 a second).
        clock: A monotonic clock (seconds).

    Attributes:
        calls: How many times ``refresh`` ran.
    """

    def __init__(
        self,
        refresh: Callable[[], None],
        *,
        interval: float = 0.05,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.refresh = refresh
        self.interval = interval
        self.clock = clock
        self.calls = 0
        self._last = float("-inf")
        self._handle: asyncio.TimerHandle | None = None
        self._pending = False

    @property
    def pending(self) -> bool:
        """True when a request has not reached ``refresh`` yet."""
        return self._pending

    def request(self) -> None:
        """Ask for a refresh: now if the interval has passed, else once it has."""
        self._pending = True
        if self._handle is not None:
            return
        now = self.clock()
        wait = self._last + self.interval - now
        if wait <= 0:
            self._run(now)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next request after the interval (or flush()) refreshes
        self._handle = loop.call_later(wait, self._fire)

    def flush(self) -> None:
        """Refresh now if a request is pending (cancelling the scheduled one)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._pending:
            self._run(self.clock())

    def _fire(self) -> None:
        self._handle = None
        if self._pending:
            self._run(self.clock())

    def _run(self, now: float) -> None:
        self._pending = False
        self._last = now
        self.calls += 1
        self.refresh()
