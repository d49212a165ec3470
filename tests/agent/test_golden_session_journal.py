"""The golden session journal ``tests/agent/golden/agent_session_keep_rule_2.jsonl``: the persisted
forms of sessions (run ids, the session input, the carry item, compaction across runs) and of
versioned agents (the patch marker) must not change, and every recorded run must replay, as must
``agent_session.jsonl``, the same runs recorded before compactions journaled ``keep_rule``."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.agent.carry import journal_carry
from loom_nb.agent.transcript import rebuild_requests
from tests.agent import golden_session_flows as golden
from tests.kernel import golden_flows

IDS = [f"session:chat:thread-1:{i}" for i in range(3)]
FORMATS = pytest.mark.parametrize("event_format", sorted(golden.GOLDENS), ids=lambda f: f"format{f}")


@FORMATS
async def test_sessions_still_journal_the_golden_runs_identically(event_format: int) -> None:
    """A diff here means persisted ids or shapes changed: migrate, then regenerate (module docstring)."""
    fresh = golden_flows.to_lines(await golden.record(event_format))
    assert fresh == golden.GOLDENS[event_format].read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("path", golden.REPLAYED, ids=lambda p: p.stem)
async def test_the_golden_session_journal_replays_and_rebuilds(path: Path) -> None:
    journal = golden.load(path)
    rt = golden.make_runtime(journal)
    assert [r.execution_id for r in journal.list_executions()] == IDS
    for eid in IDS:
        report = await rt.replay(eid)
        assert report.reproduced, (eid, report.message)
    assert (await rt.check(IDS)).ok
    inputs = [journal.read(eid)[0].data["input"] for eid in IDS]
    assert [i["session"]["previous"] for i in inputs] == [None, IDS[0], IDS[1]]
    first_nodes = [next(e for e in journal.read(eid) if e.kind == "step_started") for eid in IDS[1:]]
    assert [{"carry": {"execution": IDS[0], "node": "#turn:1"}}] == [
        item for item in first_nodes[0].data["input"]["add"] if "carry" in item
    ]
    assert all(journal.read(eid)[1].step_id == "#patched:short-answers" for eid in IDS)
    # The last run compacted messages of the earlier runs: its rebuilt request holds the summary.
    rebuilt = rebuild_requests(journal.read(IDS[2]), carry=journal_carry(journal))
    texts = [m.text for m in rebuilt["#turn:0"].messages]
    assert texts[0] == "You answer about folders, briefly."
    assert texts[1].startswith("[Summary of the earlier conversation]")
