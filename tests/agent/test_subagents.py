"""Sub-agents with gates (``Agent.as_tool``): the callee runs as a child execution of the caller."""

from __future__ import annotations

from typing import Any

import pandas as pd

import loom_nb as loom
from loom_nb.journal.events import EventKind
from loom_nb.journal.step_ids import CHILD_GATE
from loom_nb.messages import ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests.agent.support import calls, make_runtime

TOOL_STEP = "#turn:0:tool:0"


def agents(log: list[str], *, after_crash: bool = False) -> tuple[loom.Agent[Any], loom.Agent[Any]]:
    """The lead and its researcher; ``after_crash``: the scripts of a new process (the model calls
    the journal already served are not asked again, so they are left out)."""

    @loom.tool(needs_approval=True)
    def fetch_page(url: str) -> str:
        """Fetch a web page.

        Args:
            url: The page.
        """
        log.append(f"fetch {url}")
        return f"<page {url}>"

    research_script = [calls(("fetch_page", {"url": "https://a.test"})), ModelResponse.text("a.test says hi")]
    lead_script = [calls(("research", {"input": "what does a.test say?"})), ModelResponse.text("Done: a.test says hi")]
    researcher = loom.Agent(
        ScriptedModel(research_script[2:] if after_crash else research_script),
        tools=[fetch_page],
        name="researcher",
    )
    lead = loom.Agent(
        ScriptedModel(lead_script[1:] if after_crash else lead_script),
        tools=[researcher.as_tool(name="research", description="Research a question on the web.")],
        name="lead",
    )
    return lead, researcher


async def test_a_sub_agent_runs_as_a_child_whose_gate_parks_the_parent(rt: Runtime) -> None:
    log: list[str] = []
    lead, _ = agents(log)
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    child_id = f"lead-1/{TOOL_STEP}"
    assert run.status == "suspended"
    # The parent's gates are the child's approval gate (under the child's id).
    assert [(g.execution_id, g.gate_id) for g in rt.open_gates("lead-1")] == [(child_id, "#turn:0:tool:0:approval")]
    assert rt.result(child_id).status == "suspended" and log == []
    started = rt.journal.read(child_id)[0]
    assert started.kind == EventKind.EXECUTION_STARTED
    assert started.data["parent"] == {"execution": "lead-1", "step": TOOL_STEP}
    assert started.data["flow"] == "agent:researcher" and started.data["input"] == "what does a.test say?"
    await rt.resume(child_id, "#turn:0:tool:0:approval", {"approved": True})
    assert log == ["fetch https://a.test"]
    assert rt.result(child_id).status == "completed"
    parent = rt.result("lead-1")
    assert parent.status == "completed" and parent.output["output"] == "Done: a.test says hi"
    gate = rt.history("lead-1").gates[TOOL_STEP]
    assert gate.kind == CHILD_GATE and gate.resolution["status"] == "completed"
    assert gate.resolution["output"]["output"] == "a.test says hi"
    # The parent's next model call got the child's answer as the tool result.
    turn1 = [e for e in rt.journal.read("lead-1") if e.step_id == "#turn:1" and e.kind == EventKind.STEP_STARTED]
    assert "a.test says hi" in str(turn1[0].data["input"]["add"])
    assert (await rt.replay("lead-1")).reproduced and (await rt.replay(child_id)).reproduced


async def test_recovery_after_the_child_settled_wakes_the_parent() -> None:
    log: list[str] = []
    rt = make_runtime()
    lead, _ = agents(log)
    await lead.start("go", runtime=rt, execution_id="lead-1").wait(until="paused")
    child_id = f"lead-1/{TOOL_STEP}"
    answer = rt.answer(child_id, "#turn:0:tool:0:approval", {"approved": True})
    await rt._drive_held(answer.history)  # the child settles; the process dies before waking the parent
    assert rt.result("lead-1").status == "suspended"
    rt2 = make_runtime(rt.journal)
    lead2, _ = agents(log, after_crash=True)
    lead2.register(rt2)
    results = await rt2.recover()
    assert [(r.execution_id, r.status) for r in results] == [("lead-1", "completed")]
    assert log == ["fetch https://a.test"]  # the child's tool ran once
    assert rt2.result("lead-1").output["output"] == "Done: a.test says hi"


