"""A changed approval rule is detected: a run recorded under one rule and resumed or recovered under
another is served its recorded gate decisions (a call that waited at a gate still needs that
answer), and a rule that now gates a call that already ran is a ``NonDeterminismError`` naming the
step and the fix, never a new gate for a tool that already ran."""

from __future__ import annotations

from typing import Any

import loom_nb as loom
from loom_nb.agent.config import AgentConfig
from loom_nb.errors import NonDeterminismError
from loom_nb.journal import InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelResponse, ToolCall
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import (
    MODEL,
    calls,
    events,
    install,
    lookup_tool,
    make_runtime,
    prefix_journal,
    register_model,
    turn_of,
)

GATE = "#turn:0:tool:0:approval"
TOOL_STEP = "#turn:0:tool:0"


def _always(call: ToolCall, turn: int) -> bool:
    return True


def _process(journal: Any, seen: list[str], *, gated: bool) -> tuple[loom.Runtime, ScriptedModel]:
    """A process on ``journal`` whose agent gates every call (``gated``) or none."""
    rt = make_runtime(journal)
    model = ScriptedModel(
        lambda r: calls(("lookup", {"city": "Paris"})) if turn_of(r) == 0 else ModelResponse.text("done")
    )
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)], needs_approval=_always if gated else None)
    register_model(rt, model, MODEL)
    install(rt, config)
    return rt, model


async def test_a_rule_that_now_gates_a_call_that_already_ran_is_non_determinism() -> None:
    seen: list[str] = []
    first, _ = _process(InMemoryJournal(), seen, gated=False)
    done = await first.start("agent", "weather?", execution_id="e")
    assert done.status == "completed" and seen == ["Paris"]
    ran = next(e.seq for e in events(first, "e", EventKind.STEP_COMPLETED) if e.step_id == TOOL_STEP)
    crashed = prefix_journal(first.journal, "e", ran)  # killed right after the tool's result committed

    later, _ = _process(crashed, seen, gated=True)
    (result,) = await later.recover()
    assert result.status == "running" and result.error is not None
    error = result.exception()
    assert isinstance(error, NonDeterminismError)
    assert "execution 'e'" in str(error) and repr(TOOL_STEP) in str(error)
    assert "restore" in str(error) and "fork" in str(error)
    assert seen == ["Paris"]
    assert not any(e.kind == EventKind.GATE_OPENED for e in crashed.read("e"))  # no gate for what already ran


async def test_a_refusal_recorded_under_a_gating_rule_is_served_when_the_rule_is_gone() -> None:
    seen: list[str] = []
    journal = InMemoryJournal()
    first, _ = _process(journal, seen, gated=True)
    parked = await first.start("agent", "weather?", execution_id="e")
    assert [g.gate_id for g in parked.gates] == [GATE]

    later, model = _process(journal, seen, gated=False)  # the rule was removed before the answer
    done = await later.resume("e", GATE, {"approved": False, "reason": "not today"})
    assert done.status == "completed"
    assert seen == []  # the person's refusal holds: the tool never runs
    told = model.history[-1].messages[-1]
    assert told.role == "tool" and told.is_error and "not today" in told.text
    assert (await later.replay("e")).reproduced


async def test_an_approval_recorded_under_a_gating_rule_is_served_when_the_rule_is_gone() -> None:
    seen: list[str] = []
    journal = InMemoryJournal()
    first, _ = _process(journal, seen, gated=True)
    await first.start("agent", "weather?", execution_id="e")
    later, _ = _process(journal, seen, gated=False)
    done = await later.resume("e", GATE, {"approved": True})
    assert done.status == "completed" and seen == ["Paris"]
    assert (await later.replay("e")).reproduced
