"""The golden sub-agent journal ``tests/agent/golden/agent_subagent_v2.jsonl``: the persisted shapes
of child executions (``tests/agent/golden_subagent_flows.py`` describes them) are recorded the same
way, and the file replays, parent and child."""

from __future__ import annotations

import loom_nb as loom
from tests.agent import golden_subagent_flows as golden
from tests.agent.support import golden_runtime
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


async def test_replaying_the_golden_parent_descends_into_its_child() -> None:
    journal = golden_flows.load(golden.GOLDEN)
    report = await golden.make_runtime(journal).replay(golden.PARENT)
    assert report.reproduced, report.message
    assert [(c.execution_id, c.reproduced, c.replayed_status) for c in report.children] == [
        (golden.CHILD, True, "completed")
    ]


def _lead_with_an_edited_researcher() -> loom.Agent:
    """The golden lead whose researcher now has a system prompt (a changed child flow: its model
    calls would send another request than the recorded one)."""
    researcher = loom.Agent(
        model=loom.ScriptedModel(golden.researcher_respond),
        tools=[golden.fetch_page],
        system="You research carefully.",
        name="researcher",
    )
    return loom.Agent(
        model=loom.ScriptedModel(golden.lead_respond),
        tools=[researcher.as_tool(name="research", description="Research a question.")],
        system="You delegate.",
        name="lead",
    )


async def test_a_changed_child_agent_makes_the_golden_parent_diverge_naming_child_and_step() -> None:
    journal = golden_flows.load(golden.GOLDEN)
    rt = golden_runtime(journal, _lead_with_an_edited_researcher(), golden.EVENT_FORMAT)
    report = await rt.replay(golden.PARENT)
    assert not report.reproduced and report.replayed_status == "diverged"
    assert f"child execution {golden.CHILD!r}" in report.message
    assert f"step '#turn:0:tool:0' of execution {golden.PARENT!r}" in report.message
    assert [(c.execution_id, c.reproduced) for c in report.children] == [(golden.CHILD, False)]
