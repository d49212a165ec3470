"""The pure fold (``RunState``) and the analysis SQL ``steps`` view agree on every step and gate.

Journals: the golden kernel and agent journals, and real agent runs (``ScriptedModel``, fake clock) covering an
approval approved and one refused, a retried tool, a failed tool, an in-doubt step resolved, a
compaction and a routed elevation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
import pytest

import loom_nb as loom
from loom_nb.agent.tool_calls import tool_calls
from loom_nb.journal import DuckDBJournal, InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.journal.run_state import RunState
from loom_nb.journal.step_ids import tool_step_id
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest
from loom_nb.testing import FakeClock, SequentialIds
from tests.agent import golden_agent_flows
from tests.analysis.support import EDITED, JOURNALS, edited_run, make_runtime, messy_run, retried_run, tidy_run
from tests.kernel import golden_flows

COMPARED = ("kind", "effect", "turn", "tool_index", "status", "attempts", "in_doubt")
NOT_STEPS = ("gate", "decision", "value")


def _plain(value: Any) -> Any:
    """A frame cell as a plain Python value (None for a missing one)."""
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    return value.item() if hasattr(value, "item") else value


def sql_steps(rt: loom.Runtime, execution_id: str) -> dict[str, tuple[Any, ...]]:
    """Each step's compared columns, as the SQL ``steps`` view gives them."""
    frame = loom.frames(rt).steps(execution_id)
    frame = frame[~frame["kind"].isin(NOT_STEPS)]
    return {row["step_id"]: tuple(_plain(row[c]) for c in COMPARED) for _, row in frame.iterrows()}


def fold_steps(rt: loom.Runtime, execution_id: str) -> dict[str, tuple[Any, ...]]:
    """Each step's compared fields, as ``RunState`` folds them."""
    state = RunState.fold(rt.journal.read(execution_id), execution_id)
    return {sid: tuple(getattr(s, c) for c in COMPARED) for sid, s in state.steps.items()}


def assert_fold_matches_sql(rt: loom.Runtime, execution_id: str) -> RunState:
    """The fold and the SQL agree on every step (same ids, same order) and every gate's status."""
    sql, fold = sql_steps(rt, execution_id), fold_steps(rt, execution_id)
    assert list(fold) == list(sql)
    for sid in sql:
        assert fold[sid] == sql[sid], f"{execution_id} {sid}: fold {fold[sid]} != sql {sql[sid]} ({COMPARED})"
    state = RunState.fold(rt.journal.read(execution_id), execution_id)
    gates = loom.frames(rt).gates(execution_id)
    sql_gates = {
        r["gate_id"]: (r["kind"], r["status"], _plain(r["turn"]), _plain(r["tool_index"])) for _, r in gates.iterrows()
    }
    fold_gates = {
        g.gate_id: (g.kind, "resolved" if g.resolved else "open", g.turn, g.tool_index) for g in state.gates.values()
    }
    assert fold_gates == sql_gates
    assert fold_tool_calls(state) == sql_tool_calls(rt, execution_id)
    return state


def fold_tool_calls(state: RunState) -> list[tuple[Any, ...]]:
    """Each tool call as ``agent/tool_calls.py`` reads it from the fold (the arguments that ran)."""
    return [
        (c.step_id, c.name, c.arguments, c.requested if c.edited else None, c.edited, c.invalid)
        for c in tool_calls(state)
    ]


def sql_tool_calls(rt: loom.Runtime, execution_id: str) -> list[tuple[Any, ...]]:
    """The same, as the SQL ``tool_calls`` view gives them (``invalid``: the error of an invalid call)."""
    frame = loom.frames(rt).tool_calls(execution_id)
    return [
        (
            tool_step_id(int(r["turn"]), int(r["tool_index"])),
            r["name"],
            r["arguments"],
            r["requested_arguments"],
            bool(r["edited"]),
            r["error"] if r["status"] == "invalid" else None,
        )
        for _, r in frame.iterrows()
    ]


@pytest.fixture(params=JOURNALS)
def rt(request: pytest.FixtureRequest) -> Iterator[loom.Runtime]:
    runtime = make_runtime(request.param)
    yield runtime
    runtime.close()


@pytest.mark.parametrize("event_format", sorted(golden_flows.GOLDENS), ids=lambda f: f"format{f}")
def test_golden_journal(event_format: int) -> None:
    journal = golden_flows.load(golden_flows.GOLDENS[event_format])
    rt = loom.Runtime(journal, clock=FakeClock(tick=1), ids=SequentialIds())
    state = assert_fold_matches_sql(rt, golden_flows.EXECUTION_ID)
    assert {s.status for s in state.steps.values()} == {"completed", "failed"}


