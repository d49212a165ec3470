"""The analysis views: the journal's ``events`` table as SQL views, one per frame.

``create_views(con)`` creates them as TEMP views on ``con`` (use a cursor of the journal's own
connection, never a second connection to the file). TEMP views live only in that connection:
nothing is added to the journal file's schema, and the journal's own queries (on its own
connection) never see them. Inside that connection ``events`` and ``executions`` name the
enriched views, which keep every column of the journal tables and add their own; the views read
the raw table by its qualified name.

Every view is plain SQL over ``events`` (no Python loop over events). JSON-valued columns are JSON
text here; ``Frames`` decodes a few of them (see ``DECODED``). ``COLUMNS`` pins each view's columns
and the pandas dtypes ``Frames`` gives them (``docs/analysis.md`` documents them).

The ``steps`` view is one scan and one ``GROUP BY (execution_id, step_id)`` pivot of the step
events (no self-join): each event's JSON is parsed once (one ``json_extract`` with a list of paths
per kind), and the id patterns (kind, turn, tool index) are matched once per distinct step id, then
joined back on the id. It computes what the ``RunState`` fold computes; a test compares the two row
by row, and the fold is the reference.
"""

from __future__ import annotations

from typing import Any, Final

from loom_nb.journal.step_ids import (
    ANY_NODE_PATTERN,
    EFFECT_KIND,
    MODEL_NODE_PATTERN,
    TOOL_STEP_PATTERN,
    sql_approval_gate_id,
    sql_matches,
    sql_step_kind,
    sql_tool_index,
    sql_tool_step_id,
    sql_turn,
)

#: The pandas dtype of every column of every view, in order (the frames' contract).
COLUMNS: Final[dict[str, dict[str, str]]] = {
    "events": {
        "execution_id": "str",
        "seq": "int64",
        "kind": "str",
        "step_id": "str",
        "at": "datetime64[us]",
        "turn": "Int64",
        "bytes": "int64",
        "data": "str",
    },
    "executions": {
        "execution_id": "str",
        "flow": "str",
        "status": "str",
        "created_at": "datetime64[us]",
        "updated_at": "datetime64[us]",
        "principal": "str",
        "forked_from": "str",
        "at_step": "str",
        "parent_execution_id": "str",
        "parent_step": "str",
        "turns": "int64",
        "events": "int64",
        "bytes": "int64",
        "duration_seconds": "float64",
        "input": "object",
        "output": "object",
        "error_type": "str",
        "error_message": "str",
    },
    "steps": {
        "execution_id": "str",
        "step_id": "str",
        "seq": "int64",
        "kind": "str",
        "effect": "str",
        "turn": "Int64",
        "tool_index": "Int64",
        "status": "str",
        "attempts": "int64",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
        "input_bytes": "Int64",
        "output_bytes": "Int64",
        "input_tokens": "Int64",
        "output_tokens": "Int64",
        "cost": "float64",
        "in_doubt": "bool",
        "error_type": "str",
        "error_message": "str",
    },
    "turns": {
        "execution_id": "str",
        "turn": "int64",
        "node": "str",
        "status": "str",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
        "model_calls": "int64",
        "tool_calls": "int64",
        "tool_steps": "int64",
        "gates": "int64",
        "decisions": "int64",
        "compacted": "bool",
        "input_tokens": "int64",
        "output_tokens": "int64",
        "cost": "float64",
        "finish_reason": "str",
        "text": "str",
    },
    "tool_calls": {
        "execution_id": "str",
        "turn": "int64",
        "tool_index": "int64",
        "node": "str",
        "call_id": "str",
        "name": "str",
        "arguments": "object",
        "requested_arguments": "object",
        "edited": "bool",
        "answered_at": "datetime64[us]",
        "step_id": "str",
        "status": "str",
        "approved": "boolean",
        "reason": "str",
        "result_preview": "str",
        "error": "str",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
    },
    "gates": {
        "execution_id": "str",
        "gate_id": "str",
        "seq": "int64",
        "kind": "str",
        "turn": "Int64",
        "tool_index": "Int64",
        "status": "str",
        "opened_at": "datetime64[us]",
        "resolved_at": "datetime64[us]",
        "wait_seconds": "float64",
        "payload": "object",
        "answer": "object",
        "approved": "boolean",
        "reason": "str",
        "schema": "str",
    },
    "decisions": {
        "execution_id": "str",
        "decision_id": "str",
        "seq": "int64",
        "turn": "Int64",
        "at": "datetime64[us]",
        "policy": "str",
        "options": "object",
        "choice": "object",
        "probabilities": "object",
        "propensity": "float64",
    },
    "usage": {
        "execution_id": "str",
        "flow": "str",
        "calls": "int64",
        "model_calls": "int64",
        "input_tokens": "int64",
        "output_tokens": "int64",
        "total_tokens": "int64",
        "cost": "float64",
    },
    "streams": {
        "execution_id": "str",
        "seq": "int64",
        "at": "datetime64[us]",
        "turn": "Int64",
        "channel": "str",
        "text": "str",
    },
    "log_growth": {
        "execution_id": "str",
        "turn": "int64",
        "events": "int64",
        "bytes": "int64",
        "cumulative_events": "int64",
        "cumulative_bytes": "int64",
    },
}

