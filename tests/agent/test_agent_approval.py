"""Approval (``docs/design.md``, section 6.4): the gate parks the run BEFORE the effect, an approval
runs it, a refusal is data the model reads as the tool's result, and every call of a turn that needs
approval opens its gate together, before any of that turn's effects run."""

from __future__ import annotations

from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import APPROVAL_GATE, AgentConfig, AgentResult, ApprovalDecision
from loom_nb.errors import ResumeValidationError, UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelResponse, ToolCall
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import (
    MODEL,
    assert_rebuilt_matches,
    calls,
    events,
    make_runtime,
    run_agent,
    step_ids,
)

GATE = "#turn:0:tool:0:approval"


def tools(log: list[str]) -> tuple[loom.Tool, loom.Tool]:
    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        log.append(f"delete {path}")
        return f"deleted {path}"

    @loom.tool
    def search(query: str) -> list[str]:
        """Search files."""
        log.append(f"search {query}")
        return [f"/tmp/{query}.log"]

    return delete_file, search


def agent(log: list[str], script: list[ModelResponse], **options: Any) -> tuple[AgentConfig, ScriptedModel]:
    return AgentConfig(model=MODEL, tools=list(tools(log)), **options), ScriptedModel(script)


async def test_the_gate_parks_the_run_before_the_effect_runs() -> None:
    log: list[str] = []
    config, model = agent(log, [calls(("delete_file", {"path": "/tmp/a"}), text="Deleting."), ModelResponse.text("ok")])
    rt, result = await run_agent(config, model, "tidy up")
    eid = result.execution_id

    assert result.status == "suspended"
    assert [g.gate_id for g in result.gates] == [GATE]
    assert log == []  # nothing destructive ran while a person decides
    assert "#turn:0:tool:0" not in step_ids(rt, eid)
    (opened,) = events(rt, eid, EventKind.GATE_OPENED)
    assert opened.step_id == GATE
    assert opened.data == {
        "kind": APPROVAL_GATE,
        "payload": {"tool": "delete_file", "arguments": {"path": "/tmp/a"}, "call_id": "call_0", "turn": 0},
        "schema": "loom_nb.agent.config:ApprovalDecision",
    }
    kinds = [e.kind for e in events(rt, eid)]
    assert kinds[-2:] == [EventKind.GATE_OPENED, EventKind.EXECUTION_SUSPENDED]
    assert len(model.history) == 1


async def test_an_approval_runs_the_tool_and_the_model_reads_its_result() -> None:
    log: list[str] = []
    config, model = agent(log, [calls(("delete_file", {"path": "/tmp/a"})), ModelResponse.text("Removed.")])
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    done = await rt.resume(eid, GATE, ApprovalDecision(approved=True, reason="fine"))
    assert done.status == "completed"
    assert AgentResult.model_validate(done.output).output == "Removed."
    assert log == ["delete /tmp/a"]
    told = model.history[1].messages[-1]
    assert (told.role, told.text, told.is_error) == ("tool", "deleted /tmp/a", False)
    kinds = [(e.kind, e.step_id) for e in events(rt, eid)]
    assert kinds.index((EventKind.GATE_RESOLVED, GATE)) < kinds.index((EventKind.STEP_STARTED, "#turn:0:tool:0"))
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced
    assert log == ["delete /tmp/a"]


@pytest.mark.parametrize(
    ("refusal_text", "reason", "told"),
    [
        (AgentConfig.refusal_text, "keep it", "The user refused to run delete_file. Reason: keep it"),
        (AgentConfig.refusal_text, None, "The user refused to run delete_file."),
        ("Not allowed: {tool}.{reason}", "policy", "Not allowed: delete_file. Reason: policy"),
        (lambda call, d: f"{call.arguments['path']} stays ({d.reason})", "needed", "/tmp/a stays (needed)"),
    ],
    ids=["default", "default-no-reason", "template", "callable"],
)
async def test_a_refusal_reaches_the_model_as_the_tools_result_and_the_run_settles(
    refusal_text: Any, reason: str | None, told: str
) -> None:
    log: list[str] = []
    config, model = agent(
        log,
        [calls(("delete_file", {"path": "/tmp/a"})), ModelResponse.text("Understood, kept it.")],
        refusal_text=refusal_text,
    )
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    done = await rt.resume(eid, GATE, {"approved": False, "reason": reason})
    assert done.status == "completed"  # a refusal is data, not an error
    assert AgentResult.model_validate(done.output).output == "Understood, kept it."
    assert log == []
    message = model.history[1].messages[-1]
    assert (message.role, message.tool_call_id, message.name, message.is_error) == (
        "tool",
        "call_0",
        "delete_file",
        True,
    )
    assert message.text == told
    assert step_ids(rt, eid) == ["#turn:0", "#turn:1"]
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced


