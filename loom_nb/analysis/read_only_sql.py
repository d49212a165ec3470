"""The check that analysis SQL only reads (``Frames.sql``, ``%%loom_sql``), by DuckDB's own parser.

A DuckDB journal is queried through a cursor of the journal's own connection, and DuckDB has no
setting a cursor could lock for itself alone: ``SET`` of a global option (``default_order``,
``threads``...) from any cursor changes the whole database, journal reads included, and
``lock_configuration`` locks every connection of it (the journal's own ``SET threads`` then fails).
So the boundary is the statement itself, checked before anything runs:

- every statement is a ``SELECT`` as ``duckdb.extract_statements`` classifies it (``WITH ...``,
  ``FROM ...``, ``DESCRIBE``, ``SUMMARIZE``, ``SHOW``), or an ``EXPLAIN`` / ``EXPLAIN ANALYZE``
  whose inner statement is one (``EXPLAIN ANALYZE`` runs it: ``EXPLAIN ANALYZE SET ...`` sets);
- no statement calls a function that changes the database or its settings from inside a
  ``SELECT`` (``enable_logging()``, ``checkpoint()``, ``query('...')`` ...: ``SIDE_EFFECT_FUNCTIONS``),
  found among the statement's tokens (``duckdb.tokenize``), so a name in a string or a comment
  does not count and a schema-qualified or quoted call does.
"""

from __future__ import annotations

import itertools
from typing import Final

import duckdb

from loom_nb.errors import UsageError

#: Functions a ``SELECT`` may call that change the database instance or its settings, not only
#: read (DuckDB 2.0's table and scalar functions with effects): logging, profiling, checkpoints,
#: grammar extensions, external resources, sequences, the random seed, and the functions that run
#: another query given as text or serialized (which would escape this check).
SIDE_EFFECT_FUNCTIONS: Final = frozenset(
    {
        "add_grammar_extension",
        "remove_grammar_extension",
        "checkpoint",
        "force_checkpoint",
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
        "enable_profiling",
        "disable_profiling",
        "create_external_resource",
        "destroy_external_resource",
        "register_external_resource",
        "deregister_external_resource",
        "register_external_resource_type",
        "query",
        "query_table",
        "json_execute_serialized_sql",
        "setseed",
        "setval",
        "nextval",
    }
)
_T = duckdb.token_type


def _tokens(sql: str) -> list[tuple[int, str, duckdb.token_type]]:
    """``sql``'s tokens (where each starts, its text, its kind), comments left out."""
    found = duckdb.tokenize(sql)
    ends = [start for start, _ in found[1:]] + [len(sql)]
    spans = zip(found, ends, strict=True)
    return [(start, sql[start:end].strip(), kind) for (start, kind), end in spans if kind != _T.comment]


def _inner_of_explain(sql: str) -> str:
    """The statement an ``EXPLAIN [ANALYZE] [(options)]`` statement explains."""
    tokens = _tokens(sql)
    i = 1  # past EXPLAIN
    if i < len(tokens) and tokens[i][1].upper() == "ANALYZE":
        i += 1
    if i < len(tokens) and tokens[i][1].startswith("("):
        depth = 0
        while i < len(tokens):
            depth += tokens[i][1].count("(") - tokens[i][1].count(")")
            i += 1
            if depth <= 0:
                break
    return sql[tokens[i][0] :] if i < len(tokens) else ""


def _effects(sql: str) -> list[str]:
    """Names of ``SIDE_EFFECT_FUNCTIONS`` that ``sql`` calls."""
    tokens = _tokens(sql)
    return [
        name
        for (_, text, kind), (_, after, _) in itertools.pairwise(tokens)
        if after.startswith("(")
        and kind in (_T.identifier, _T.keyword)
        and (name := text.strip('"').lower()) in SIDE_EFFECT_FUNCTIONS
    ]


def _refused(statement: duckdb.Statement) -> str | None:
    """Why ``statement`` is not a read, or None when it is one."""
    query = " ".join(statement.query.split())
    shown = repr(query[:80])
    if statement.type == duckdb.StatementType.EXPLAIN:
        inner_sql = _inner_of_explain(statement.query)
        try:
            inner = duckdb.extract_statements(inner_sql)
        except duckdb.Error:
            inner = []
        if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
            what = inner[0].type.name if len(inner) == 1 else "a statement"
            return f"EXPLAIN of {what} ({shown}: only an EXPLAIN of a SELECT reads; EXPLAIN ANALYZE runs it)"
    elif statement.type != duckdb.StatementType.SELECT:
        return f"{statement.type.name} ({shown})"
    effects = _effects(statement.query)
    if effects:
        return f"a call of {', '.join(sorted(set(effects)))}() ({shown}: it changes the database, not only reads)"
    return None


def reading_statements(query: str) -> None:
    """Check that ``query`` only reads: each statement is a ``SELECT`` (or an ``EXPLAIN`` of one) as
    DuckDB's parser classifies it, and calls none of ``SIDE_EFFECT_FUNCTIONS``.

    Raises:
        UsageError: naming each statement refused (nothing ran).
    """
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise UsageError(f"the analysis SQL does not parse: {exc}") from exc
    refused = [why for why in map(_refused, statements) if why is not None]
    if refused or not statements:
        raise UsageError(
            f"analysis SQL only reads the journal: refused {', '.join(refused) or 'an empty query'}. "
            "Use SELECT (or WITH ... SELECT, FROM ...) over the views; nothing was run and the journal is unchanged."
        )