#: JSON-text columns that the ``Frames`` methods decode into Python objects.
DECODED: Final[dict[str, tuple[str, ...]]] = {
    "executions": ("input", "output"),
    "tool_calls": ("arguments", "requested_arguments"),
    "gates": ("payload", "answer"),
    "decisions": ("options", "choice", "probabilities"),
}

#: How each view is ordered when a frame is read.
ORDER: Final[dict[str, str]] = {
    "events": "execution_id, seq",
    "executions": "created_at, execution_id",
    "steps": "execution_id, seq",
    "turns": "execution_id, turn",
    "tool_calls": "execution_id, turn, tool_index",
    "gates": "execution_id, opened_at, gate_id",
    "decisions": "execution_id, seq",
    "usage": "execution_id",
    "streams": "execution_id, seq",
    "log_growth": "execution_id, turn",
}

_LIFECYCLE = (
    "('execution_started', 'execution_suspended', 'execution_resumed', 'execution_completed', 'execution_failed', "
    "'execution_cancelled')"
)


#: A ``step_completed``'s usage in either event format: format 2 leaves out (with the effect) the usage
#: its output carries, so a payload with neither ``usage`` nor ``effect`` reads the output's.
_COMPLETED_USAGE = (
    "CASE WHEN (data -> '$.usage') IS NULL AND (data -> '$.effect') IS NULL "
    "THEN data -> '$.output.usage' ELSE data -> '$.usage' END"
)


def _us_between(a: str, b: str) -> str:
    return f"CAST(date_diff('microsecond', {a}, {b}) AS DOUBLE)"


