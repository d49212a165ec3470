"""Named, append-only schema migrations for the SQL journals.

A migration is never edited once released; a schema change is a new entry at the end. Applied
names are recorded in ``schema_migrations``. The SQL is kept portable (PostgreSQL can follow);
``at`` is a reserved word in DuckDB 2, so it is always quoted.
"""

from __future__ import annotations

from typing import Final

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
)

CREATE_MIGRATIONS_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
)