async def test_cancelling_the_parent_cancels_the_waiting_child(rt: Runtime) -> None:
    lead, _ = agents([])
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    await rt.cancel("lead-1", "enough")
    assert rt.result(f"lead-1/{TOOL_STEP}").status == "cancelled"
    assert rt.open_gates() == []


async def test_the_executions_frame_shows_the_tree(rt: Runtime) -> None:
    from loom_nb.analysis import Frames

    lead, _ = agents([])
    await lead.start("go", runtime=rt, execution_id="lead-1").wait(until="paused")
    await rt.resume(f"lead-1/{TOOL_STEP}", "#turn:0:tool:0:approval", {"approved": True})
    with Frames(rt) as f:
        runs = f.executions().set_index("execution_id")
    child = f"lead-1/{TOOL_STEP}"
    assert runs.loc[child, ["parent_execution_id", "parent_step", "flow", "status"]].tolist() == [
        "lead-1",
        TOOL_STEP,
        "agent:researcher",
        "completed",
    ]
    assert pd.isna(runs.loc["lead-1", "parent_execution_id"]) and runs.loc["lead-1", "status"] == "completed"


async def test_the_parent_run_shows_the_child_gate_and_approving_it_finishes_both(rt: Runtime) -> None:
    log: list[str] = []
    lead, _ = agents(log)
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    (gate,) = run.gates
    assert (gate.execution_id, gate.gate_id, gate.tool) == (
        f"lead-1/{TOOL_STEP}",
        "#turn:0:tool:0:approval",
        "fetch_page",
    )
    await gate.approve()
    assert run.status == "completed" and run.result is not None
    assert run.result.output == "Done: a.test says hi" and log == ["fetch https://a.test"]


async def test_check_of_the_parked_lead_reports_an_edited_researcher() -> None:
    rt = make_runtime()
    lead, _ = agents([])
    await lead.start("go", runtime=rt, execution_id="lead-1").wait(until="paused")
    assert (await rt.check(["lead-1"])).ok
    rt2 = make_runtime(rt.journal)
    edited = loom.Agent(ScriptedModel([]), tools=[], system="Research carefully.", name="researcher")
    lead2 = loom.Agent(
        ScriptedModel([]),
        tools=[edited.as_tool(name="research", description="Research a question on the web.")],
        name="lead",
    )
    lead2.register(rt2)
    (parent,) = (await rt2.check(["lead-1"])).executions
    assert not parent.ok and parent.step == TOOL_STEP
    assert f"child execution 'lead-1/{TOOL_STEP}'" in str(parent)


def two_researchers(log: list[str]) -> loom.Agent[Any]:
    """A lead that asks its researcher two things in one turn, the calls run in parallel."""

    @loom.tool(needs_approval=True)
    def fetch_page(url: str) -> str:
        """Fetch a web page.

        Args:
            url: The page.
        """
        log.append(url)
        return f"<{url}>"

    def researching(request: Any) -> ModelResponse:
        tools = [m.text for m in request.messages if m.role == "tool"]
        if not tools:
            return calls(("fetch_page", {"url": request.messages[-1].text}))
        return ModelResponse.text(f"R: {tools[0]}")

    def leading(request: Any) -> ModelResponse:
        tools = [m.text for m in request.messages if m.role == "tool"]
        if not tools:
            return calls(("research", {"input": "a.test"}), ("research", {"input": "b.test"}))
        return ModelResponse.text(" + ".join(tools))

    researcher = loom.Agent(ScriptedModel(researching), tools=[fetch_page], name="researcher")
    return loom.Agent(
        ScriptedModel(leading), tools=[researcher.as_tool(name="research")], name="lead", parallel_tools=True
    )


