"""Fixtures of the journal tests (event helpers that are not fixtures: ``tests.journal.support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_nb.journal import DuckDBJournal, InMemoryJournal, JournalStore
from tests import stores


@pytest.fixture(params=["memory", "duckdb-memory", "duckdb-file", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    """Each store the journal contract must hold for: in memory, DuckDB in memory, a DuckDB file,
    PostgreSQL (a fresh schema)."""
    store: JournalStore
    if request.param == "memory":
        store = InMemoryJournal()
    elif request.param == "duckdb-memory":
        store = DuckDBJournal(":memory:")
    elif request.param == "duckdb-file":
        store = DuckDBJournal(tmp_path / "journal.duckdb")
    else:
        request.getfixturevalue("_postgres_server")
        from loom_nb.journal.postgres_store import PostgresJournal

        store = PostgresJournal(stores.new_schema())
    yield store
    store.close()
    stores.drop_schemas()
