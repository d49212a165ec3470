"""The golden sub-agent journal ``tests/agent/golden/agent_subagent_v2.jsonl``: the persisted shapes
of child executions (``tests/agent/golden_subagent_flows.py`` describes them) are recorded the same
way, and the file replays, parent and child."""

from __future__ import annotations

from tests.agent import golden_subagent_flows as golden
from tests.kernel import golden_flows


async def test_sub_agents_still_journal_the_golden_run_identically() -> None:
    fresh = golden_flows.to_lines(await golden.record())
    assert fresh == golden.GOLDEN.read_text(encoding="utf-8").splitlines()


async def test_the_golden_sub_agent_journal_replays_parent_and_child() -> None:
    journal = golden_flows.load(golden.GOLDEN)
    rt = golden.make_runtime(journal)
    assert sorted(r.execution_id for r in journal.list_executions()) == [golden.PARENT, golden.CHILD]
    for eid in (golden.PARENT, golden.CHILD):
        report = await rt.replay(eid)
        assert report.reproduced, (eid, report.message)
    assert (await rt.check([golden.PARENT, golden.CHILD])).ok
    assert journal.read(golden.CHILD)[0].data["parent"] == {"execution": golden.PARENT, "step": "#turn:0:tool:0"}
    gate = rt.history(golden.PARENT).gates["#turn:0:tool:0"]
    assert gate.kind == "ChildExecution" and gate.resolution["status"] == "completed"
    assert rt.result(golden.PARENT).status == "completed"