async def test_two_children_of_one_turn_under_parallel_tools_park_and_finish_the_parent(rt: Runtime) -> None:
    log: list[str] = []
    run = two_researchers(log).start("go", runtime=rt, execution_id="p")
    await run.wait(until="paused")
    children = ["p/#turn:0:tool:0", "p/#turn:0:tool:1"]
    assert [g.execution_id for g in run.gates] == children
    first, second = run.gates
    await first.approve()
    assert run.status == "suspended" and [g.execution_id for g in run.gates] == children[1:]
    await second.approve()
    assert run.status == "completed" and run.result is not None
    assert run.result.output == "R: <a.test> + R: <b.test>" and log == ["a.test", "b.test"]
    report = await rt.replay("p")
    assert report.reproduced and [c.execution_id for c in report.children] == children


async def test_the_child_run_follows_when_its_gate_is_answered_through_the_parent(rt: Runtime) -> None:
    """One live ``Run`` per execution: the child's own (``Run.of``, ``%loom pending``) moves and
    settles when the parent's ``Gate`` (or its view's card) answers the child's gate."""
    import asyncio

    from loom_nb.agent.run import Run

    log: list[str] = []
    lead, _ = agents(log)
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    child = Run.of(rt, f"lead-1/{TOOL_STEP}")
    assert child.status == "suspended" and [g.gate_id for g in child.gates] == ["#turn:0:tool:0:approval"]
    (gate,) = run.gates
    resumed = gate.approve()
    assert child.status == "running" and child.gates == []  # it moves with the parent's task
    result = await asyncio.wait_for(child, 5)
    assert result.output == "a.test says hi" and child.status == "completed"
    await resumed
    assert run.status == "completed" and log == ["fetch https://a.test"]


async def test_the_parent_run_follows_when_the_child_run_answers_its_gate(rt: Runtime) -> None:
    """The other way round: answered through the child's own ``Run``, the parent's live ``Run``
    (woken by the engine once the child settles) settles too."""
    import asyncio

    from loom_nb.agent.run import Run

    lead, _ = agents([])
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    child = Run.of(rt, f"lead-1/{TOOL_STEP}")
    await child.gates[0].approve()
    assert child.status == "completed"
    result = await asyncio.wait_for(run, 5)
    assert result.output == "Done: a.test says hi" and run.status == "completed"


async def test_replay_and_check_say_a_child_flow_is_not_registered(rt: Runtime) -> None:
    """A sub-agent whose flow this process lacks is named as such (with the fix), not turned into a
    tool error the model sees (which replay would report as a next-turn divergence)."""
    import pytest

    from loom_nb.analysis.frames import frames
    from loom_nb.errors import FlowNotFoundError
    from loom_nb.kernel import FlowRegistry

    lead, researcher = agents([])
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    assert (await rt.check()).ok
    await run.gates[0].approve()
    assert (await rt.replay("lead-1")).reproduced
    rt.flows = FlowRegistry()  # a process that knows the lead's flow only (the researcher is in rt.agents still)
    lead.register(rt)
    assert "agent:researcher" not in rt.flows.names()
    with pytest.raises(FlowNotFoundError) as caught:
        await rt.replay("lead-1")
    text = str(caught.value)
    assert f"child execution 'lead-1/{TOOL_STEP}'" in text and "'agent:researcher'" in text
    assert "loom.Agent(name='researcher'" in text and "agent.register(runtime)" in text
    row = (await frames(rt).replay("lead-1")).iloc[0]
    assert row["replayed_status"] == "flow_not_found" and "not registered" in row["message"]
    researcher.register(rt)
    assert (await rt.replay("lead-1")).reproduced


async def test_check_says_a_parked_child_flow_is_not_registered(rt: Runtime) -> None:
    from loom_nb.kernel import FlowRegistry

    lead, _ = agents([])
    await lead.start("go", runtime=rt, execution_id="lead-1").wait(until="paused")
    rt.flows = FlowRegistry()
    lead.register(rt)
    (parent,) = (await rt.check(["lead-1"])).executions
    (finding,) = parent.findings
    assert finding.step == TOOL_STEP and "is not registered" in finding.reason
    assert finding.fix == "define (or import) the flow, then check again"
