"""``chunk_deltas``: batch a provider's token deltas to sentence boundaries before a durable sink."""

from __future__ import annotations

import re
from collections.abc import Callable

_BOUNDARY = re.compile(r"[.!?;:](?:[\"')\]]*)\s+|\n")


class DeltaChunker:
    """A delta sink that hands ``emit`` whole sentences of at least ``min_chars`` characters.

    Call it with each delta; call ``flush()`` at the end of the stream.

    Attributes:
        emit: Where chunks go (e.g. ``ctx.stream``).
        min_chars: Smallest chunk (unless flushed).
        chunks: How many chunks were emitted.
    """

    def __init__(self, emit: Callable[[str], None], *, min_chars: int = 40) -> None:
        self.emit = emit
        self.min_chars = min_chars
        self.chunks = 0
        self._buffer = ""

    def __call__(self, delta: str) -> None:
        """Take one delta; emit up to the last sentence boundary once the buffer is long enough."""
        self._buffer += delta
        if len(self._buffer) < self.min_chars:
            return
        cut = -1
        for match in _BOUNDARY.finditer(self._buffer):
            if match.end() >= self.min_chars:
                cut = match.end()
        if cut > 0:
            chunk, self._buffer = self._buffer[:cut], self._buffer[cut:]
            self.chunks += 1
            self.emit(chunk)

    def flush(self) -> None:
        """Emit what is left."""
        if self._buffer:
            chunk, self._buffer = self._buffer, ""
            self.chunks += 1
            self.emit(chunk)


def chunk_deltas(emit: Callable[[str], None], *, min_chars: int = 40) -> DeltaChunker:
    """Wrap a durable sink so deltas reach it a sentence at a time (at least ``min_chars``).

    Transient sinks (the cell) can take every delta; a durable one should not, since each call
    appends an event.
    """
    return DeltaChunker(emit, min_chars=min_chars)
