"""``ExecutionDiff``: two executions aligned by step id (``Frames.diff``), the SQL that aligns them
over the views, and the input digests the fold recomputes where the journal keeps none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from loom_nb.analysis.frame_columns import DataFrame, typed_frame
from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.ids import journal_id
from loom_nb.journal.run_state import RunState

#: Step kinds whose rows are effect steps (not gates, decisions or values).
_EFFECT_KINDS = (step_ids.MODEL_KIND, step_ids.TOOL_KIND, step_ids.COMPACTION_KIND, step_ids.EFFECT_KIND)
#: Columns and dtypes of ``ExecutionDiff.steps``.
DIFF_COLUMNS: dict[str, str] = {
    "step_id": "str",
    "kind": "str",
    "effect_a": "str",
    "effect_b": "str",
    "status_a": "str",
    "status_b": "str",
    "input_digest_a": "str",
    "input_digest_b": "str",
    "output_digest_a": "str",
    "output_digest_b": "str",
    "same": "bool",
}

_DIFF_SQL = """
WITH st AS (
    SELECT execution_id, step_id,
           arg_min(data ->> '$.digest', seq) FILTER (WHERE kind = 'step_started') AS input_digest,
           arg_max(CAST(CASE kind WHEN 'step_completed' THEN data -> '$.output' ELSE data -> '$.error' END
                        AS VARCHAR), seq)
               FILTER (WHERE kind = 'step_completed' OR (
                   kind = 'step_failed' AND (data ->> '$.will_retry') IS DISTINCT FROM 'true')) AS outcome
    FROM events
    WHERE execution_id IN ($a, $b) AND step_id IS NOT NULL
      AND kind IN ('step_started', 'step_completed', 'step_failed')
    GROUP BY execution_id, step_id
    UNION ALL BY NAME
    SELECT execution_id, gate_id AS step_id, kind AS label, 'sha256:' || sha256(payload) AS input_digest,
           answer AS outcome
    FROM gates WHERE execution_id IN ($a, $b)
    UNION ALL BY NAME
    SELECT execution_id, step_id,
           CASE kind WHEN 'decision_recorded' THEN data ->> '$.policy' ELSE data ->> '$.kind' END AS label,
           CASE kind WHEN 'decision_recorded' THEN 'sha256:' || sha256(CAST(data -> '$.options' AS VARCHAR))
           END AS input_digest,
           CAST(CASE kind WHEN 'decision_recorded' THEN data -> '$.choice' ELSE data -> '$.value' END
                AS VARCHAR) AS outcome
    FROM events
    WHERE execution_id IN ($a, $b) AND kind IN ('decision_recorded', 'value_recorded')
),
d AS (
    SELECT st.execution_id, st.step_id, s.kind,
           coalesce(s.effect, st.label) AS effect, s.status, st.input_digest,
           CASE WHEN st.outcome IS NOT NULL THEN 'sha256:' || sha256(st.outcome) END AS output_digest,
           row_number() OVER (PARTITION BY st.execution_id ORDER BY s.seq) AS pos
    FROM st JOIN steps AS s ON s.execution_id = st.execution_id AND s.step_id = st.step_id
),
a AS (SELECT * FROM d WHERE execution_id = $a),
b AS (SELECT * FROM d WHERE execution_id = $b)
SELECT coalesce(a.step_id, b.step_id) AS step_id,
       coalesce(a.kind, b.kind) AS kind,
       a.effect AS effect_a, b.effect AS effect_b,
       a.status AS status_a, b.status AS status_b,
       a.input_digest AS input_digest_a, b.input_digest AS input_digest_b,
       a.output_digest AS output_digest_a, b.output_digest AS output_digest_b,
       coalesce(a.step_id IS NOT NULL AND b.step_id IS NOT NULL
                AND a.effect IS NOT DISTINCT FROM b.effect
                AND a.status IS NOT DISTINCT FROM b.status
                AND a.input_digest IS NOT DISTINCT FROM b.input_digest
                AND a.output_digest IS NOT DISTINCT FROM b.output_digest, false) AS same
FROM a FULL OUTER JOIN b ON a.step_id = b.step_id
ORDER BY coalesce(a.pos, b.pos), a.pos IS NULL, b.pos
"""


@dataclass(frozen=True, kw_only=True, eq=False)
class ExecutionDiff:
    """Two executions aligned by step id.

    Attributes:
        a: The first execution.
        b: The second execution.
        steps: One row per step id of either side (columns ``DIFF_COLUMNS``): kind, effect, status,
            input digest and output digest of each side, and ``same``.
        first_divergence: The first step id (in ``a``'s order) where they differ, or None.
    """

    a: str
    b: str
    steps: DataFrame
    first_divergence: str | None

    @property
    def identical(self) -> bool:
        """True when every step matches on both sides."""
        return self.first_divergence is None

    def __repr__(self) -> str:
        first = self.first_divergence
        where = "identical" if first is None else f"first divergence at {first!r}"
        return f"ExecutionDiff({self.a!r} vs {self.b!r}: {len(self.steps)} steps, {where})"


def diff_executions(con: Any, journal: Any, a: str, b: str) -> ExecutionDiff:
    """Align executions ``a`` and ``b`` of ``journal`` by step id, reading the views of ``con``
    (``Frames.diff``), and find where they diverge.

    Raises:
        UsageError: either execution is unknown.
    """
    a, b = journal_id(a), journal_id(b)
    for eid in (a, b):
        if con.execute("SELECT 1 FROM events WHERE execution_id = ? LIMIT 1", [eid]).fetchone() is None:
            raise UsageError(f"no execution {eid!r} in the journal {journal.location}")
    df = typed_frame(con.execute(_DIFF_SQL, {"a": a, "b": b}).df(), DIFF_COLUMNS)
    _recompute_input_digests(journal, df, a, b)
    differing = df.loc[~df["same"], "step_id"]
    first = None if differing.empty else str(differing.iloc[0])
    return ExecutionDiff(a=a, b=b, steps=df, first_divergence=first)


def _recompute_input_digests(journal: Any, df: DataFrame, a: str, b: str) -> None:
    """Event format 2 journals no input digest (and may journal a step's input as a reference):
    fill in the digest the fold recomputes (``StepState.input_digest``), then compare again."""
    filled = pd.Series(False, index=df.index)
    for side, eid in (("a", a), ("b", b)):
        col = f"input_digest_{side}"
        missing = df[col].isna() & df[f"status_{side}"].notna() & df["kind"].isin(_EFFECT_KINDS)
        if missing.any():
            steps = RunState.fold(journal.read(eid), eid).steps
            df.loc[missing, col] = [
                steps[sid].input_digest() if sid in steps else None for sid in df.loc[missing, "step_id"]
            ]
            filled |= missing
    if filled.any():
        equal = df["input_digest_a"].fillna("") == df["input_digest_b"].fillna("")
        df.loc[filled, "same"] = df.loc[filled, "same"] & equal[filled]