def view_sql(src: str) -> dict[str, str]:
    """The ``SELECT`` of every view, reading the raw events table ``src`` (a qualified name)."""
    return {
        "events": f"""
SELECT execution_id, seq, kind, step_id, "at",
       last_value({sql_turn("step_id")} IGNORE NULLS) OVER (
           PARTITION BY execution_id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
       ) AS turn,
       CAST(strlen(CAST(data AS VARCHAR)) AS BIGINT) AS bytes,
       data
FROM {src}""",
        "executions": f"""
WITH agg AS (
    SELECT execution_id,
           arg_min(data, seq) FILTER (WHERE kind = 'execution_started') AS started,
           arg_min("at", seq) FILTER (WHERE kind = 'execution_started') AS created_at,
           arg_max(kind, seq) FILTER (WHERE kind IN {_LIFECYCLE}) AS last_kind,
           arg_max("at", seq) FILTER (WHERE kind IN {_LIFECYCLE}) AS updated_at,
           arg_max(data, seq) FILTER (WHERE kind IN ('execution_completed', 'execution_failed')) AS ending,
           max("at") AS last_at,
           count(DISTINCT {sql_turn("step_id")}) FILTER (
               WHERE kind = 'step_started' AND {sql_matches("step_id", MODEL_NODE_PATTERN)}) AS turns,
           count(*) AS events,
           CAST(sum(strlen(CAST(data AS VARCHAR))) AS BIGINT) AS bytes
    FROM {src}
    GROUP BY execution_id
)
SELECT execution_id,
       started ->> '$.flow' AS flow,
       CASE last_kind
           WHEN 'execution_suspended' THEN 'suspended'
           WHEN 'execution_completed' THEN 'completed'
           WHEN 'execution_failed' THEN 'failed'
           WHEN 'execution_cancelled' THEN 'cancelled'
           -- submitted for the workers and nothing journaled since (Engine.submit): waiting in the queue
           ELSE CASE WHEN events = 1 AND started ->> '$.queued' = 'true' THEN 'queued' ELSE 'running' END
       END AS status,
       created_at,
       updated_at,
       started ->> '$.principal.name' AS principal,
       started ->> '$.forked_from' AS forked_from,
       started ->> '$.at_step' AS at_step,
       started ->> '$.parent.execution' AS parent_execution_id,
       started ->> '$.parent.step' AS parent_step,
       turns,
       events,
       bytes,
       {_us_between("created_at", "last_at")} / 1e6 AS duration_seconds,
       CAST(started -> '$.input' AS VARCHAR) AS input,
       CASE WHEN last_kind = 'execution_completed' THEN CAST(ending -> '$.output' AS VARCHAR) END AS output,
       CASE WHEN last_kind = 'execution_failed' THEN ending ->> '$.error.type' END AS error_type,
       CASE WHEN last_kind = 'execution_failed' THEN ending ->> '$.error.message' END AS error_message
FROM agg""",
        "gates": f"""
SELECT o.execution_id,
       o.step_id AS gate_id,
       o.data ->> '$.kind' AS kind,
       {sql_turn("o.step_id")} AS turn,
       {sql_tool_index("o.step_id")} AS tool_index,
       CASE WHEN r.seq IS NULL THEN 'open' ELSE 'resolved' END AS status,
       o."at" AS opened_at,
       r."at" AS resolved_at,
       {_us_between('o."at"', 'r."at"')} / 1e6 AS wait_seconds,
       CAST(o.data -> '$.payload' AS VARCHAR) AS payload,
       CAST(r.data -> '$.payload' AS VARCHAR) AS answer,
       CASE WHEN (o.data ->> '$.kind') = 'AgentToolApproval'
            THEN TRY_CAST(r.data ->> '$.payload.approved' AS BOOLEAN) END AS approved,
       r.data ->> '$.payload.reason' AS reason,
       o.data ->> '$.schema' AS schema,
       o.seq AS seq
FROM {src} AS o
LEFT JOIN {src} AS r
  ON r.execution_id = o.execution_id AND r.step_id = o.step_id AND r.kind = 'gate_resolved'
WHERE o.kind = 'gate_opened'""",
        "decisions": f"""
SELECT execution_id,
       step_id AS decision_id,
       seq,
       {sql_turn("step_id")} AS turn,
       "at",
       data ->> '$.policy' AS policy,
       CAST(data -> '$.options' AS VARCHAR) AS options,
       CAST(data -> '$.choice' AS VARCHAR) AS choice,
       CAST(data -> '$.probabilities' AS VARCHAR) AS probabilities,
       TRY_CAST(data ->> '$.propensity' AS DOUBLE) AS propensity
FROM {src}
WHERE kind = 'decision_recorded'""",
        "steps": f"""
WITH fx AS (
    SELECT execution_id, step_id, seq, kind, "at",
           CASE kind
               WHEN 'step_started' THEN json_extract(data, ['$.effect', '$.input', '$.ref'])
               WHEN 'step_completed' THEN json_extract(data, ['$.effect', '$.output', '$.usage', '$.output.usage'])
               WHEN 'step_failed' THEN json_extract(
                   data, ['$.effect', '$.will_retry', '$.error.type', '$.error.message'])
           END AS f
    FROM {src}
    WHERE kind IN ('step_started', 'step_completed', 'step_failed', 'step_in_doubt')
      AND step_id IS NOT NULL
),
ux AS (
    -- one typed column per field, each computed only on the events of the kind it is read from:
    -- a step_completed's usage fields by one parse of its usage object (_COMPLETED_USAGE's rule)
    SELECT execution_id, step_id, seq, kind, "at",
           kind = 'step_failed' AND f[2] IS DISTINCT FROM 'true' AS gave_up,
           CASE kind WHEN 'step_started' THEN f[1] ->> '$' END AS effect,
           CASE kind WHEN 'step_started' THEN strlen(CAST(coalesce(f[2], f[3]) AS VARCHAR)) END AS input_bytes,
           CASE kind WHEN 'step_completed' THEN strlen(CAST(f[2] AS VARCHAR)) END AS output_bytes,
           CASE kind WHEN 'step_completed' THEN json_extract_string(
               CASE WHEN f[3] IS NULL AND f[1] IS NULL THEN f[4] ELSE f[3] END,
               ['$.input_tokens', '$.output_tokens', '$.cost'])
           END AS u,
           CASE kind WHEN 'step_failed' THEN f[3] ->> '$' END AS error_type,
           CASE kind WHEN 'step_failed' THEN f[4] ->> '$' END AS error_message
    FROM fx
),
agg AS (
    SELECT execution_id, step_id,
           min(seq) AS seq,
           arg_min(effect, seq) FILTER (WHERE kind = 'step_started') AS effect,
           count(*) FILTER (WHERE kind = 'step_started') AS attempts,
           min("at") FILTER (WHERE kind = 'step_started') AS started_at,
           max("at") FILTER (WHERE kind = 'step_completed' OR gave_up) AS ended_at,
           bool_or(kind = 'step_completed') AS completed,
           bool_or(gave_up) AS failed,
           bool_or(kind = 'step_in_doubt') AS in_doubt,
           arg_min(input_bytes, seq) FILTER (WHERE kind = 'step_started') AS input_bytes,
           arg_max(output_bytes, seq) FILTER (WHERE kind = 'step_completed') AS output_bytes,
           arg_max(TRY_CAST(u[1] AS BIGINT), seq) FILTER (WHERE kind = 'step_completed') AS input_tokens,
           arg_max(TRY_CAST(u[2] AS BIGINT), seq) FILTER (WHERE kind = 'step_completed') AS output_tokens,
           arg_max(TRY_CAST(u[3] AS DOUBLE), seq) FILTER (WHERE kind = 'step_completed') AS cost,
           arg_max(error_type, seq) FILTER (WHERE gave_up) AS error_type,
           arg_max(error_message, seq) FILTER (WHERE gave_up) AS error_message
    FROM ux
    GROUP BY execution_id, step_id
),
ids AS (
    -- the id patterns, matched once per distinct step id (a small table) instead of once per step:
    -- the kind an id alone gives ('effect' when it matches no pattern), its turn and tool index
    SELECT step_id,
           {sql_step_kind("step_id", "NULL")} AS id_kind,
           {sql_turn("step_id")} AS turn,
           {sql_tool_index("step_id")} AS tool_index
    FROM (SELECT DISTINCT step_id FROM {src}
          WHERE kind IN ('step_started', 'step_completed', 'step_failed', 'step_in_doubt')
            AND step_id IS NOT NULL)
)
SELECT agg.execution_id, agg.step_id, agg.seq,
       -- step_kind's rule: the id's patterns first, then the effect's prefix
       CASE WHEN ids.id_kind <> '{EFFECT_KIND}' THEN ids.id_kind
            ELSE {sql_step_kind("''", "agg.effect")} END AS kind,
       agg.effect, ids.turn, ids.tool_index,
       CASE WHEN completed THEN 'completed' WHEN failed THEN 'failed'
            WHEN in_doubt THEN 'in_doubt' ELSE 'running' END AS status,
       attempts, started_at, ended_at,
       {_us_between("started_at", "ended_at")} / 1e3 AS duration_ms,
       input_bytes, output_bytes, input_tokens, output_tokens, cost,
       coalesce(in_doubt, false) AS in_doubt,
       CASE WHEN NOT completed THEN error_type END AS error_type,
       CASE WHEN NOT completed THEN error_message END AS error_message
FROM agg
JOIN ids ON ids.step_id = agg.step_id
UNION ALL BY NAME
SELECT execution_id, gate_id AS step_id, seq, 'gate' AS kind, NULL AS effect, turn, tool_index,
       CASE WHEN status = 'open' THEN 'running' ELSE 'completed' END AS status,
       1 AS attempts, opened_at AS started_at, resolved_at AS ended_at,
       wait_seconds * 1e3 AS duration_ms,
       strlen(payload) AS input_bytes, strlen(answer) AS output_bytes,
       NULL AS input_tokens, NULL AS output_tokens, NULL AS cost, false AS in_doubt,
       NULL AS error_type, NULL AS error_message
FROM gates
UNION ALL BY NAME
SELECT execution_id, step_id, seq,
       CASE kind WHEN 'decision_recorded' THEN 'decision' ELSE 'value' END AS kind,
       NULL AS effect, {sql_turn("step_id")} AS turn, NULL AS tool_index, 'completed' AS status, 1 AS attempts,
       "at" AS started_at, "at" AS ended_at, 0.0 AS duration_ms,
       CASE kind WHEN 'decision_recorded' THEN strlen(CAST(v[1] AS VARCHAR)) END AS input_bytes,
       strlen(CAST(v[2] AS VARCHAR)) AS output_bytes,
       NULL AS input_tokens, NULL AS output_tokens, NULL AS cost, false AS in_doubt,
       NULL AS error_type, NULL AS error_message
FROM (
    -- one parse per event: a decision's options and choice, a value's value
    SELECT *, CASE kind WHEN 'decision_recorded' THEN json_extract(data, ['$.options', '$.choice'])
                        ELSE [NULL, data -> '$.value'] END AS v
    FROM {src}
    WHERE kind IN ('decision_recorded', 'value_recorded')
)""",
        "turns": f"""
WITH per_turn AS (
    SELECT execution_id, turn,
           arg_max(step_id, seq) FILTER (WHERE kind = 'model') AS node,
           min(started_at) AS started_at,
           max(coalesce(ended_at, started_at)) AS ended_at,
           count(*) FILTER (WHERE kind = 'model') AS model_calls,
           count(*) FILTER (WHERE kind = 'tool') AS tool_steps,
           count(*) FILTER (WHERE kind = 'gate') AS gates,
           count(*) FILTER (WHERE kind = 'decision') AS decisions,
           bool_or(kind = 'compact') AS compacted,
           coalesce(sum(input_tokens), 0) AS input_tokens,
           coalesce(sum(output_tokens), 0) AS output_tokens,
           coalesce(sum(cost), 0.0) AS cost
    FROM steps
    WHERE turn IS NOT NULL
    GROUP BY execution_id, turn
)
SELECT t.execution_id, t.turn, t.node, s.status, t.started_at, t.ended_at,
       {_us_between("t.started_at", "t.ended_at")} / 1e3 AS duration_ms,
       t.model_calls,
       coalesce(json_array_length(e.data, '$.output.message.tool_calls'), 0) AS tool_calls,
       t.tool_steps, t.gates, t.decisions, t.compacted, t.input_tokens, t.output_tokens, t.cost,
       e.data ->> '$.output.finish_reason' AS finish_reason,
       e.data ->> '$.output.message.text' AS text
FROM per_turn AS t
LEFT JOIN steps AS s ON s.execution_id = t.execution_id AND s.step_id = t.node
LEFT JOIN {src} AS e ON e.execution_id = t.execution_id AND e.step_id = t.node AND e.kind = 'step_completed'
WHERE t.node IS NOT NULL""",
        "tool_calls": f"""
WITH nodes AS (
    SELECT execution_id, turn, arg_max(step_id, seq) AS node
    FROM steps
    WHERE kind = 'model' AND status = 'completed' AND turn IS NOT NULL
    GROUP BY execution_id, turn
),
calls AS (
    SELECT n.execution_id, n.turn, n.node, CAST(u.j - 1 AS BIGINT) AS tool_index, u.c AS c
    FROM nodes AS n
    JOIN {src} AS e ON e.execution_id = n.execution_id AND e.step_id = n.node AND e.kind = 'step_completed',
    unnest(json_extract(e.data, '$.output.message.tool_calls[*]')) WITH ORDINALITY AS u(c, j)
),
told AS (
    SELECT DISTINCT e.execution_id, e.data ->> '$.input.prev' AS prev,
           m ->> '$.tool_call_id' AS call_id, m ->> '$.text' AS text
    FROM {src} AS e, unnest(json_extract(e.data, '$.input.add[*].msg')) AS u(m)
    WHERE e.kind = 'step_started' AND {sql_matches("e.step_id", ANY_NODE_PATTERN)}
      AND (m ->> '$.role') = 'tool' AND (m ->> '$.is_error') = 'true'
),
outputs AS (
    SELECT execution_id, step_id, arg_max(data -> '$.output', seq) AS output
    FROM {src}
    WHERE kind = 'step_completed' AND {sql_matches("step_id", TOOL_STEP_PATTERN)}
    GROUP BY execution_id, step_id
),
answered AS (
    -- agent/tool_calls.py's rule: the arguments that ran are a person's edit of an approved call
    SELECT c.*, g.approved, g.reason, g.status AS gate_status, g.resolved_at,
           CASE WHEN g.approved AND json_type(json_extract(g.answer, '$.arguments')) = 'OBJECT'
                 AND CAST(json_extract(g.answer, '$.arguments') AS VARCHAR)
                     IS DISTINCT FROM CAST(c.c -> '$.arguments' AS VARCHAR)
                THEN json_extract(g.answer, '$.arguments') END AS edit
    FROM calls AS c
    LEFT JOIN gates AS g
      ON g.execution_id = c.execution_id
     AND g.gate_id = {sql_approval_gate_id("c.turn", "c.tool_index")}
)
SELECT c.execution_id, c.turn, c.tool_index, c.node,
       c.c ->> '$.id' AS call_id,
       c.c ->> '$.name' AS name,
       CAST(coalesce(c.edit, c.c -> '$.arguments') AS VARCHAR) AS arguments,
       CASE WHEN c.edit IS NOT NULL THEN CAST(c.c -> '$.arguments' AS VARCHAR) END AS requested_arguments,
       c.edit IS NOT NULL AS edited,
       c.resolved_at AS answered_at,
       s.step_id,
       coalesce(s.status,
                CASE WHEN c.approved = false THEN 'refused'
                     WHEN c.gate_status = 'open' THEN 'waiting'
                     WHEN t.text IS NOT NULL THEN 'invalid'
                     ELSE 'not_run' END) AS status,
       c.approved,
       c.reason,
       left(CASE WHEN json_type(o.output) = 'VARCHAR' THEN o.output ->> '$'
                 ELSE CAST(o.output AS VARCHAR) END, 200) AS result_preview,
       CASE WHEN s.error_type IS NOT NULL THEN s.error_type || ': ' || s.error_message
            WHEN c.approved IS DISTINCT FROM false THEN t.text END AS error,
       s.started_at, s.ended_at, s.duration_ms
FROM answered AS c
LEFT JOIN steps AS s
  ON s.execution_id = c.execution_id AND s.kind = 'tool'
 AND s.step_id = {sql_tool_step_id("c.turn", "c.tool_index")}
LEFT JOIN told AS t
  ON t.execution_id = c.execution_id AND t.prev = c.node AND t.call_id = c.c ->> '$.id'
LEFT JOIN outputs AS o
  ON o.execution_id = c.execution_id AND o.step_id = s.step_id""",
        "usage": f"""
WITH c AS (
    SELECT execution_id, {_COMPLETED_USAGE} AS usage
    FROM {src}
    WHERE kind = 'step_completed'
),
u AS (
    SELECT execution_id,
           CAST(sum(coalesce(TRY_CAST(usage ->> '$.calls' AS BIGINT), 1)) AS BIGINT) AS calls,
           count(*) FILTER (WHERE usage IS NOT NULL AND (usage ->> '$.input_tokens') IS NOT NULL) AS model_calls,
           CAST(coalesce(sum(TRY_CAST(usage ->> '$.input_tokens' AS BIGINT)), 0) AS BIGINT) AS input_tokens,
           CAST(coalesce(sum(TRY_CAST(usage ->> '$.output_tokens' AS BIGINT)), 0) AS BIGINT) AS output_tokens,
           coalesce(sum(TRY_CAST(usage ->> '$.cost' AS DOUBLE)), 0.0) AS cost
    FROM c
    GROUP BY execution_id
)
SELECT x.execution_id, x.flow,
       coalesce(u.calls, 0) AS calls,
       coalesce(u.model_calls, 0) AS model_calls,
       coalesce(u.input_tokens, 0) AS input_tokens,
       coalesce(u.output_tokens, 0) AS output_tokens,
       coalesce(u.input_tokens, 0) + coalesce(u.output_tokens, 0) AS total_tokens,
       coalesce(u.cost, 0.0) AS cost
FROM executions AS x
LEFT JOIN u ON u.execution_id = x.execution_id""",
        "streams": f"""
SELECT execution_id, seq, "at", turn, data ->> '$.channel' AS channel, data ->> '$.text' AS text
FROM events
WHERE kind = 'stream_chunk'
UNION ALL BY NAME
-- Event format 2 keeps no durable copy of the text a model step streams: its output holds it.
SELECT execution_id, seq, "at", turn, 'assistant' AS channel, data ->> '$.output.message.text' AS text
FROM events
WHERE kind = 'step_completed' AND {sql_matches("step_id", MODEL_NODE_PATTERN)}
  AND coalesce(data ->> '$.output.message.text', '') <> ''
  AND execution_id IN (
      SELECT execution_id FROM {src}
      WHERE kind = 'execution_started' AND TRY_CAST(data ->> '$.format' AS INTEGER) >= 2)""",
        "log_growth": """
WITH g AS (
    SELECT execution_id, coalesce(turn, 0) AS turn, count(*) AS events, CAST(sum(bytes) AS BIGINT) AS bytes
    FROM events
    GROUP BY ALL
)
SELECT execution_id, turn, events, bytes,
       CAST(sum(events) OVER w AS BIGINT) AS cumulative_events,
       CAST(sum(bytes) OVER w AS BIGINT) AS cumulative_bytes
FROM g
WINDOW w AS (PARTITION BY execution_id ORDER BY turn ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)""",
    }


