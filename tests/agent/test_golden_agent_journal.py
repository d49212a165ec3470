"""The golden agent journal ``tests/agent/golden/agent_approval_keep_rule_2.jsonl``: the agent loop's
persisted ids and event shapes (model turns, a tool, an approval, a compaction) must not change, and
the recorded run must replay, as must ``agent_approval.jsonl``, the same run recorded before
compactions journaled ``keep_rule``."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.journal import step_ids
from loom_nb.journal.run_state import RunState
from tests.agent import golden_agent_flows
from tests.kernel import golden_flows


async def test_the_agent_loop_still_journals_the_golden_run_identically() -> None:
    """A diff here means persisted ids or shapes changed: migrate, then regenerate (module docstring)."""
    fresh = golden_flows.to_lines(await golden_agent_flows.record())
    assert fresh == golden_agent_flows.GOLDEN.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(
    "path", [golden_agent_flows.GOLDEN, golden_agent_flows.BEFORE_KEEP_RULE], ids=["keep_rule_2", "before"]
)
async def test_the_golden_agent_journal_replays(path: Path) -> None:
    journal = golden_agent_flows.load(path)
    rt = golden_agent_flows.make_runtime(journal)
    before = len(journal.read(golden_agent_flows.EXECUTION_ID))
    report = await rt.replay(golden_agent_flows.EXECUTION_ID)
    assert report.reproduced, report.message
    assert len(journal.read(golden_agent_flows.EXECUTION_ID)) == before


def test_every_golden_id_is_in_the_grammar() -> None:
    events = golden_agent_flows.load().read(golden_agent_flows.EXECUTION_ID)
    kinds = {step_ids.parse_step_id(e.step_id).kind for e in events if e.step_id}
    assert kinds == {step_ids.MODEL, step_ids.TOOL, step_ids.APPROVAL, step_ids.COMPACTION}
    state = RunState.fold(events)
    assert state.flow == step_ids.agent_flow_name(golden_agent_flows.AGENT_NAME)
    assert {s.effect for s in state.steps.values() if s.kind == step_ids.TOOL_KIND} == {
        step_ids.tool_effect_id("list_files"),
        step_ids.tool_effect_id("delete_file"),
    }
    assert [g.kind for g in state.gates.values()] == [step_ids.APPROVAL_GATE]
