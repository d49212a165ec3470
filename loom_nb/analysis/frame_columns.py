"""The columns and dtypes of the frames ``Frames`` builds in Python rather than in a SQL view
(``transcript``, ``outputs``, ``replay``, ``sessions``), and how a frame gets its documented dtypes
(``typed_frame``: JSON columns decoded; ``empty_frame``: the columns with no rows).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

DataFrame = Any  # pandas is untyped here

#: Columns and dtypes of ``Frames.transcript``.
TRANSCRIPT_COLUMNS: dict[str, str] = {
    "role": "str",
    "text": "str",
    "tool_calls": "object",
    "tool_call_id": "str",
    "name": "str",
    "is_error": "bool",
    "tainted": "bool",
}

#: Columns and dtypes of ``Frames.outputs`` (then one ``output.<field>`` column per field of an
#: object answer, nested fields joined by ``.``).
OUTPUT_COLUMNS: dict[str, str] = {
    "execution_id": "str",
    "flow": "str",
    "status": "str",
    "output_type": "str",
    "output_mode": "str",
    "attempts": "int64",
    "failed_attempts": "int64",
    "output_json": "object",
    "output": "object",
}

#: Columns and dtypes of ``Frames.replay``.
REPLAY_COLUMNS: dict[str, str] = {
    "execution_id": "str",
    "reproduced": "bool",
    "recorded_status": "str",
    "replayed_status": "str",
    "served": "int64",
    "message": "str",
    "seconds": "float64",
    "children": "str",
}


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else None


def typed_frame(df: DataFrame, dtypes: Mapping[str, str], decode: Sequence[str] = ()) -> DataFrame:
    """Decode the JSON columns and give every column its documented dtype."""
    for col in decode:
        df[col] = df[col].astype(object).map(_loads)
    return df.astype(dict(dtypes)).reset_index(drop=True)


def empty_frame(dtypes: Mapping[str, str]) -> DataFrame:
    """An empty frame with the columns and dtypes ``dtypes`` (a frame with no rows)."""
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in dtypes.items()})


#: The columns of ``Frames.sessions()``.
SESSION_COLUMNS: dict[str, str] = {
    "session_id": "str",
    "index": "int64",
    "execution_id": "str",
    "previous": "str",
    "flow": "str",
    "status": "str",
    "message": "str",
    "output": "object",
    "turns": "int64",
    "created_at": "datetime64[us]",
    "updated_at": "datetime64[us]",
    "bytes": "int64",
}