#: Views in creation order (a view may read the ones before it).
VIEW_ORDER: Final[tuple[str, ...]] = (
    "events",
    "executions",
    "gates",
    "decisions",
    "steps",
    "turns",
    "tool_calls",
    "usage",
    "streams",
    "log_growth",
)


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def events_table(con: Any) -> str:
    """The qualified name of the raw ``events`` table of ``con``'s current database."""
    row = con.execute("SELECT current_database()").fetchone()
    return f"{quote_ident(str(row[0]))}.main.events"


def create_views(con: Any, *, source: str | None = None) -> tuple[str, ...]:
    """Create (or replace) every analysis view as a TEMP view on ``con``.

    Args:
        con: A DuckDB connection or cursor whose database holds the journal's ``events`` table
            (a cursor of ``DuckDBJournal.connection``: the file is never opened twice).
        source: The qualified raw events table; ``<current database>.main.events`` by default.

    Returns:
        The names of the views, in creation order.
    """
    src = source or events_table(con)
    sql = view_sql(src)
    for name in VIEW_ORDER:
        columns = ", ".join(quote_ident(c) for c in COLUMNS[name])
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {quote_ident(name)} AS "
            f"SELECT {columns} FROM ({sql[name]}\n) AS {quote_ident('v_' + name)}"
        )
    return VIEW_ORDER
