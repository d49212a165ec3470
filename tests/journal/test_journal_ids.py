"""Ids are keys, checked by one rule on every store (``loom_nb.journal.ids``): a NUL, a lone
surrogate or more than 1,024 bytes is a ``UsageError`` naming the id, before anything is written
or looked up; a surrogate pair is the character it encodes. Tried on each store for real (the
PostgreSQL one took an 8 KB id to its B-tree index and failed every commit; a NUL gave a
``JournalReadError``), and through a runtime and a session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.errors import UsageError
from loom_nb.journal import Event, EventKind, JournalStore
from loom_nb.journal.ids import MAX_ID_BYTES
from loom_nb.kernel import FlowRegistry
from loom_nb.testing import FakeClock, SequentialIds
from tests import stores

BAD_IDS = {
    "nul": ("run-\x00-1", "NUL character"),
    "lone high surrogate": ("run \ud83d", "lone surrogate"),
    "lone low surrogate": ("\ude00run", "lone surrogate"),
    "8 KB": ("r" * 8192, "8,192 bytes long"),
    "over the limit in UTF-8": ("я" * (MAX_ID_BYTES // 2 + 1), "1,026 bytes long (UTF-8)"),
}


def started(eid: str, step: str | None = None) -> list[Event]:
    events = [Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": 1, "principal": None})]
    if step is not None:
        events.append(Event(eid, 2, EventKind.VALUE_RECORDED, step, 2.0, {"kind": "x", "value": 1}))
    return events


@pytest.mark.parametrize("case", list(BAD_IDS))
def test_a_bad_execution_id_is_refused_alike_by_every_store_and_nothing_is_written(
    journal: JournalStore, case: str
) -> None:
    bad, problem = BAD_IDS[case]
    with pytest.raises(UsageError, match=re.escape(problem)) as info:
        journal.append(started(bad))
    message = str(info.value)
    assert "execution id" in message and repr(bad[:60]) in message and "Use another id" in message
    assert len(message) < 400  # the id is shown cut, not whole
    assert journal.list_executions() == []
    for lookup in (journal.read, journal.get_execution):
        with pytest.raises(UsageError, match=re.escape(problem)):
            lookup(bad)
    journal.append(started("good"))  # the store still works
    assert [r.execution_id for r in journal.list_executions()] == ["good"]


@pytest.mark.parametrize("case", list(BAD_IDS))
def test_a_bad_step_id_is_refused_alike_by_every_store(journal: JournalStore, case: str) -> None:
    bad, problem = BAD_IDS[case]
    with pytest.raises(UsageError, match=f"step id .*{re.escape(problem)}"):
        journal.append(started("run-1", step=bad))
    assert journal.list_executions() == [] and journal.read("run-1") == []


def test_ids_up_to_the_limit_and_surrogate_pairs_are_keys_on_every_store(journal: JournalStore) -> None:
    longest = "é" * (MAX_ID_BYTES // 2)  # 1,024 bytes of UTF-8
    journal.append(started(longest, step="s" * MAX_ID_BYTES))
    assert [e.step_id for e in journal.read(longest)] == [None, "s" * MAX_ID_BYTES]
    journal.append(started("smile \ud83d\ude00"))  # a pair: the character U+1F600
    record = journal.get_execution("smile \U0001f600")
    assert record is not None and record.execution_id == "smile \U0001f600"
    assert len(journal.read("smile \ud83d\ude00")) == 1


def open_runtime(target: str | Path) -> loom.Runtime:
    return loom.Runtime.open(target, clock=FakeClock(), ids=SequentialIds(), flows=FlowRegistry())


@pytest.mark.parametrize("store", ["duckdb", "postgres"])
@pytest.mark.parametrize("case", list(BAD_IDS))
async def test_starting_a_run_with_a_bad_id_is_a_usage_error_on_both_stores(
    request: pytest.FixtureRequest, tmp_path: Path, store: str, case: str
) -> None:
    if store == "postgres":
        request.getfixturevalue("_postgres_server")
    rt = open_runtime(tmp_path / "j.duckdb" if store == "duckdb" else stores.new_schema())
    try:

        async def body(ctx: Any, input: Any) -> Any:
            return await ctx.execute("echo", input)

        rt.effects.register("echo", lambda value: value)
        flow = rt.flows.register(body, "echo-flow")
        bad, problem = BAD_IDS[case]
        with pytest.raises(UsageError, match=re.escape(problem)):
            await rt.start(flow, 1, execution_id=bad)
        assert rt.journal.list_executions() == []
        assert (await rt.start(flow, 1, execution_id="fine")).status == "completed"
        with pytest.raises(UsageError, match=re.escape(problem)):
            loom.frames(rt).steps(bad)
        assert len(loom.frames(rt).steps("fine")) == 1
    finally:
        rt.close()
        stores.drop_schemas()
