"""``loom.frames()`` over a PostgreSQL journal keeps its DuckDB copy between calls and, when the
journal changed, appends only the events written since (``PostgresJournal.arrow_changes``): the
frames it then gives are the ones a fresh copy of the whole journal gives. A frame read again while
nothing changed is the one read last time, as a copy the reader may change."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import loom_nb as loom
from loom_nb.journal.postgres_store import PostgresJournal
from tests import stores
from tests.analysis.support import messy_run, routed_run, tidy_agent

ONE_STORE = "PostgreSQL only: the copy a server journal's frames keep"

FRAMES = ("events", "executions", "steps", "turns", "tool_calls", "gates", "decisions", "usage", "log_growth")


@pytest.fixture
def pg(_postgres_server: Any) -> Iterator[loom.Runtime]:
    from loom_nb.kernel import FlowRegistry
    from loom_nb.testing import FakeClock, SequentialIds

    runtime = loom.Runtime.open(
        stores.new_schema("i13b-copy"), clock=FakeClock(tick=0.5), ids=SequentialIds(), flows=FlowRegistry()
    )
    yield runtime
    runtime.close()
    stores.drop_schemas()


def _same_as_fresh(rt: loom.Runtime, kept: Any) -> None:
    with loom.frames(rt) as fresh:
        for name in FRAMES:
            pd.testing.assert_frame_equal(getattr(kept, name)(), getattr(fresh, name)(), check_like=False)


async def test_appended_events_reach_the_kept_copy(pg: loom.Runtime) -> None:
    journal = pg.journal
    assert isinstance(journal, PostgresJournal)
    calls: list[str] = []
    whole, changes = journal.arrow_tables, journal.arrow_changes
    journal.arrow_tables = lambda *a, **k: (calls.append("whole"), whole(*a, **k))[1]  # type: ignore[method-assign]
    journal.arrow_changes = lambda *a, **k: (calls.append("changes"), changes(*a, **k))[1]  # type: ignore[method-assign]
    f = loom.frames(pg)
    try:
        assert f.steps().empty and calls == ["whole"]
        first = await messy_run(pg)
        run = tidy_agent().start("Remove the stale files in /tmp/x", runtime=pg)
        await run.wait(until="paused")  # suspended at its first gate
        assert set(f.executions()["execution_id"]) == {first, run.id}
        assert calls == ["whole", "changes"]
        assert f.gates()["status"].tolist() == ["open", "open"]  # both deletes wait
        _same_as_fresh(pg, f)  # (a fresh copy: one more whole read)
        calls.clear()
        run.gates[0].approve()  # the same execution goes on: its events after the copy's last seq
        await asyncio.sleep(0)
        await run.wait(until="paused")
        run.gates[0].refuse("keep b")
        await run
        await routed_run(pg)
        steps = f.steps()
        assert calls == ["changes"]
        again = f.steps()
        assert calls == ["changes"]  # unchanged: nothing read, the frame kept from the last call
        pd.testing.assert_frame_equal(again, steps)
        again.loc[0, "status"] = "edited by the reader"  # a copy each time: the next read is untouched
        pd.testing.assert_frame_equal(f.steps(), steps)
        assert sorted(f.gates()["status"]) == ["resolved", "resolved"]
        _same_as_fresh(pg, f)
        counted = f.sql("SELECT count(*) AS n, count(DISTINCT (execution_id, seq)) AS keys FROM events")
        assert (
            counted["n"][0] == counted["keys"][0] == sum(len(journal.read(e)) for e in f.executions()["execution_id"])
        )
    finally:
        f.close()
