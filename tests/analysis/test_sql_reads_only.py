"""Analysis SQL (``Frames.sql``, and so ``%%loom_sql``) only reads the journal: a statement DuckDB's
parser does not classify as a read is refused with a ``UsageError`` naming it, a file access is
refused, and the journal is unchanged; each write form and file access is tried for real."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.errors import UsageError
from tests.analysis.support import tidy_run

SECRET = "/etc/passwd"

WRITES = {
    "DELETE FROM events": "DELETE",
    "DROP TABLE content": "DROP",
    "UPDATE executions SET status = 'failed'": "UPDATE",
    "INSERT INTO schema_migrations VALUES ('m999', now())": "INSERT",
    "CREATE TABLE stolen AS SELECT * FROM events": "CREATE",
    "ALTER TABLE events ADD COLUMN x INT": "ALTER",
    "SELECT 1; DELETE FROM events": "DELETE",
    "SET threads TO 8": "SET",
    "CHECKPOINT": "CALL",
    "VACUUM": "VACUUM",
    "LOAD httpfs": "LOAD",
    "BEGIN; DELETE FROM events; COMMIT": "TRANSACTION",
    "ATTACH '{dir}/other.duckdb' AS other": "ATTACH",
    "COPY events TO '{dir}/events.csv'": "COPY",
    "EXPORT DATABASE '{dir}/export'": "EXPORT",
    "CALL pragma_version()": "CALL",
}
FILE_READS = [
    f"SELECT * FROM read_text('{SECRET}')",
    f"SELECT * FROM read_csv('{SECRET}')",
    f"SELECT content FROM read_blob('{SECRET}')",
    f"SELECT * FROM '{SECRET}'",
    "SELECT * FROM glob('/etc/*')",
]


def fingerprint(rt: loom.Runtime) -> tuple[int, int, list[str]]:
    frames = loom.frames(rt)
    events = len(frames.sql("SELECT * FROM events"))
    executions = len(frames.sql("SELECT * FROM executions WHERE status = 'completed'"))
    return events, executions, rt.journal.applied_migrations() if hasattr(rt.journal, "applied_migrations") else []


@pytest.mark.parametrize("statement", list(WRITES))
@pytest.mark.slow
async def test_a_statement_that_writes_is_refused_and_the_journal_is_unchanged(
    rt: loom.Runtime, tmp_path: Path, statement: str
) -> None:
    await tidy_run(rt)
    before = fingerprint(rt)
    with pytest.raises(UsageError, match=f"refused {WRITES[statement]}") as info:
        loom.frames(rt).sql(statement.format(dir=tmp_path))
    assert "journal is unchanged" in str(info.value)
    assert fingerprint(rt) == before
    assert list(tmp_path.iterdir()) == []  # no file written


@pytest.mark.parametrize("query", FILE_READS)
@pytest.mark.slow
async def test_reading_a_file_is_refused(rt: loom.Runtime, query: str) -> None:
    await tidy_run(rt)
    with pytest.raises(UsageError, match="no file") as info:
        loom.frames(rt).sql(query)
    assert "localhost" not in str(info.value) and "root:" not in str(info.value)
    assert len(loom.frames(rt).sql("SELECT * FROM events")) > 0  # the frames still work afterwards


async def test_reading_statements_still_run(rt: loom.Runtime) -> None:
    eid = await tidy_run(rt)
    frames = loom.frames(rt)
    df = frames.sql(f"WITH s AS (SELECT * FROM steps) SELECT count(*) AS n FROM s WHERE execution_id = '{eid}'")
    assert int(df["n"][0]) > 0
    assert len(frames.sql("FROM executions")) == 1
    assert len(frames.sql("EXPLAIN SELECT * FROM events")) > 0
    assert len(frames.sql("SELECT 1 AS a; SELECT 2 AS b")) == 1


#: Statements DuckDB's parser calls EXPLAIN or SELECT that change the database's settings (global:
#: the journal's own connection reads with them) or run a write: each must be refused.
HOSTILE = [
    "EXPLAIN ANALYZE SET GLOBAL default_order = 'DESC'",
    "EXPLAIN ANALYZE SET default_order = 'DESC'",
    "explain analyze (format json) set global default_order = 'DESC'",
    "/* a note */ EXPLAIN ANALYZE SET lock_configuration = true",
    "EXPLAIN ANALYZE RESET threads",
    "EXPLAIN ANALYZE PRAGMA enable_profiling",
    "EXPLAIN DELETE FROM events",
    "SELECT 1; EXPLAIN ANALYZE SET GLOBAL default_order = 'DESC'",
    "SELECT * FROM enable_logging()",
    'SELECT count(*) FROM main."checkpoint"()',
    "SELECT * FROM events WHERE seq IN (SELECT 1 FROM truncate_duckdb_logs())",
    "SELECT * FROM query('SELECT 1')",
]


@pytest.mark.parametrize("statement", HOSTILE)
async def test_a_statement_that_changes_settings_is_refused_and_journal_reads_still_work(
    rt: loom.Runtime, statement: str
) -> None:
    eid = await tidy_run(rt)
    frames = loom.frames(rt)
    settings = "SELECT name, value FROM duckdb_settings() ORDER BY name"
    before = frames.sql(settings)
    with pytest.raises(UsageError, match="refused") as info:
        frames.sql(statement)
    assert "journal is unchanged" in str(info.value)
    assert frames.sql(settings).equals(before)
    seqs = [e.seq for e in rt.journal.read(eid)]
    assert seqs == sorted(seqs) and len(seqs) > 2  # journal reads keep their order
    assert rt.result(eid).status == "completed"
    steps = loom.frames(rt).steps(eid)
    assert len(steps) > 0 and list(steps["seq"]) == sorted(steps["seq"])


async def test_reads_that_name_such_functions_only_in_text_still_run(rt: loom.Runtime) -> None:
    await tidy_run(rt)
    frames = loom.frames(rt)
    assert list(frames.sql("SELECT 'checkpoint()' AS a -- enable_logging()")["a"]) == ["checkpoint()"]
    assert len(frames.sql("EXPLAIN ANALYZE SELECT count(*) FROM events")) > 0
    assert len(frames.sql("EXPLAIN (FORMAT json) WITH s AS (SELECT * FROM steps) SELECT * FROM s")) > 0
    assert len(frames.sql("DESCRIBE events")) > 0 and len(frames.sql("SUMMARIZE executions")) > 0
