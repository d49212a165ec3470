"""The private DuckDB copy the frames read when the journal is not a DuckDB file: an in-memory
database with the journal's tables and the views (``private_database``), filled from an
``InMemoryJournal``'s events (``load_events``) or from a server journal's tables moved as Arrow
(``copy_server_journal``: whole the first time, then only what was appended).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import duckdb
import pandas as pd

from loom_nb.analysis.sql_views import create_views, events_table
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.migrations import MIGRATIONS

_NO_NETWORK = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: A table's key clause and a column's ``PRIMARY KEY``, left out of a private copy (``keys=False``).
_KEY_CLAUSE = re.compile(r",\s*PRIMARY KEY \([^)]*\)")
_PRIMARY_KEY = re.compile(r"\s+PRIMARY KEY\b")


def private_database(*, keys: bool = True) -> Any:
    """A private in-memory DuckDB with the journal's tables and the views; without primary keys
    when ``keys`` is false (a copy loaded whole: building the index would cost more than the rows)."""
    con = duckdb.connect(":memory:", config={**_NO_NETWORK, "enable_external_access": False})
    for _, statements in MIGRATIONS:
        for statement in statements:
            if not keys:
                statement = _PRIMARY_KEY.sub("", _KEY_CLAUSE.sub("", statement))
            con.execute(statement)
    create_views(con)
    return con


def copy_server_journal(
    con: Any, journal: Any, last_seqs: dict[str, int] | None, content_rows: int
) -> tuple[dict[str, int], int]:
    """Copy a server journal's tables (PostgreSQL) into the private database ``con``, moved as
    Arrow: whole when ``last_seqs`` is None (``arrow_tables``), else only the events appended after
    each execution's last seq in the copy (``arrow_changes``) with the executions and content
    tables again. One transaction: on an error nothing changed. Returns each execution's last seq
    in the copy and the content table's row count, for the next copy."""
    if last_seqs is None:
        tables, replace = journal.arrow_tables(), {"events", "executions", "content"}
        seqs: dict[str, int] = {}
    else:
        tables = journal.arrow_changes(last_seqs, content_rows)
        replace, seqs = {"executions", "content"}, dict(last_seqs)
    database = events_table(con).removesuffix(".main.events")
    con.execute("BEGIN")
    try:
        for name, arrow in tables.items():
            if name in replace:
                con.execute(f"DELETE FROM {database}.main.{name}")
            con.register("loom_arrow_rows", arrow)
            con.execute(f"INSERT INTO {database}.main.{name} SELECT * FROM loom_arrow_rows")
            if name == "events":
                rows = con.execute(
                    "SELECT execution_id, max(seq) FROM loom_arrow_rows GROUP BY execution_id"
                ).fetchall()
                seqs.update((str(eid), int(seq)) for eid, seq in rows)
            con.unregister("loom_arrow_rows")
        rows_now = con.execute(f"SELECT count(*) FROM {database}.main.content").fetchall()[0][0]
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return seqs, int(rows_now)


def load_events(con: Any, events: Sequence[Any]) -> None:
    """Replace the events table of the private database ``con`` with ``events`` (one transaction)."""
    raw = pd.DataFrame(
        {
            "execution_id": pd.Series([e.execution_id for e in events], dtype=object),
            "seq": pd.Series([e.seq for e in events], dtype="int64"),
            "kind": pd.Series([str(e.kind) for e in events], dtype=object),
            "step_id": pd.Series([e.step_id for e in events], dtype=object),
            "at_us": pd.Series([round(e.at * 1_000_000) for e in events], dtype="int64"),
            "data": pd.Series([canonical_json(e.data) for e in events], dtype=object),
        }
    )
    table = events_table(con)
    con.execute("BEGIN")
    try:
        con.execute(f"DELETE FROM {table}")
        con.register("loom_raw_events", raw)
        con.execute(
            f"INSERT INTO {table} SELECT CAST(execution_id AS VARCHAR), seq, CAST(kind AS VARCHAR), "
            "CAST(step_id AS VARCHAR), make_timestamp(at_us), CAST(data AS JSON) FROM loom_raw_events"
        )
        con.unregister("loom_raw_events")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
