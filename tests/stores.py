"""The journal store a test runs on: DuckDB (the default; and the in-memory fake where a suite used
it) or PostgreSQL, chosen per test by the ``_journal_store`` fixture (``tests/conftest.py``).

The journal, kernel, agent, analysis and crash suites run on both; a module opts out with
``ONE_STORE = "why"``. On PostgreSQL every test gets its own schema (dropped after it) on the
server ``LOOM_TEST_POSTGRES`` names (default ``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from loom_nb.journal import DuckDBJournal, InMemoryJournal, JournalStore

POSTGRES = os.environ.get("LOOM_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
#: The folders whose tests run once per store (their modules may opt out with ``ONE_STORE``).
BOTH_STORES = ("kernel", "agent", "crash")
STORES = ("duckdb", "postgres")

#: The store of the running test (set by the ``_journal_store`` fixture).
current = "duckdb"
#: Schemas made during the running test, dropped after it.
schemas: list[str] = []


def postgres_reachable() -> str | None:
    """None when ``POSTGRES`` answers, else why not."""
    import psycopg

    try:
        with psycopg.connect(POSTGRES, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def new_schema(hint: str = "") -> str:
    """A fresh schema on the test server; the URL whose search path is that schema."""
    import psycopg

    name = "t_" + hashlib.sha256(f"{hint}:{os.getpid()}:{len(schemas)}:{id(schemas)}".encode()).hexdigest()[:16]
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    schemas.append(name)
    return url_of(name)


def url_of(schema: str) -> str:
    """The test server's URL with ``schema`` as its search path."""
    sep = "&" if "?" in POSTGRES else "?"
    return f"{POSTGRES}{sep}options=-csearch_path%3D{schema}"


def drop_schemas() -> None:
    """Drop every schema the running test made."""
    import psycopg

    if not schemas:
        return
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        for name in schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
    schemas.clear()


def default_journal() -> JournalStore:
    """The journal a suite's ``make_runtime`` uses when given none: the in-memory fake on the
    DuckDB run (as the suites always did), a fresh PostgreSQL schema on the PostgreSQL run."""
    if current == "postgres":
        from loom_nb.journal.postgres_store import PostgresJournal

        return PostgresJournal(new_schema())
    return InMemoryJournal()


def target(where: Path) -> str:
    """Where a subprocess script's journal is for a test directory: the DuckDB file in it, or a
    PostgreSQL schema named after it (made on first use)."""
    if current != "postgres":
        return str(where / "journal.duckdb")
    marker = where / "journal.postgres"
    if not marker.exists():
        marker.write_text(new_schema(str(where)), encoding="utf-8")
    return marker.read_text(encoding="utf-8")


def open_journal(target: str, *, read_only: bool = False) -> Any:
    """Open ``target`` (a DuckDB path or a PostgreSQL URL) as a journal store."""
    if target.startswith("postgresql://"):
        from loom_nb.journal.postgres_store import PostgresJournal

        return PostgresJournal(target)
    return DuckDBJournal(target, read_only=read_only)
