"""Every frame reads both event formats (``loom_nb.journal.event_format``): the same run written in
format 1 and in format 2 gives the same columns and dtypes, and the same figures, except the two
the design names (``steps.input_bytes`` of a step journaled by reference; ``streams`` rows per model
step instead of per chunk)."""

from __future__ import annotations

import pandas as pd
import pytest

import loom_nb as loom
from loom_nb.analysis import frames
from loom_nb.journal.event_format import FORMAT_1, FORMAT_2
from tests.analysis.support import JOURNALS, make_runtime, tidy_run

FRAMES = ("events", "steps", "turns", "tool_calls", "gates", "decisions", "usage", "streams", "log_growth")


async def both_formats(kind: str) -> tuple[loom.Runtime, dict[int, str]]:
    """The tidy run on one runtime, once per format: the runtime and the execution id by format."""
    rt = make_runtime(kind)
    ids: dict[int, str] = {}
    for event_format in (FORMAT_1, FORMAT_2):
        rt.event_format = event_format
        ids[event_format] = await tidy_run(rt)
    return rt, ids


def comparable(df: pd.DataFrame, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    return df.drop(columns=["execution_id", *drop], errors="ignore").reset_index(drop=True)


@pytest.mark.parametrize("kind", JOURNALS)
async def test_both_formats_give_the_same_frames(kind: str) -> None:
    rt, ids = await both_formats(kind)
    f = frames(rt)
    for name in FRAMES:
        one, two = (getattr(f, name)(ids[v]) for v in (FORMAT_1, FORMAT_2))
        assert list(one.columns) == list(two.columns), name
        assert one.dtypes.astype(str).tolist() == two.dtypes.astype(str).tolist(), name
    # the figures, where the formats agree (not the times: the fake clock ticks on each reading)
    times = (
        "seq",
        "at",
        "started_at",
        "ended_at",
        "duration_ms",
        "opened_at",
        "resolved_at",
        "wait_seconds",
        "answered_at",
    )
    for name in ("turns", "tool_calls", "gates", "usage"):
        one, two = (comparable(getattr(f, name)(ids[v]), times) for v in (FORMAT_1, FORMAT_2))
        pd.testing.assert_frame_equal(one, two, obj=name)
    one, two = (comparable(f.steps(ids[v]), (*times, "input_bytes")) for v in (FORMAT_1, FORMAT_2))
    pd.testing.assert_frame_equal(one, two, obj="steps")
    tools = f.steps(ids[FORMAT_2]).query("kind == 'tool'")
    assert (tools["input_bytes"] > 0).all()  # the size of the reference journaled
    # format 1 streams one row per chunk, format 2 one per model step: the same text
    for_turn = [f.streams(ids[v]).groupby("turn")["text"].agg("".join).tolist() for v in (FORMAT_1, FORMAT_2)]
    assert for_turn[0] == for_turn[1] and all(for_turn[1])
    smaller = f.executions().set_index("execution_id")["bytes"]
    assert smaller[ids[FORMAT_2]] < 0.8 * smaller[ids[FORMAT_1]]
