"""The golden journal of a queued execution, ``tests/kernel/golden/kernel_order_queued.jsonl``.

The golden flow submitted for a worker (``Engine.submit``: ``execution_started`` with
``"queued": true``), taken and driven by the worker to its gates, answered from elsewhere (the answer
only recorded, as a notebook does for a worker's run) and driven on to the end. It must replay, a
changed flow must be caught, and it journals exactly what the same run driven in place journals
(``kernel_order_v2.jsonl``) but for the queued marker. Regenerate it only for a deliberate, migrated
change: ``.venv/bin/python tests/kernel/golden_flows.py --write --force --format 2``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from loom_nb.journal import DuckDBJournal, InMemoryJournal, canonical_json
from loom_nb.journal.run_state import RunState
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import Engine, FlowRegistry
from tests.kernel import golden_flows
from tests.kernel.golden_flows import FLOW_NAME, GOLDEN_QUEUED, GOLDENS, QUEUED_ID


@pytest.fixture(params=["memory", "duckdb"])
def queued_journal(request: pytest.FixtureRequest) -> Iterator[JournalStore]:
    """The queued golden's events loaded into each store."""
    journal: JournalStore = InMemoryJournal() if request.param == "memory" else DuckDBJournal(":memory:")
    journal.append(golden_flows.load(GOLDEN_QUEUED).read(QUEUED_ID))
    yield journal
    journal.close()


def pure_runtime(journal: JournalStore, body: object) -> Engine:
    """The flow registered, NO effects: a replay that tried to run one would fail."""
    flows = FlowRegistry()
    flows.register(body, name=FLOW_NAME)  # type: ignore[arg-type]
    return Engine(journal, flows=flows)


def test_the_queued_golden_is_canonical_and_starts_queued() -> None:
    lines = GOLDEN_QUEUED.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [canonical_json(row) for row in rows] == lines
    assert [row["seq"] for row in rows] == list(range(1, len(rows) + 1))
    assert rows[0]["kind"] == "execution_started" and rows[0]["data"]["queued"] is True
    assert not any("queued" in row["data"] for row in rows[1:])


def test_a_worker_run_journals_what_the_same_run_driven_in_place_journals() -> None:
    """Taking a run from the queue, and answering its gates from another process, write no event of
    their own: the journal differs from the in-place run's only by the id and the queued marker."""
    queued = [json.loads(line) for line in GOLDEN_QUEUED.read_text(encoding="utf-8").splitlines()]
    in_place = [json.loads(line) for line in GOLDENS[2].read_text(encoding="utf-8").splitlines()]
    for row in queued:
        row["execution_id"] = in_place[0]["execution_id"]
    del queued[0]["data"]["queued"]
    assert queued == in_place


async def test_the_kernel_still_journals_the_queued_golden_identically() -> None:
    """A diff here means persisted shapes changed: migrate, then regenerate (module docstring)."""
    fresh = golden_flows.to_lines(await golden_flows.record_queued())
    assert fresh == GOLDEN_QUEUED.read_text(encoding="utf-8").splitlines()


async def test_the_queued_golden_replays_and_a_changed_flow_is_caught(queued_journal: JournalStore) -> None:
    assert queued_journal.get_execution(QUEUED_ID).status == "completed"  # type: ignore[union-attr]
    rt = pure_runtime(queued_journal, golden_flows.golden_order)
    assert rt.submitted(QUEUED_ID)
    report = await rt.replay(QUEUED_ID)
    assert report.reproduced, report.message
    assert (report.recorded_status, report.replayed_status) == ("completed", "completed")
    assert RunState.fold(queued_journal.read(QUEUED_ID)).status == "completed"
    changed = await pure_runtime(queued_journal, golden_flows.golden_order_changed).replay(QUEUED_ID)
    assert changed.reproduced is False and changed.replayed_status == "diverged"
    assert "Fork the run or start a new one" in changed.message
    assert len(queued_journal.read(QUEUED_ID)) == 20  # a replay writes nothing


async def test_the_queued_prefix_is_left_to_the_workers_by_recover() -> None:
    """Only the first event: the execution is ``queued``; ``recover()`` leaves it to a worker."""
    journal = golden_flows.load(GOLDEN_QUEUED, upto_seq=1)
    rt = golden_flows.make_runtime(journal)
    assert journal.get_execution(QUEUED_ID).status == "queued"  # type: ignore[union-attr]
    assert rt.result(QUEUED_ID).status == "queued"
    assert await rt.recover() == []
    assert len(journal.read(QUEUED_ID)) == 1
