"""``chunk_deltas``: batch a provider's token deltas to sentence boundaries before a durable sink."""

from __future__ import annotations

import re
from collections.abc import Callable

_BOUNDARY = re.compile(r"[.!?;:](?:[\"')\]]*)\s+|\n")
#: A delta holding none of these, and not starting with whitespace or a closing quote or bracket,
#: cannot take part in a boundary (a boundary ends with whitespace after a sentence mark, or is a
#: newline), so it needs no scan.
_MAY_BOUND = re.compile(r"[.!?;:\n]")
_CLOSERS = "\"')]"
_may_bound = _MAY_BOUND.search  # bound once: it runs for every delta


def _boundary_start(text: str, end: int) -> int:
    """Where a boundary that ends past ``end`` can begin: back over trailing whitespace, closing
    quotes or brackets, and one sentence mark."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    while i > 0 and text[i - 1] in "\"')]":
        i -= 1
    if i > 0 and text[i - 1] in ".!?;:":
        i -= 1
    return i


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
        self._scanned = 0  # the buffer before this offset was scanned already
        self._cut = -1  # the last boundary found that ends at or past min_chars

    def __call__(self, delta: str) -> None:
        """Take one delta; emit up to the last sentence boundary once the buffer is long enough.

        Only the new text (and a few characters before it, where a boundary may begin) is scanned,
        so a long sentence costs O(its length) over all its deltas, not O(length) per delta.
        """
        if delta and _may_bound(delta) is None and not delta[0].isspace() and delta[0] not in _CLOSERS:
            # No boundary can end in this delta: nothing to scan (a cut is only ever pending
            # within one call, so none is pending here).
            self._buffer += delta
            self._scanned = len(self._buffer)
            return
        start = _boundary_start(self._buffer, self._scanned)
        self._buffer += delta
        for match in _BOUNDARY.finditer(self._buffer, start):
            if match.end() >= self.min_chars:
                self._cut = match.end()
        self._scanned = len(self._buffer)
        if len(self._buffer) < self.min_chars or self._cut <= 0:
            return
        chunk, self._buffer = self._buffer[: self._cut], self._buffer[self._cut :]
        self._scanned, self._cut = 0, -1
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
