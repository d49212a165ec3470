"""Approving edited arguments: the approval is bound to the digest of the exact arguments that will
run; the gate keeps the model's arguments, its resolution the edited ones, the tool runs the edited
ones and the model is told (``EDITED_NOTE``). The golden ``agent_approval_edited.jsonl`` pins the
shapes and must replay; the older ``agent_approval.jsonl`` (no digest) still journals identically."""

from __future__ import annotations

import pytest

import loom_nb as loom
from loom_nb.agent import ApprovalDecision
from loom_nb.agent.loop import EDITED_NOTE
from loom_nb.errors import ResumeValidationError, StaleApprovalError, ToolArgumentsError
from loom_nb.journal import canonical_json, digest_value
from loom_nb.journal.events import EventKind
from loom_nb.journal.run_state import RunState
from tests.agent import golden_agent_flows
from tests.agent.support import make_runtime
from tests.kernel import golden_flows

GATE = "#turn:1:tool:0:approval"


async def test_the_edited_approval_still_journals_the_golden_run_identically() -> None:
    fresh = golden_flows.to_lines(await golden_agent_flows.record_edited())
    assert fresh == golden_agent_flows.GOLDEN_EDITED.read_text(encoding="utf-8").splitlines()


async def test_the_edited_golden_journal_replays_and_keeps_both_arguments() -> None:
    journal = golden_agent_flows.load(golden_agent_flows.GOLDEN_EDITED)
    eid = golden_agent_flows.EDITED_EXECUTION_ID
    rt = golden_agent_flows.make_runtime(journal)
    report = await rt.replay(eid)
    assert report.reproduced, report.message
    state = RunState.fold(journal.read(eid))
    gate = state.gates[GATE]
    assert gate.payload["arguments"] == {"path": "/tmp/x/old.log"}  # what the model asked for
    assert gate.resolution["arguments"] == golden_agent_flows.EDITED_ARGUMENTS  # what the person approved
    assert state.steps["#turn:1:tool:0"].input == golden_agent_flows.EDITED_ARGUMENTS  # what ran
    note = EDITED_NOTE.format(arguments=canonical_json(golden_agent_flows.EDITED_ARGUMENTS))
    told = [
        part["msg"]["text"]
        for e in journal.read(eid)
        if e.kind == EventKind.STEP_STARTED and isinstance(e.data.get("input"), dict)
        for part in e.data["input"].get("add") or ()
        if "msg" in part and part["msg"].get("role") == "tool"
    ]
    assert told == [note + "deleted /tmp/x/notes.md"]


def test_an_approval_without_edits_is_journaled_as_before() -> None:
    assert ApprovalDecision(approved=True).model_dump(mode="json") == {"approved": True, "reason": None}


async def test_gate_approve_with_arguments_runs_them_and_tells_the_model() -> None:
    rt = make_runtime()
    agent = golden_agent_flows.make_agent()
    run = agent.start("Tidy /tmp/x", runtime=rt, execution_id="edit-1")
    await run.wait(until="paused")
    (gate,) = run.gates
    with pytest.raises(ToolArgumentsError, match="delete_file"):
        gate.approve(arguments={"path": 7})  # the tool's schema refuses it: nothing recorded
    assert not any(e.kind == EventKind.GATE_RESOLVED for e in rt.journal.read("edit-1"))
    gate.approve("a safer file", arguments={"path": "/tmp/x/notes.md"})
    result = await run
    assert result.output == "Done: old.log is gone."
    events = rt.journal.read("edit-1")
    resolved = next(e for e in events if e.kind == EventKind.GATE_RESOLVED)
    assert resolved.data["payload"]["digest"] == digest_value({"path": "/tmp/x/notes.md"})
    state = RunState.fold(events)
    assert state.steps["#turn:1:tool:0"].output == "deleted /tmp/x/notes.md"


async def test_an_approval_bound_to_other_arguments_is_stale_and_records_nothing() -> None:
    rt = make_runtime()
    run = golden_agent_flows.make_agent().start("Tidy /tmp/x", runtime=rt, execution_id="stale-1")
    await run.wait(until="paused")
    stale = ApprovalDecision(approved=True, digest=digest_value({"path": "/tmp/x/other.log"}))
    with pytest.raises(StaleApprovalError, match=r"gate '#turn:1:tool:0:approval' of execution 'stale-1'"):
        await rt.resume("stale-1", GATE, stale)
    assert issubclass(StaleApprovalError, ResumeValidationError)
    assert not any(e.kind == EventKind.GATE_RESOLVED for e in rt.journal.read("stale-1"))
    bound = ApprovalDecision(approved=True, digest=digest_value({"path": "/tmp/x/old.log"}))
    run.gates[0].resolve(bound)
    assert (await run).output == "Done: old.log is gone."
    assert RunState.fold(rt.journal.read("stale-1")).steps["#turn:1:tool:0"].output == "deleted /tmp/x/old.log"
    assert loom.ApprovalDecision is ApprovalDecision
