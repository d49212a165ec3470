"""Golden journal: a committed recording must still replay, and a changed flow must be caught.

There is one golden file per event format (``kernel_order.jsonl``: format 1, ``kernel_order_v2.jsonl``:
format 2); every test runs on both. Regenerate one only for a deliberate change of the journal's
shapes: ``.venv/bin/python tests/kernel/golden_flows.py --write [--format 2]`` (see
``tests/kernel/golden_flows.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from loom_nb.errors import NonDeterminismError
from loom_nb.journal import DuckDBJournal, Event, InMemoryJournal, canonical_json
from loom_nb.journal.run_state import RunState
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import Engine, FlowRegistry
from tests.journal.support import kinds
from tests.kernel import golden_flows
from tests.kernel.golden_flows import EXECUTION_ID, FLOW_NAME, GOLDENS

FORMATS = sorted(GOLDENS)


def golden_events(event_format: int = 1) -> list[Event]:
    return golden_flows.load(GOLDENS[event_format]).read(EXECUTION_ID)


@pytest.fixture(params=FORMATS, ids=lambda f: f"format{f}")
def event_format(request: pytest.FixtureRequest) -> int:
    """Each event format's golden file."""
    return int(request.param)


@pytest.fixture(params=["memory", "duckdb"])
def golden_journal(request: pytest.FixtureRequest, event_format: int) -> Iterator[JournalStore]:
    """The golden events of each format loaded into each store."""
    journal: JournalStore = InMemoryJournal() if request.param == "memory" else DuckDBJournal(":memory:")
    journal.append(golden_events(event_format))
    yield journal
    journal.close()


def pure_runtime(journal: JournalStore, body: object) -> Engine:
    """A runtime with the flow but NO effects registered: a replay that tried to run one would fail."""
    flows = FlowRegistry()
    flows.register(body, name=FLOW_NAME)  # type: ignore[arg-type]
    return Engine(journal, flows=flows)


def test_golden_file_is_canonical_json_lines(event_format: int) -> None:
    lines = GOLDENS[event_format].read_text(encoding="utf-8").splitlines()
    assert len(lines) == 20
    for seq, line in enumerate(lines, start=1):
        row = json.loads(line)
        assert set(row) == {"execution_id", "seq", "kind", "step_id", "at", "data"}
        assert row["seq"] == seq and row["execution_id"] == EXECUTION_ID
        assert canonical_json(row) == line


async def test_the_kernel_still_journals_the_golden_run_identically(event_format: int) -> None:
    """A diff here means the persisted shapes changed: migrate, then regenerate (see module docstring)."""
    fresh = golden_flows.to_lines(await golden_flows.record(event_format))
    assert fresh == GOLDENS[event_format].read_text(encoding="utf-8").splitlines()


def test_format_2_leaves_out_what_a_reader_derives_and_the_fold_restores_it() -> None:
    v1, v2 = RunState.fold(golden_events(1)), RunState.fold(golden_events(2))
    assert (v1.format, v2.format) == (1, 2)
    for sid, step in v1.steps.items():
        other = v2.steps[sid]
        assert (other.effect, other.input, other.input_digest(), other.attempts, other.output, other.error) == (
            step.effect,
            step.input,
            step.digest,
            step.attempts,
            step.output,
            step.error,
        )
    started = [e.data for e in golden_events(2) if e.kind == "step_started"]
    assert all(set(d) == {"effect", "input"} for d in started)
    completed = [e.data for e in golden_events(2) if e.kind == "step_completed"]
    assert all(set(d) == {"output"} for d in completed)


async def test_golden_journal_replays_with_the_original_flow(golden_journal: JournalStore) -> None:
    rt = pure_runtime(golden_journal, golden_flows.golden_order)
    report = await rt.replay(EXECUTION_ID)
    assert report.reproduced, report.message
    assert (report.recorded_status, report.replayed_status, report.message) == (
        "completed",
        "completed",
        "reproduced",
    )
    # 3 steps (one a recorded failure), 1 decision, 2 gates, 3 values
    assert report.served == 9
    assert report.trace == (
        ("step", "#1"),
        ("step", "reserve"),
        ("decision", "carrier"),
        ("gate", "manager"),
        ("gate", "finance"),
        ("step", "#2"),
        ("value", "#value:1"),
        ("value", "#value:2"),
        ("value", "#value:3"),
    )
    assert len(golden_journal.read(EXECUTION_ID)) == 20  # a replay writes nothing


async def test_golden_journal_with_the_changed_flow_is_reported_not_reproduced(
    golden_journal: JournalStore,
) -> None:
    rt = pure_runtime(golden_journal, golden_flows.golden_order_changed)
    report = await rt.replay(EXECUTION_ID)
    # The kernel's replay() reports non-determinism (it does not raise it).
    assert report.reproduced is False
    assert (report.recorded_status, report.replayed_status) == ("completed", "diverged")
    recorded_digest = RunState.fold(golden_journal.read(EXECUTION_ID)).steps["#2"].input_digest()
    assert recorded_digest == golden_events(1)[13].data["digest"]  # format 2 recomputes the same digest
    assert f"execution {EXECUTION_ID!r}, step '#2': its input digest {recorded_digest} was recorded" in report.message
    assert "Fork the run or start a new one" in report.message
    assert len(golden_journal.read(EXECUTION_ID)) == 20


async def test_recovering_the_golden_prefix_with_the_changed_flow_reports_non_determinism(event_format: int) -> None:
    """Cut the golden run right after the charge's step_started (a crash in flight): recovering it
    with the original flow parks the charge in doubt; with the changed flow recover() reports the
    NonDeterminismError for that execution, records nothing, and leaves it running."""
    cut = next(e.seq for e in golden_events(event_format) if e.kind == "step_started" and e.step_id == "#2")
    path = GOLDENS[event_format]

    original = golden_flows.make_runtime(golden_flows.load(path, upto_seq=cut))
    (result,) = await original.recover()
    assert (result.status, [g.gate_id for g in result.gates]) == ("suspended", ["#2:in_doubt"])

    journal = golden_flows.load(path, upto_seq=cut)
    changed = golden_flows.make_runtime(journal, golden_flows.golden_order_changed)
    (reported,) = await changed.recover()
    assert reported.status == "running" and reported.error is not None
    assert reported.error["type"] == "loom_nb.errors:NonDeterminismError"
    assert re.search(rf"execution '{EXECUTION_ID}', step '#2'.*Fork the run", reported.error["message"])
    assert isinstance(reported.exception(), NonDeterminismError)
    assert len(journal.read(EXECUTION_ID)) == cut
    assert kinds(journal.read(EXECUTION_ID))[-1] == "step_started"
