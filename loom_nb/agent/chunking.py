"""``chunk_deltas``: batch a provider's token deltas to sentence boundaries before a durable sink."""

from __future__ import annotations

import re
from collections.abc import Callable

_BOUNDARY = re.compile(r"[.!?;:](?:[\"')\]]*)\s+|\n")
#: A delta holding none of these, and not starting with whitespace or a closing quote or bracket,
#: cannot take part in a boundary (a boundary ends with whitespace after a sentence mark, or is a
#: newline), so it needs no scan.
_MAY_BOUND = re.compile(r"[.!?;:\n]")
_MARKS = ".!?;:"
_CLOSERS = "\"')]"
_may_bound = _MAY_BOUND.search  # bound once: it runs for every delta
#: What the buffer's end holds of a boundary, as the text that stands for it before the next delta
#: when that delta is scanned: nothing; a sentence mark (after any closing quotes or brackets)
#: waiting for its whitespace; a boundary whose whitespace may go on in the next delta.
_NONE, _MARKED, _SPACED = "", ".", ". "


def _tail_of(text: str) -> str:
    """What the end of ``text`` (scanned from its start) holds of a boundary: ``_NONE``,
    ``_MARKED`` or ``_SPACED``. Costs time proportional to the trailing whitespace and closers."""
    rest = text.rstrip()
    spaced = len(rest) < len(text)
    rest = rest.rstrip(_CLOSERS)
    if not rest or rest[-1] not in _MARKS:
        return _NONE
    return _SPACED if spaced else _MARKED


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
        self._parts: list[str] = []  # the buffer, joined only when a chunk is cut from it
        self._length = 0
        self._tail = _NONE  # what the buffer's end holds of a boundary (``_tail_of``)

    def __call__(self, delta: str) -> None:
        """Take one delta; emit up to the last sentence boundary once the buffer is long enough.

        Only the delta is scanned (after the one or two characters that stand for the boundary
        the buffer's end may begin), and the buffer is joined only to cut a chunk, which every
        character is part of at most twice: each delta costs time proportional to its own length,
        whatever the buffer holds.
        """
        if not delta:
            return
        if _may_bound(delta) is None and not delta[0].isspace() and delta[0] not in _CLOSERS:
            # No boundary can end in this delta, and none goes on past its first character.
            self._parts.append(delta)
            self._length += len(delta)
            self._tail = _NONE
            return
        text = self._tail + delta
        base = self._length - len(self._tail)  # where ``text`` starts in the buffer
        cut = -1
        for match in _BOUNDARY.finditer(text):
            end = base + match.end()
            if end >= self.min_chars:
                cut = end
        self._parts.append(delta)
        self._length += len(delta)
        self._tail = _tail_of(text)
        if cut <= 0:
            return
        buffered = "".join(self._parts)
        chunk, rest = buffered[:cut], buffered[cut:]
        self._parts = [rest] if rest else []
        self._length = len(rest)
        if not rest:
            self._tail = _NONE  # a boundary that ended the chunk: the next text starts afresh
        self.chunks += 1
        self.emit(chunk)

    def flush(self) -> None:
        """Emit what is left."""
        if self._parts:
            chunk = "".join(self._parts)
            self._parts, self._length, self._tail = [], 0, _NONE
            self.chunks += 1
            self.emit(chunk)


def chunk_deltas(emit: Callable[[str], None], *, min_chars: int = 40) -> DeltaChunker:
    """Wrap a durable sink so deltas reach it a sentence at a time (at least ``min_chars``).

    Transient sinks (the cell) can take every delta; a durable one should not, since each call
    appends an event.
    """
    return DeltaChunker(emit, min_chars=min_chars)
