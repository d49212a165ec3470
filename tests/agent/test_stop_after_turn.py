"""``Run.cancel(when="after_turn")``: the turn under way finishes (its tools, approvals included) and
the run is recorded ``cancelled`` at the next turn boundary with nothing in doubt, where a cancel
``"now"`` cuts a tool in flight and leaves it in doubt (``kernel/stops.py``)."""

from __future__ import annotations

import asyncio

import pytest

import loom_nb as loom
from loom_nb.errors import RunCancelledError, UsageError
from loom_nb.journal import EventKind
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime, turn_of


def two_turns_of_tools(name: str):
    def respond(request: ModelRequest) -> ModelResponse:
        turn = turn_of(request)
        if turn < 2:
            return ModelResponse.tool_calls([(name, {"n": turn})])
        return ModelResponse.text("done")

    return respond


def kinds(rt: loom.Runtime, run_id: str) -> list[str]:
    return [e.kind for e in rt.journal.read(run_id)]


async def _slow_tool_agent(released: asyncio.Event, ran: list[int]) -> tuple[loom.Agent, ScriptedModel]:
    @loom.tool(idempotent=False)
    async def transfer(n: int) -> str:
        """Move money (not idempotent: a cut call is in doubt)."""
        ran.append(n)
        await released.wait()
        return f"moved {n}"

    model = ScriptedModel(two_turns_of_tools("transfer"))
    return loom.Agent(model=model, tools=[transfer], name="payer"), model


async def test_a_stop_after_the_turn_lets_the_tool_in_flight_finish_and_nothing_is_in_doubt() -> None:
    rt = make_runtime()
    released, ran = asyncio.Event(), []
    agent, model = await _slow_tool_agent(released, ran)
    run = agent.start("pay", runtime=rt, view=False)
    while not ran:  # turn 0's tool call is in flight
        await asyncio.sleep(0.001)
    assert run.cancel("enough", when="after_turn") is None
    assert run.stopping
    released.set()
    with pytest.raises(RunCancelledError, match="enough"):
        await run
    assert run.status == "cancelled" and not run.stopping
    assert ran == [0]  # turn 1 never started: its model call was never made
    assert len(model.history) == 1
    events = kinds(rt, run.id)
    assert EventKind.STEP_IN_DOUBT not in events and events[-1] == EventKind.EXECUTION_CANCELLED
    assert events.count(EventKind.STEP_COMPLETED) == 2  # turn 0's model step and its tool call


async def test_a_cancel_now_at_the_same_point_leaves_the_tool_in_doubt() -> None:
    rt = make_runtime()
    released, ran = asyncio.Event(), []
    agent, _ = await _slow_tool_agent(released, ran)
    run = agent.start("pay", runtime=rt, view=False)
    while not ran:
        await asyncio.sleep(0.001)
    await run.cancel("enough")
    assert EventKind.STEP_IN_DOUBT in kinds(rt, run.id)


async def test_a_suspended_run_stops_after_its_approved_turn_ran() -> None:
    rt = make_runtime()
    deleted: list[str] = []

    @loom.tool(needs_approval=True)
    def delete_file(name: str) -> str:
        """Delete a file."""
        deleted.append(name)
        return f"deleted {name}"

    def respond(request: ModelRequest) -> ModelResponse:
        turn = turn_of(request)
        if turn < 2:
            return ModelResponse.tool_calls([("delete_file", {"name": f"f{turn}"})])
        return ModelResponse.text("ok")

    run = loom.Agent(model=ScriptedModel(respond), tools=[delete_file], name="cleaner").start(
        "clean", runtime=rt, view=False
    )
    await run.wait(until="paused")
    assert run.status == "suspended"
    run.cancel(when="after_turn")
    await run.gates[0].approve()
    await run.wait()
    assert run.status == "cancelled"
    assert deleted == ["f0"]  # the approved call ran; the next turn did not start
    assert EventKind.STEP_IN_DOUBT not in kinds(rt, run.id)


async def test_a_run_that_finishes_its_last_turn_completes_and_forgets_the_stop() -> None:
    rt = make_runtime()
    run = loom.Agent(model=ScriptedModel(lambda r: ModelResponse.text("hi")), name="greeter").start(
        "hello", runtime=rt, view=False
    )
    run.cancel(when="after_turn")  # asked before the first boundary: the run never calls the model
    with pytest.raises(RunCancelledError):
        await run
    done = loom.Agent(model=ScriptedModel(lambda r: ModelResponse.text("hi")), name="greeter").start(
        "again", runtime=rt, view=False
    )
    done.cancel(when="after_turn")
    rt.stops.drop(done.id)  # as a completed run does: the stop is forgotten
    assert (await done).output == "hi"
    assert not done.stopping


async def test_an_unknown_when_and_a_finished_run_are_usage_errors() -> None:
    rt = make_runtime()
    run = loom.Agent(model=ScriptedModel(lambda r: ModelResponse.text("hi")), name="greeter2").start(
        "hello", runtime=rt, view=False
    )
    await run
    with pytest.raises(UsageError, match="'now' or 'after_turn'"):
        run.cancel(when="later")
    with pytest.raises(UsageError, match="already completed"):
        run.cancel(when="after_turn")
