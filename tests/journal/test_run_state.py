"""``RunState``: the pure fold of an execution's events."""

from __future__ import annotations

from typing import Any

from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.run_state import GateState, RunState, StepState


def _events(*rows: tuple[str, str | None, dict[str, Any]]) -> list[Event]:
    return [Event("e1", seq, kind, sid, float(seq), data) for seq, (kind, sid, data) in enumerate(rows, start=1)]


EVENTS = _events(
    (EventKind.EXECUTION_STARTED, None, {"flow": "agent:bot", "input": "hi", "principal": {"name": "me"}}),
    (EventKind.STEP_STARTED, "#turn:0", {"effect": "model.bot", "input": {"add": []}, "digest": "d0", "attempt": 1}),
    (EventKind.STEP_COMPLETED, "#turn:0", {"effect": "model.bot", "output": "x", "usage": {"input_tokens": 5}}),
    (EventKind.GATE_OPENED, "#turn:0:tool:0:approval", {"kind": "AgentToolApproval", "payload": {"tool": "rm"}}),
    (EventKind.EXECUTION_SUSPENDED, None, {"gates": ["#turn:0:tool:0:approval"]}),
    (EventKind.GATE_RESOLVED, "#turn:0:tool:0:approval", {"payload": {"approved": True}}),
    (EventKind.EXECUTION_RESUMED, None, {"gate_id": "#turn:0:tool:0:approval"}),
    (EventKind.STEP_STARTED, "#turn:0:tool:0", {"effect": "tools.rm", "input": {"p": 1}, "digest": "d1", "attempt": 1}),
    (EventKind.STEP_FAILED, "#turn:0:tool:0", {"effect": "tools.rm", "will_retry": True}),
    (EventKind.STEP_STARTED, "#turn:0:tool:0", {"effect": "tools.rm", "input": {"p": 1}, "digest": "d1", "attempt": 2}),
    (
        EventKind.STEP_COMPLETED,
        "#turn:0:tool:0",
        {"effect": "tools.rm", "output": "ok", "usage": {"input_tokens": 2, "cost": 0.5}},
    ),
    (EventKind.STEP_STARTED, "#1", {"effect": "catalog.lookup", "digest": "d2", "attempt": 1}),
    (EventKind.STEP_IN_DOUBT, "#1", {"effect": "catalog.lookup", "attempt": 1}),
    (EventKind.VALUE_RECORDED, "#value:1", {"kind": "now", "value": 3.0}),
    (EventKind.EXECUTION_COMPLETED, None, {"output": "done"}),
)


def test_fold_of_a_whole_run() -> None:
    state = RunState.fold(EVENTS, "e1")
    assert (state.flow, state.input, state.status, state.output, state.last_seq) == (
        "agent:bot",
        "hi",
        "completed",
        "done",
        15,
    )
    assert list(state.steps) == ["#turn:0", "#turn:0:tool:0", "#1"]
    model, tool, other = state.steps.values()
    assert (model.kind, model.turn, model.status, model.attempts, model.input) == (
        "model",
        0,
        "completed",
        1,
        {"add": []},
    )
    assert (tool.kind, tool.tool, tool.turn, tool.tool_index) == ("tool", "rm", 0, 0)
    assert (tool.status, tool.attempts, tool.started_at, tool.ended_at, tool.retry_pending) == (
        "completed",
        2,
        8.0,
        11.0,
        False,
    )
    assert (other.kind, other.status, other.in_doubt, other.ended_at, other.updated_at) == (
        "effect",
        "in_doubt",
        True,
        None,
        13.0,
    )
    (gate,) = state.gates.values()
    assert (gate.subject, gate.turn, gate.tool_index, gate.resolved, gate.resolved_at) == (
        "#turn:0:tool:0",
        0,
        0,
        True,
        6.0,
    )
    assert (state.usage.calls, state.usage.input_tokens, state.usage.cost) == (2, 7, 0.5)
    assert state.turns == 1 and state.values == {"#value:1": 3.0}


def test_apply_returns_what_it_touched() -> None:
    state = RunState()
    touched = [state.apply(e) for e in EVENTS]
    assert touched[0] is None and touched[-1] is None
    assert isinstance(touched[1], StepState) and touched[1].step_id == "#turn:0"
    assert isinstance(touched[3], GateState) and touched[5] is touched[3]
    assert touched[8] is touched[7] is state.steps["#turn:0:tool:0"]


def test_a_final_failure_ends_the_step_and_a_retry_does_not() -> None:
    state = RunState.fold(EVENTS[:9])
    assert state.steps["#turn:0:tool:0"].status == "running" and state.steps["#turn:0:tool:0"].retry_pending
    failed = _events(
        (EventKind.STEP_STARTED, "s", {"effect": "e"}), (EventKind.STEP_FAILED, "s", {"error": {"type": "x"}})
    )
    step = RunState.fold(failed).steps["s"]
    assert (step.status, step.error, step.ended_at, step.settled) == ("failed", {"type": "x"}, 2.0, True)
