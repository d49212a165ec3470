"""Fixtures of the journal tests (event helpers that are not fixtures: ``tests.journal.support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from loom_nb.journal import DuckDBJournal, InMemoryJournal, JournalStore


@pytest.fixture(params=["memory", "duckdb-memory", "duckdb-file"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    """Each store the journal contract must hold for: in memory, DuckDB in memory, a DuckDB file."""
    store: JournalStore
    if request.param == "memory":
        store = InMemoryJournal()
    elif request.param == "duckdb-memory":
        store = DuckDBJournal(":memory:")
    else:
        store = DuckDBJournal(tmp_path / "journal.duckdb")
    yield store
    store.close()