async def test_every_gate_of_a_turn_opens_together_before_any_of_the_turns_effects() -> None:
    log: list[str] = []
    script = [
        calls(
            ("delete_file", {"path": "/tmp/a"}),
            ("search", {"query": "b"}),
            ("delete_file", {"path": "/tmp/b"}),
        ),
        ModelResponse.text("Done."),
    ]
    config, model = agent(log, script)
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    assert result.status == "suspended"
    assert [g.gate_id for g in result.gates] == ["#turn:0:tool:0:approval", "#turn:0:tool:2:approval"]
    assert log == []  # not even the call that needs no approval ran
    assert [sid for sid in step_ids(rt, eid) if ":tool:" in sid] == []

    first = await rt.resume(eid, "#turn:0:tool:0:approval", {"approved": True})
    assert first.status == "suspended"  # one gate is still open: nothing runs yet
    assert [g.gate_id for g in first.gates] == ["#turn:0:tool:2:approval"]
    assert log == []

    done = await rt.resume(eid, "#turn:0:tool:2:approval", {"approved": False, "reason": "b is needed"})
    assert done.status == "completed"
    assert sorted(log) == ["delete /tmp/a", "search b"]
    assert step_ids(rt, eid) == ["#turn:0", "#turn:0:tool:0", "#turn:0:tool:1", "#turn:1"]
    seq = {(e.kind, e.step_id): e.seq for e in events(rt, eid)}
    opened = [s for (k, _), s in seq.items() if k == EventKind.GATE_OPENED]
    tool_starts = [s for (k, sid), s in seq.items() if k == EventKind.STEP_STARTED and ":tool:" in (sid or "")]
    assert len(opened) == 2 and max(opened) < min(tool_starts)
    results = [(m.tool_call_id, m.text, m.is_error) for m in model.history[1].messages if m.role == "tool"]
    assert results == [
        ("call_0", "deleted /tmp/a", False),
        ("call_1", '["/tmp/b.log"]', False),
        ("call_2", "The user refused to run delete_file. Reason: b is needed", True),
    ]
    assert_rebuilt_matches(rt, eid, model)


async def test_the_config_rule_and_a_tool_rule_decide_per_call() -> None:
    log: list[str] = []

    @loom.tool(needs_approval=lambda call, turn: call.arguments.get("force") is True)
    def move(path: str, force: bool = False) -> str:
        """Move a file."""
        log.append(f"move {path}")
        return "moved"

    def outside_tmp(call: ToolCall, turn: int) -> bool:
        return not str(call.arguments.get("path", "")).startswith("/tmp/")

    script = [
        calls(
            ("move", {"path": "/tmp/x"}),
            ("move", {"path": "/etc/x"}),
            ("move", {"path": "/tmp/y", "force": True}),
        ),
        ModelResponse.text("ok"),
    ]
    config = AgentConfig(model=MODEL, tools=[move], needs_approval=outside_tmp)
    _, result = await run_agent(config, ScriptedModel(script))
    assert [g.gate_id for g in result.gates] == ["#turn:0:tool:1:approval", "#turn:0:tool:2:approval"]
    assert log == []


async def test_a_gate_resolves_once_and_a_bad_payload_is_refused_with_nothing_recorded() -> None:
    log: list[str] = []
    config, model = agent(log, [calls(("delete_file", {"path": "/tmp/a"})), ModelResponse.text("ok")])
    rt, result = await run_agent(config, model)
    eid = result.execution_id
    before = len(events(rt, eid))

    with pytest.raises(ResumeValidationError, match=r"is not a valid ApprovalDecision.*the gate is still open"):
        await rt.resume(eid, GATE, {"approved": "maybe"})
    with pytest.raises(ResumeValidationError):
        await rt.resume(eid, GATE, {"reason": "no decision"})
    assert len(events(rt, eid)) == before and log == []
    assert rt.result(eid).status == "suspended"

    await rt.resume(eid, GATE, {"approved": True})
    with pytest.raises(
        UsageError,
        match=r"gate '#turn:0:tool:0:approval' of execution 'exec-1' is already decided: approved, as the journal",
    ):
        await rt.resume(eid, GATE, {"approved": True})
    assert log == ["delete /tmp/a"]
    with pytest.raises(UsageError, match=r"has no gate '#turn:9:tool:0:approval' \(open gates: none\)"):
        await rt.resume(eid, "#turn:9:tool:0:approval", {"approved": True})


async def test_in_a_notebook_the_gate_methods_refuse_a_second_resolution_and_a_bad_payload() -> None:
    log: list[str] = []
    delete_file, search = tools(log)
    rt = make_runtime()
    agent_ = loom.Agent(
        model=ScriptedModel([calls(("delete_file", {"path": "/tmp/a"})), ModelResponse.text("kept")]),
        tools=[delete_file, search],
    )
    run = agent_.start("tidy", runtime=rt)
    await run.wait(until="paused")
    (gate,) = run.gates
    with pytest.raises(ResumeValidationError, match="not a valid ApprovalDecision"):
        gate.resolve({"approved": "perhaps"})
    assert run.status == "suspended" and not gate.resolved  # still waiting, still resolvable
    with pytest.raises(UsageError, match="is a AgentToolApproval gate, not InDoubt"):
        gate.happened("x")
    gate.refuse("not now")
    with pytest.raises(
        UsageError, match=r"'#turn:0:tool:0:approval' of execution .* is already decided: refused \(not now\), by"
    ):
        gate.approve()
    result = await run
    assert result.output == "kept" and log == []
