"""A commit of ``ARROW_ROWS`` events or more moves them to DuckDB as one Arrow table instead of six
bound lists: the rows it writes are the rows the lists write (any text, lone surrogates included,
``None`` step ids, microsecond times), and it fails the same way (a duplicate ``seq`` is a
``JournalWriteError`` naming the execution, with nothing of the commit written; so is a failing
projection statement after the events, and a number beyond 64 bits). Making the table never
imports pandas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loom_nb.errors import JournalWriteError
from loom_nb.journal import DuckDBJournal, Event, EventKind, InMemoryJournal, duckdb_store
from loom_nb.journal.canonical import storable_text
from loom_nb.journal.duckdb_store import ARROW_ROWS
from tests.journal.support import fill, full_tmpfs, shape
from tests.journal.test_storable_text import IDS, VALUES

ROWS = 'SELECT execution_id, seq, kind, step_id, "at", data FROM events ORDER BY execution_id, seq'


def batch(ids: list[str], per: int, values: list[Any], steps: list[str | None], at: float) -> list[Event]:
    """``per`` events for each id in ``ids`` (each execution's in ``seq`` order), interleaved the
    way a group commit gathers them."""
    events = [
        Event(eid, 1, EventKind.EXECUTION_STARTED, None, at, {"flow": "f", "input": values[0], "principal": None})
        for eid in ids
    ]
    for seq in range(2, per + 1):
        for k, eid in enumerate(ids):
            step = steps[(seq + k) % len(steps)]
            data = {"kind": "x", "value": values[(seq + k) % len(values)]}
            events.append(Event(eid, seq, EventKind.VALUE_RECORDED, step, at + seq / 7, data))
    return events


@settings(max_examples=25, deadline=None)
@given(
    ids=st.lists(IDS, min_size=1, max_size=4, unique=True),
    values=st.lists(VALUES, min_size=1, max_size=5),
    steps=st.lists(st.one_of(st.none(), IDS), min_size=1, max_size=4),
    at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)
@pytest.mark.slow
def test_one_arrow_table_writes_the_rows_bound_lists_write(
    ids: list[str], values: list[Any], steps: list[str | None], at: float
) -> None:
    assume(len({storable_text(i) for i in ids}) == len(ids))  # two ids stored as one text are one execution
    assert duckdb_store._arrow() is not None  # the large commit below goes as Arrow, not as lists
    events = batch(ids, -(-ARROW_ROWS // len(ids)), values, steps, at)
    assert len(events) >= ARROW_ROWS
    bulk, small, memory = DuckDBJournal(":memory:"), DuckDBJournal(":memory:"), InMemoryJournal()
    bulk.append(events)  # one commit: the Arrow table
    for start in range(0, len(events), ARROW_ROWS - 1):  # commits below the threshold: bound lists
        small.append(events[start : start + ARROW_ROWS - 1])
    memory.append(events)
    assert bulk.connection.execute(ROWS).fetchall() == small.connection.execute(ROWS).fetchall()
    for eid in ids:
        assert bulk.read(eid) == small.read(eid)
        assert shape(bulk.read(eid)) == shape(memory.read(eid))  # DuckDB keeps ``at`` to the microsecond
    for journal in (bulk, small, memory):
        journal.close()


def test_a_duplicate_seq_in_an_arrow_commit_names_the_execution_and_writes_nothing(tmp_path: Path) -> None:
    journal = DuckDBJournal(tmp_path / "j.duckdb")
    journal.append(batch(["a", "b"], ARROW_ROWS, ["v"], [None, "s"], 1.0))
    before = journal.connection.execute(ROWS).fetchall()
    again = [*batch(["c"], ARROW_ROWS, ["v"], ["s"], 2.0), Event("a", 3, EventKind.VALUE_RECORDED, "s", 2.0, {})]
    with pytest.raises(JournalWriteError) as info:
        journal.append(again)
    assert info.value.execution_id in {"a", "c"} and "duplicate seq" in str(info.value)
    assert journal.connection.execute(ROWS).fetchall() == before
    journal.append(again[:-1])  # the connection works on: no transaction was left open
    assert len(journal.read("c")) == ARROW_ROWS
    journal.close()


def test_an_arrow_commit_on_a_full_disk_fails_with_its_cause_and_writes_nothing(tmp_path: Path) -> None:
    """On a real full disk (a 2 MiB tmpfs, needs root)."""
    with full_tmpfs(tmp_path / "disk") as disk:
        journal = DuckDBJournal(disk / "journal.duckdb")
        journal.append(batch(["a"], 2, ["v"], ["s"], 1.0))
        before = journal.read("a")
        filler = fill(disk)
        more = [
            Event("a", seq, EventKind.VALUE_RECORDED, "s", 2.0, {"kind": "x", "value": "x" * 20_000})
            for seq in range(3, 3 + ARROW_ROWS)
        ]
        with pytest.raises(JournalWriteError) as info:
            journal.append(more)
        assert "No space left on device" in str(info.value.__cause__)
        assert info.value.execution_id == "a" and "free disk space" in str(info.value).lower()
        assert journal.read("a") == before
        filler.unlink()
        journal.append(more)  # the connection works on once the disk has room
        assert [e.seq for e in journal.read("a")] == list(range(1, 3 + ARROW_ROWS))
        journal.close()


def test_without_pyarrow_a_large_commit_binds_lists_and_writes_the_same_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyarrow is a dependency; where it cannot be imported (a broken environment) a large commit
    still goes through, as bound lists."""
    events = batch(["a", "b"], ARROW_ROWS, ["v", {"k": [1, None]}], [None, "s"], 1.0)
    with_arrow = DuckDBJournal(":memory:")
    with_arrow.append(events)
    asked: list[bool] = []
    monkeypatch.setattr(duckdb_store, "_arrow", lambda: asked.append(True))  # pyarrow missing: None
    without = DuckDBJournal(":memory:")
    without.append(events)
    assert asked == [True]  # the large commit asked for Arrow and bound lists instead
    assert without.connection.execute(ROWS).fetchall() == with_arrow.connection.execute(ROWS).fetchall()
    for journal in (with_arrow, without):
        journal.close()


def test_events_of_an_arrow_commit_are_rolled_back_when_the_projection_fails(tmp_path: Path) -> None:
    """The table is inserted inside the commit's transaction: when the executions projection's
    insert fails after it (an execution started twice), none of the commit's events stay."""
    assert duckdb_store._arrow() is not None  # the commit below goes as Arrow, not as lists
    journal = DuckDBJournal(tmp_path / "j.duckdb")
    start = {"flow": "f", "input": None, "principal": None}
    journal.append([Event("a", 1, EventKind.EXECUTION_STARTED, None, 1.0, start)])
    before = journal.connection.execute(ROWS).fetchall()
    twice = [
        *batch(["b", "c"], ARROW_ROWS, ["v"], ["s"], 2.0),
        Event("a", 2, EventKind.EXECUTION_STARTED, None, 2.0, start),  # the execution exists: no second row
    ]
    with pytest.raises(JournalWriteError):
        journal.append(twice)
    assert journal.connection.execute(ROWS).fetchall() == before
    assert [r.execution_id for r in journal.list_executions()] == ["a"]
    journal.close()


def test_a_time_beyond_64_bits_in_an_arrow_commit_fails_as_in_a_small_one(tmp_path: Path) -> None:
    """A number no 64-bit column holds: the large commit binds lists instead, so DuckDB's error is
    the same as for a small commit (a ``JournalWriteError``, nothing written)."""
    assert duckdb_store._arrow() is not None  # the large commit tries Arrow first
    journal = DuckDBJournal(tmp_path / "j.duckdb")
    far = [Event("a", seq, EventKind.VALUE_RECORDED, "s", 1e14 if seq == 5 else 1.0, {}) for seq in range(1, 200)]
    errors = []
    for events in (far, far[:6]):  # one Arrow-sized commit, one small one
        with pytest.raises(JournalWriteError) as info:
            journal.append(events)
        errors.append(type(info.value.__cause__))
    assert errors[0] is errors[1]
    assert journal.connection.execute(ROWS).fetchall() == []
    journal.close()


@pytest.mark.slow
def test_group_commits_never_import_pandas(tmp_path: Path) -> None:
    """The kernel never imports pandas: 64 concurrent runs on a DuckDB file (group commits of up to
    256 events, as Arrow tables) in a fresh process leave it out of ``sys.modules``
    (``pyarrow.array`` would import it)."""
    code = (
        "import asyncio, sys\n"
        "import loom_nb as loom\n"
        "from loom_nb.journal import DuckDBJournal\n"
        "from loom_nb.kernel import FlowRegistry\n"
        "@loom.tool(idempotent=True)\n"
        "async def work(turn: int) -> str:\n"
        "    'Work.'\n"
        "    return f'done {turn}'\n"
        "def respond(request):\n"
        "    turn = (len(request.messages) - 1) // 2\n"
        "    if turn >= 4:\n"
        "        return loom.ModelResponse.text('done')\n"
        "    return loom.ModelResponse.tool_calls([('work', {'turn': turn})])\n"
        "agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[work], name='bulk')\n"
        f"rt = loom.Runtime(DuckDBJournal({str(tmp_path / 'j.duckdb')!r}), flows=FlowRegistry())\n"
        "agent.register(rt)\n"
        "async def main():\n"
        "    starts = (rt.start(agent.flow_name, 'go', execution_id=f'r{i}') for i in range(64))\n"
        "    runs = await asyncio.gather(*starts)\n"
        "    assert {r.status for r in runs} == {'completed'}, runs\n"
        "asyncio.run(main())\n"
        "rt.close()\n"
        "print('pyarrow' in sys.modules, 'pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["True", "False"], out.stdout  # Arrow tables were made; pandas stayed out
