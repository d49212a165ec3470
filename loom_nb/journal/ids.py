"""Ids as journal keys: one rule, the same on every store, checked before an id is a key.

Execution, step and session ids are keys (``(execution_id, seq)``, the executions and leases
tables, a session's runs), so, unlike free text (which ``storable_text`` makes storable by
replacing a lone surrogate with U+FFFD), an id is never changed into another one: two ids that
differ only in lone surrogates would become one key. ``journal_id`` refuses, with a
``UsageError``, an id that no store can key exactly:

- a NUL character (PostgreSQL text cannot hold it);
- a lone UTF-16 surrogate (``"\\ud83d"``: UTF-8 cannot encode it; a surrogate *pair* is the
  character it encodes and is joined into it);
- more than ``MAX_ID_BYTES`` bytes of UTF-8 (PostgreSQL's B-tree index refuses a key row past about
  2.7 KB, so ids of some kilobytes failed every commit there while DuckDB took them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from loom_nb.errors import UsageError
from loom_nb.journal.canonical import storable_text

#: The longest id, in bytes of UTF-8: far above every id loom derives (a sub-agent's id nests its
#: parents', ``<parent>/<step>``), far below the ~2.7 KB a PostgreSQL index row may hold.
MAX_ID_BYTES: Final = 1024
_LONE_SURROGATE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def _refuse(value: str, what: str, problem: str) -> UsageError:
    shown = repr(value[:60]) + ("..." if len(value) > 60 else "")
    return UsageError(
        f"the {what} {shown} {problem}: an id is a key of the journal, text of at most {MAX_ID_BYTES:,} bytes "
        "(UTF-8) without NUL or lone surrogates. Use another id (for long text, a digest of it); nothing was written."
    )


def journal_id(value: str, what: str = "execution id") -> str:
    """``value`` as every store keys it (a surrogate pair joined into its character), after the check.

    Args:
        value: The id.
        what: What it is, for the message ("execution id", "step id", "session id").

    Raises:
        UsageError: ``value`` holds a NUL or a lone surrogate, or is longer than ``MAX_ID_BYTES``.
    """
    if value.isascii():  # O(1) in CPython: the common case costs a length and a NUL scan
        if "\x00" in value:
            raise _refuse(value, what, "holds a NUL character (\\x00)")
        if len(value) > MAX_ID_BYTES:
            raise _refuse(value, what, f"is {len(value):,} bytes long")
        return value
    if "\x00" in value:
        raise _refuse(value, what, "holds a NUL character (\\x00)")
    if _LONE_SURROGATE.search(value) is not None:
        raise _refuse(value, what, "holds a lone surrogate (half of a UTF-16 pair, not a character)")
    stored = storable_text(value)
    size = len(stored.encode("utf-8"))
    if size > MAX_ID_BYTES:
        raise _refuse(value, what, f"is {size:,} bytes long (UTF-8)")
    return stored


def journal_step_id(value: str | None) -> str | None:
    """``journal_id`` of a step id, None kept (an event of no step)."""
    return None if value is None else journal_id(value, "step id")


def journal_ids(values: Sequence[str]) -> list[str]:
    """``journal_id`` of each execution id of ``values``."""
    return [journal_id(v) for v in values]
