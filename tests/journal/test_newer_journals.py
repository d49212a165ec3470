"""A journal written by a newer loom_nb (a migration this code does not know, or executions in an
event format above the ones it reads) is refused at open with a ``JournalVersionError`` naming what
was found and saying to upgrade, on both stores, and nothing of it is changed; the fold refuses such
an execution too (an execution older than the ones an open looks at)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from loom_nb.errors import JournalVersionError
from loom_nb.journal import DuckDBJournal, Event, EventKind, JournalStore
from loom_nb.journal.event_format import FORMATS
from loom_nb.journal.run_state import RunState
from tests import stores

NEWER = max(FORMATS) + 1


@pytest.fixture(params=["duckdb", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Callable[[], JournalStore], Any]]:
    """How to open one journal again and again, and how to run SQL on it behind loom's back."""
    if request.param == "duckdb":
        path = tmp_path / "j.duckdb"

        def raw_duckdb(sql: str) -> None:
            con = duckdb.connect(str(path))
            con.execute(sql)
            con.close()

        yield (lambda: DuckDBJournal(path)), raw_duckdb
        return
    request.getfixturevalue("_postgres_server")
    from loom_nb.journal.postgres_store import PostgresJournal

    url = stores.new_schema("newer")

    def raw_postgres(sql: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)

    yield (lambda: PostgresJournal(url)), raw_postgres
    stores.drop_schemas()


def started(eid: str, data: dict[str, Any]) -> Event:
    return Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": 1, "principal": None, **data})


def test_an_unknown_migration_is_refused_at_open_naming_it(store: tuple[Callable[[], JournalStore], Any]) -> None:
    open_journal, raw = store
    journal = open_journal()
    journal.append([started("old", {"format": 2})])
    journal.close()
    raw("INSERT INTO schema_migrations VALUES ('m999_from_the_future', TIMESTAMP '2030-01-01')")
    with pytest.raises(JournalVersionError) as info:
        open_journal()
    message = str(info.value)
    assert "newer loom_nb" in message and "m999_from_the_future" in message and "Upgrade loom_nb" in message
    raw("DELETE FROM schema_migrations WHERE name = 'm999_from_the_future'")
    again = open_journal()  # nothing was changed: the journal opens as it was
    assert [r.execution_id for r in again.list_executions()] == ["old"]
    again.close()


def test_executions_of_a_newer_event_format_are_refused_at_open_naming_the_format(
    store: tuple[Callable[[], JournalStore], Any],
) -> None:
    open_journal, _ = store
    journal = open_journal()
    journal.append([started("old", {"format": 2})])
    journal.append([started("new", {"format": NEWER})])
    journal.close()
    with pytest.raises(JournalVersionError) as info:
        open_journal()
    message = str(info.value)
    assert f"event format {NEWER}" in message and "Upgrade loom_nb" in message
    assert ", ".join(map(str, FORMATS)) in message


def test_a_read_only_duckdb_open_refuses_a_newer_journal_too(tmp_path: Path) -> None:
    path = tmp_path / "j.duckdb"
    journal = DuckDBJournal(path)
    journal.append([started("new", {"format": NEWER})])
    journal.close()
    with pytest.raises(JournalVersionError, match=f"event format {NEWER}"):
        DuckDBJournal(path, read_only=True)


def test_the_fold_refuses_an_execution_of_a_newer_format() -> None:
    with pytest.raises(JournalVersionError, match=f"execution 'far' .*event format {NEWER}"):
        RunState.fold([started("far", {"format": NEWER})])
    assert RunState.fold([started("near", {"format": 2})]).format == 2
    assert RunState.fold([started("oldest", {})]).format == 1
