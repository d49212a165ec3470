"""``batch_frame``: a batch's results (``Agent.map``) as one pandas DataFrame, one row per input.

The agent layer never imports pandas: importing this module (``loom_nb`` does it lazily, on the
first ``Batch.frame()``) registers ``batch_frame`` as the builder ``Batch.frame()`` calls. Each row
is folded from the item's journaled events (``RunState``, the one fold every view uses); the status
is the item's as the batch counts it (a failure that never reached the journal included).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from loom_nb.agent.batch import Batch, set_frame_builder
from loom_nb.journal.run_state import RunState

DataFrame = Any  # pandas is untyped here

#: The columns of ``batch_frame`` and their dtypes: the input, the answer (completed items), the
#: status (``queued``, ``running``, ``suspended``, ``completed``, ``failed``), the error
#: (``Type: message``, failed items), model turns, tokens (input + output), seconds from the
#: execution's first event to its last, and the execution id.
BATCH_COLUMNS: dict[str, str] = {
    "input": "object",
    "output": "object",
    "status": "object",
    "error": "object",
    "turns": "int64",
    "tokens": "int64",
    "duration_seconds": "float64",
    "execution_id": "object",
}


def batch_frame(batch: Batch) -> DataFrame:
    """One row per item of ``batch``, in input order, with ``BATCH_COLUMNS``."""
    journal = batch.runtime.journal
    rows: list[dict[str, Any]] = []
    for item in batch.items:
        events = journal.read(item.execution_id)
        state = RunState.fold(events, item.execution_id)
        result = item.result if item.status == "completed" else None
        error = None
        if item.status == "failed":
            exc = item.run.exception()
            error = f"{type(exc).__name__}: {exc}" if exc is not None else "failed"
        rows.append(
            {
                "input": item.input,
                "output": result.output if result is not None else None,
                "status": item.status,
                "error": error,
                "turns": result.turns if result is not None else state.turns,
                "tokens": state.usage.input_tokens + state.usage.output_tokens,
                "duration_seconds": (events[-1].at - events[0].at) if events else 0.0,
                "execution_id": item.execution_id,
            }
        )
    return pd.DataFrame({c: pd.Series([row[c] for row in rows], dtype=t) for c, t in BATCH_COLUMNS.items()})


def batch_text(batch: Batch, *, max_rows: int = 60, max_colwidth: int = 40) -> str:
    """``batch_frame(batch)`` as text for a terminal: every column, long cells and many rows cut."""
    text: str = batch_frame(batch).to_string(max_rows=max_rows, max_colwidth=max_colwidth)
    return text


set_frame_builder(batch_frame, batch_text)
