"""Journals written by a newer loom_nb are refused, not misread: the check both stores run at open.

A newer loom_nb may add a migration (a name this code's ``MIGRATIONS`` lacks, in
``schema_migrations``) or write executions in a newer event format (``execution_started``'s
``format`` above ``event_format.FORMATS``). Either would be read wrong here: a table this code does
not fill, step events whose shape it cannot fold. So an open refuses such a journal with a
``JournalVersionError`` naming what it found, before any migration of its own is applied; and the
fold refuses an execution of an unknown format when it reads one (``event_format.format_of``), for
an execution older than the ``NEWEST_PROBED`` the open looks at.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from loom_nb.errors import JournalVersionError
from loom_nb.journal.event_format import FORMATS, UPGRADE
from loom_nb.journal.migrations import MIGRATIONS, Dialect

#: How many of the newest executions an open reads the format of (a newer loom_nb writes its new
#: executions in its format, so they are the newest; an index probe each on PostgreSQL).
NEWEST_PROBED: Final = 1000


def newest_formats_sql(dialect: Dialect) -> str:
    """The query of the ``format`` values (text, or NULL) of the ``NEWEST_PROBED`` newest executions'
    ``execution_started`` (seq 1). On PostgreSQL ``data`` is text, parsed as ``json`` only where it
    holds no escaped NUL (which ``json`` cannot turn into text; the fold checks such a row)."""
    newest = f"(SELECT execution_id FROM executions ORDER BY created_at DESC LIMIT {NEWEST_PROBED}) x"
    joined = "JOIN events e ON e.execution_id = x.execution_id AND e.seq = 1 AND e.kind = 'execution_started'"
    if dialect == "duckdb":
        return f"SELECT e.data ->> '$.format' FROM {newest} {joined}"
    return f"SELECT CASE WHEN strpos(e.data, '\\u0000') = 0 THEN e.data::json ->> 'format' END FROM {newest} {joined}"


def refuse_unknown_migrations(location: str, applied: Iterable[str]) -> None:
    """Refuse a journal that holds a migration this code does not know.

    Raises:
        JournalVersionError: naming the unknown migrations and the fix.
    """
    known = [name for name, _ in MIGRATIONS]
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise JournalVersionError(
            f"the journal {location} was written by a newer loom_nb: it holds the migration(s) "
            f"{', '.join(unknown)}, which this loom_nb does not know (it knows {', '.join(known)}). {UPGRADE}"
        )


def refuse_newer_formats(location: str, formats: Iterable[str | int | None]) -> None:
    """Refuse a journal whose newest executions are written in an event format this code does not read.

    Raises:
        JournalVersionError: naming the newest format found and the fix.
    """
    found = [int(f) for f in formats if f is not None and str(f).isdigit()]
    newest = max(found, default=min(FORMATS))
    if newest > max(FORMATS):
        raise JournalVersionError(
            f"the journal {location} was written by a newer loom_nb: it holds executions in event format "
            f"{newest}, and this loom_nb reads formats {', '.join(map(str, FORMATS))}. {UPGRADE}"
        )
