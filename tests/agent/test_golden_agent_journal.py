"""The golden agent journal ``tests/agent/golden/agent_approval_keep_rule_2.jsonl``: the agent loop's
persisted ids and event shapes (model turns, a tool, an approval, a compaction) must not change, and
the recorded run must replay, as must ``agent_approval.jsonl``, the same run recorded before
compactions journaled ``keep_rule``."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.agent.transcript import rebuild_requests
from loom_nb.journal import step_ids
from loom_nb.journal.run_state import RunState
from tests.agent import golden_agent_flows
from tests.kernel import golden_flows

FORMATS = pytest.mark.parametrize("event_format", sorted(golden_agent_flows.GOLDENS), ids=lambda f: f"format{f}")


@FORMATS
async def test_the_agent_loop_still_journals_the_golden_run_identically(event_format: int) -> None:
    """A diff here means persisted ids or shapes changed: migrate, then regenerate (module docstring)."""
    fresh = golden_flows.to_lines(await golden_agent_flows.record(event_format))
    assert fresh == golden_agent_flows.GOLDENS[event_format].read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("path", golden_agent_flows.REPLAYED, ids=lambda p: p.stem)
async def test_the_golden_agent_journal_replays(path: Path) -> None:
    journal = golden_agent_flows.load(path)
    rt = golden_agent_flows.make_runtime(journal)
    before = len(journal.read(golden_agent_flows.EXECUTION_ID))
    report = await rt.replay(golden_agent_flows.EXECUTION_ID)
    assert report.reproduced, report.message
    assert len(journal.read(golden_agent_flows.EXECUTION_ID)) == before


def test_both_formats_fold_and_rebuild_to_the_same_run() -> None:
    """Format 2 keeps tool inputs as references, no digest or key, the usage only in the output and
    no durable copy of the model's text: the fold and the request rebuild give what format 1 gives."""
    v1, v2 = (golden_agent_flows.load(f).read(golden_agent_flows.EXECUTION_ID) for f in (1, 2))
    s1, s2 = RunState.fold(v1), RunState.fold(v2)
    assert list(s1.steps) == list(s2.steps)
    for sid, step in s1.steps.items():
        other = s2.steps[sid]
        assert (other.effect, other.output, other.usage, other.attempts) == (
            step.effect,
            step.output,
            step.usage,
            step.attempts,
        ), sid
        if not step_ids.is_transcript_node(sid):  # a node's record is shorter in format 2 (rebuilt below)
            assert (other.input, other.input_digest()) == (step.input, step.digest), sid
    assert s2.usage == s1.usage
    assert [s.ref for s in s2.steps.values() if s.kind == step_ids.TOOL_KIND] == [
        ["#turn:0", "message", "tool_calls", 0, "arguments"],
        ["#turn:1", "message", "tool_calls", 0, "arguments"],
    ]
    r1, r2 = rebuild_requests(v1), rebuild_requests(v2)
    assert {k: (v.messages, v.tools) for k, v in r1.items()} == {k: (v.messages, v.tools) for k, v in r2.items()}
    assert sum(len(str(e.data)) for e in v2) < 0.75 * sum(len(str(e.data)) for e in v1)


@FORMATS
def test_every_golden_id_is_in_the_grammar(event_format: int) -> None:
    events = golden_agent_flows.load(event_format).read(golden_agent_flows.EXECUTION_ID)
    kinds = {step_ids.parse_step_id(e.step_id).kind for e in events if e.step_id}
    assert kinds == {step_ids.MODEL, step_ids.TOOL, step_ids.APPROVAL, step_ids.COMPACTION}
    state = RunState.fold(events)
    assert state.flow == step_ids.agent_flow_name(golden_agent_flows.AGENT_NAME)
    assert {s.effect for s in state.steps.values() if s.kind == step_ids.TOOL_KIND} == {
        step_ids.tool_effect_id("list_files"),
        step_ids.tool_effect_id("delete_file"),
    }
    assert [g.kind for g in state.gates.values()] == [step_ids.APPROVAL_GATE]