@pytest.mark.parametrize("event_format", sorted(golden_agent_flows.GOLDENS), ids=lambda f: f"format{f}")
def test_golden_agent_journal(event_format: int) -> None:
    rt = loom.Runtime(golden_agent_flows.load(event_format), clock=FakeClock(tick=1), ids=SequentialIds())
    state = assert_fold_matches_sql(rt, golden_agent_flows.EXECUTION_ID)
    assert [s.kind for s in state.steps.values()] == ["model", "tool", "model", "tool", "compact", "model"]


async def test_approved_and_refused_tools(rt: loom.Runtime) -> None:
    state = assert_fold_matches_sql(rt, await tidy_run(rt))
    assert [(g.resolution or {}).get("approved") for g in state.gates.values()] == [True, False]


async def test_edited_approval_the_arguments_that_ran(rt: loom.Runtime) -> None:
    state = assert_fold_matches_sql(rt, await edited_run(rt))
    frame = loom.frames(rt).tool_calls(state.execution_id)
    edited = frame[frame["edited"]]
    assert edited["arguments"].tolist() == [EDITED]
    assert edited["requested_arguments"].tolist() == [{"path": "/tmp/x/stale.log"}]
    assert edited["answered_at"].notna().all()


async def test_failed_and_unknown_tools(rt: loom.Runtime) -> None:
    state = assert_fold_matches_sql(rt, await messy_run(rt))
    assert "failed" in {s.status for s in state.steps.values()}


async def test_retried_tool(rt: loom.Runtime) -> None:
    state = assert_fold_matches_sql(rt, await retried_run(rt))
    assert state.steps["#turn:0:tool:0"].attempts == 3


@pytest.mark.parametrize("store", JOURNALS)
@pytest.mark.slow
async def test_in_doubt_step_resolved(store: str) -> None:
    # The golden agent run cut right after the gated delete's step_started: a crash in flight.
    events = golden_agent_flows.load().read(golden_agent_flows.EXECUTION_ID)
    cut = next(e.seq for e in events if e.step_id == "#turn:1:tool:0" and e.kind == EventKind.STEP_STARTED)
    journal: JournalStore = InMemoryJournal() if store == "memory" else DuckDBJournal(":memory:")
    journal.append([e for e in events if e.seq <= cut])
    with golden_agent_flows.make_runtime(journal) as rt:
        eid = golden_agent_flows.EXECUTION_ID
        assert assert_fold_matches_sql(rt, eid).steps["#turn:1:tool:0"].status == "running"
        (result,) = await rt.recover()
        assert result.gates[0].kind == "InDoubt"
        assert assert_fold_matches_sql(rt, eid).steps["#turn:1:tool:0"].status == "in_doubt"
        await rt.resume(eid, result.gates[0].gate_id, loom.InDoubtResolution(action="happened", output="by hand"))
        step = assert_fold_matches_sql(rt, eid).steps["#turn:1:tool:0"]
        assert step.status == "completed" and step.in_doubt


async def test_approval_and_compaction_live(rt: loom.Runtime) -> None:
    run = golden_agent_flows.make_agent().start("Tidy /tmp/x", runtime=rt)
    await run.wait(until="paused")
    run.gates[0].approve()
    await run
    state = assert_fold_matches_sql(rt, run.id)
    assert "compact" in {s.kind for s in state.steps.values()}


async def test_routed_elevation(rt: loom.Runtime) -> None:
    def respond(request: ModelRequest) -> loom.ModelResponse:
        return loom.ModelResponse.text("unsure")  # every answer asks for the next stronger model

    def policy(models: Sequence[str], request: ModelRequest, turn: int) -> str:
        return models[0]

    model = loom.ScriptedModel(respond)
    agent = loom.Agent(
        name="elevating",
        routes=loom.Routes(
            models=["model.small", "model.large"], policy=policy, elevate=lambda r, t: r.message.text == "unsure"
        ),
        models={"model.small": model, "model.large": model},
    )
    run = agent.start("go", runtime=rt)
    await run
    state = assert_fold_matches_sql(rt, run.id)
    assert [s.step_id for s in state.steps.values() if s.kind == "model"] == ["#turn:0", "#turn:0:elevated:1"]
