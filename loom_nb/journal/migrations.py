"""Named, append-only schema migrations for the SQL journals.

A migration is never edited once released; a schema change is a new entry at the end. Applied
names are recorded in ``schema_migrations``. The SQL is written for DuckDB and kept portable;
``for_dialect("postgresql")`` gives the same migrations for PostgreSQL (JSON kept as text so the
canonical bytes survive exactly, bytes as ``BYTEA``). ``at`` is a reserved word in DuckDB 2, so it is
always quoted.
"""

from __future__ import annotations

import re
from typing import Final, Literal

MIGRATIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    (
        "m001_initial",
        (
            """CREATE TABLE events (
                execution_id VARCHAR NOT NULL,
                seq BIGINT NOT NULL,
                kind VARCHAR NOT NULL,
                step_id VARCHAR,
                "at" TIMESTAMP NOT NULL,
                data JSON NOT NULL,
                PRIMARY KEY (execution_id, seq)
            )""",
            """CREATE TABLE executions (
                execution_id VARCHAR PRIMARY KEY,
                flow VARCHAR NOT NULL,
                status VARCHAR NOT NULL,
                created_at TIMESTAMP NOT NULL,
                updated_at TIMESTAMP NOT NULL
            )""",
            """CREATE TABLE content (
                digest VARCHAR PRIMARY KEY,
                size BIGINT NOT NULL,
                media_type VARCHAR NOT NULL,
                bytes BLOB NOT NULL,
                tainted BOOLEAN NOT NULL,
                created_at TIMESTAMP NOT NULL
            )""",
        ),
    ),
    (
        # Who drives an execution now (``LeasingStore``): one row per owned execution, removed when
        # the owner suspends, finishes or gives it up; an expired row may be taken over.
        "m002_leases",
        (
            """CREATE TABLE leases (
                execution_id VARCHAR PRIMARY KEY,
                owner VARCHAR NOT NULL,
                heartbeat_at TIMESTAMP NOT NULL,
                expires_at TIMESTAMP NOT NULL
            )""",
        ),
    ),
)

Dialect = Literal["duckdb", "postgresql"]

#: DuckDB type -> PostgreSQL type, for the few that differ. JSON is stored as text on PostgreSQL:
#: ``jsonb`` reorders keys and refuses ``\u0000``, and the journal keeps the
#: canonical bytes its digests were computed on.
_POSTGRES_TYPES: Final = ((re.compile(r"\bJSON\b"), "TEXT"), (re.compile(r"\bBLOB\b"), "BYTEA"))


def for_dialect(dialect: Dialect) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The migrations (same names, same order, same tables and columns) in ``dialect``'s SQL."""
    if dialect == "duckdb":
        return MIGRATIONS
    out = []
    for name, statements in MIGRATIONS:
        translated = []
        for sql in statements:
            for pattern, replacement in _POSTGRES_TYPES:
                sql = pattern.sub(replacement, sql)
            translated.append(sql)
        out.append((name, tuple(translated)))
    return tuple(out)


CREATE_MIGRATIONS_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
)
