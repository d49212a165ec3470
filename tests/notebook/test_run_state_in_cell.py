"""What a cell sees of a run's state: one live ``Run`` per execution (start, attach, ``%loom pending``
and the cards share it), an existing id refused or its input ignored out loud, cancel (``run.cancel``,
the Stop button), ``Run.wait(until=..., timeout=...)`` and an interrupted wait."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.messages import ModelRequest
from loom_nb.notebook.run_view import RecoveryView, RunView
from loom_nb.notebook.runs import attach, run_for
from tests.notebook.support import TidyAgent, make_runtime

TASK = "Remove the stale files in /tmp/x"
GATE = "#turn:1:tool:0:approval"


async def test_start_attach_and_pending_hand_out_one_run() -> None:
    rt = make_runtime()
    t = TidyAgent()
    run = t.agent.start(TASK, runtime=rt, execution_id="mail-1")
    await run.wait(until="paused")
    assert Run.of(rt, "mail-1") is run
    assert t.agent.attach("mail-1", runtime=rt) is run
    assert run_for(rt, "mail-1") is run and attach(rt, "mail-1") is run  # %loom pending / show / resume
    again = t.agent.start(TASK, runtime=rt, execution_id="mail-1")  # the cell run once more
    assert again is run
    redefined = TidyAgent()  # the agent's cell run again: a new Agent of the same flow
    assert redefined.agent.start(TASK, runtime=rt, execution_id="mail-1") is run
    assert run.agent is redefined.agent and run.status == "suspended"


async def test_a_second_view_and_the_first_follow_one_state_after_a_restart(tmp_path: Path) -> None:
    """The issue's scenario: after a restart, %loom pending, then the start cell again, then Approve
    on the pending card: both views and the handle say completed, and awaiting it returns."""
    path = tmp_path / "loom.duckdb"
    with loom.Runtime.open(path) as rt:
        first = TidyAgent(name="mail")
        await first.agent.start(TASK, runtime=rt, execution_id="mail-1").wait(until="paused")
    with loom.Runtime.open(path) as rt2:  # the restarted kernel
        t = TidyAgent(name="mail")
        t.agent.register(rt2)
        pending_view = RunView(run_for(rt2, "mail-1"))  # %loom pending
        m = t.agent.start(TASK, runtime=rt2, execution_id="mail-1")  # re-running the start cell
        m_view = RunView(m)
        assert m is pending_view.run
        pending_view.cards[GATE].approve.click()  # type: ignore[attr-defined]
        result = await asyncio.wait_for(m, 5)
        assert result.output == "Done. I removed the stale file."
        assert m.status == "completed" and m.gates == []
        assert "completed" in m_view.status.value and "completed" in pending_view.status.value
        assert t.deleted == ["/tmp/x/stale.log"]


async def test_the_same_flow_with_another_input_warns_and_the_recorded_input_wins() -> None:
    rt = make_runtime()
    t = TidyAgent()
    run = t.agent.start(TASK, runtime=rt, execution_id="t-1")
    await run.wait(until="paused")
    with pytest.warns(loom.InputIgnoredWarning, match=r"execution 't-1' already exists with the input"):
        again = t.agent.start("something else", runtime=rt, execution_id="t-1")
    assert again is run and rt.history("t-1").input == TASK


async def test_another_agent_on_an_existing_id_raises_in_the_cell() -> None:
    rt = make_runtime()
    run = TidyAgent(name="mail").agent.start(TASK, runtime=rt, execution_id="x-1")
    await run.wait(until="paused")
    with pytest.raises(loom.UsageError, match=r"'x-1' already exists and runs flow 'agent:mail', not 'agent:other'"):
        TidyAgent(name="other").agent.start(TASK, runtime=rt, execution_id="x-1")
    assert run.status == "suspended" and len(run.gates) == 1


def hanging_agent(started: asyncio.Event, *, idempotent: bool = False) -> loom.Agent:
    @loom.tool(idempotent=idempotent)
    async def send_mail(to: str) -> str:
        """Send a mail (it never answers here)."""
        started.set()
        await asyncio.Event().wait()
        return "sent"

    def respond(request: ModelRequest) -> loom.ModelResponse:
        return loom.ModelResponse.tool_calls([("send_mail", {"to": "ann"})], text="Sending.")

    return loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="mailer")


async def test_run_cancel_stops_a_running_run_and_its_cut_tool_goes_in_doubt() -> None:
    rt = make_runtime()
    started = asyncio.Event()
    run = hanging_agent(started).start("mail ann", runtime=rt)
    view = RunView(run)
    await asyncio.wait_for(started.wait(), 5)
    assert run.status == "running"
    await run.cancel("changed my mind")
    await asyncio.wait_for(run.wait(), 5)
    assert run.status == "cancelled"
    with pytest.raises(loom.RunCancelledError, match="was cancelled \\(changed my mind\\)"):
        await run
    steps = loom.frames(rt).steps()
    row = steps[steps.step_id == "#turn:0:tool:0"].iloc[0]
    assert row.status == "in_doubt"
    assert loom.frames(rt).executions().status.tolist() == ["cancelled"]
    assert "cancelled" in view.status.value and view.error.value == ""  # stopped: not an error
    assert view.stopped.value.startswith("<b>Stopped</b> (changed my mind): the run is cancelled for good")
    assert view.stop.layout.display == "none"
    assert "cancelled" in repr(view).splitlines()[0]


async def test_the_stop_button_cancels_a_suspended_run() -> None:
    rt = make_runtime()
    t = TidyAgent()
    run = t.agent.start(TASK, runtime=rt)
    view = RunView(run)
    await run.wait(until="paused")
    card = view.cards[GATE]
    view.stop.click()  # asks first: nothing is cancelled yet
    assert view.stop.disabled and view.confirm_stop.asking and view.confirm_stop.layout.display == ""
    assert "Stop this run for good?" in view.confirm_stop.question.value
    view.confirm_stop.no.click()  # Keep running
    assert not view.confirm_stop.asking and view.confirm_stop.layout.display == "none" and not view.stop.disabled
    await asyncio.sleep(0.05)
    assert run.status == "suspended"
    view.stop.click()
    view.confirm_stop.yes.click()  # Stop now
    assert view.stop.disabled and view.stop.description == "Stopping…"
    await asyncio.wait_for(run.wait(), 5)
    assert "Stopped" in view.stopped.value and view.error.value == ""
    assert run.status == "cancelled" and run.gates == []
    events = rt.journal.read(run.id)
    assert events[-1].kind == "execution_cancelled" and events[-1].data == {"reason": "stopped from the live view"}
    assert card.approve.disabled and card.text() == f"gate {GATE}: closed: the run cancelled"
    assert view.tool_rows["#turn:1:tool:0"].status == "cancelled"
    done = t.agent.start("again", runtime=rt)
    await done.wait(until="paused")
    done.gates[0].approve()
    await done
    with pytest.raises(loom.UsageError, match=f"run {done.id} already completed; there is nothing to cancel"):
        done.cancel()


async def test_stop_after_this_turn_lets_the_approved_turn_finish_then_stops() -> None:
    rt = make_runtime()
    t = TidyAgent()
    run = t.agent.start(TASK, runtime=rt)
    view = RunView(run)
    await run.wait(until="paused")  # turn 1 waits for approval of delete_file
    view.stop.click()
    bar = view.confirm_stop
    assert bar.also.layout.display == "" and bar.also.description == "Stop after this turn"
    bar.also.click()
    assert not bar.asking and view.stop.disabled and view.stop.description == "Stops after this turn"
    assert run.stopping and run.status == "suspended"  # nothing cut: the card still waits
    view.cards[GATE].approve.click()  # the turn finishes: its call runs ...
    await asyncio.wait_for(run.wait(), 5)
    assert t.deleted == ["/tmp/x/stale.log"]
    assert run.status == "cancelled" and not run.stopping  # ... and the run stops at the next turn's boundary
    kinds = [e.kind for e in rt.journal.read(run.id)]
    assert "step_in_doubt" not in kinds and kinds[-1] == "execution_cancelled"
    assert "<b>Stopped</b> (stopped from the live view after its turn)" in view.stopped.value


async def test_wait_until_a_status_with_a_timeout() -> None:
    rt = make_runtime()
    run = TidyAgent().agent.start(TASK, runtime=rt)
    assert (await run.wait(until="suspended", timeout=5)) is run
    with pytest.raises(TimeoutError, match=f"run {run.id} is still suspended after 0.01 s"):
        await run.wait(timeout=0.01)
    with pytest.raises(loom.UsageError, match="use 'settled', 'paused' or a status"):
        await run.wait(until="done")


async def test_an_interrupted_wait_says_the_run_goes_on_in_one_line() -> None:
    rt = make_runtime()
    started = asyncio.Event()
    run = hanging_agent(started, idempotent=True).start("mail ann", runtime=rt)
    await asyncio.wait_for(started.wait(), 5)

    async def cell() -> Any:
        return await run  # what Kernel > Interrupt cancels

    task = asyncio.ensure_future(cell())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(loom.WaitInterrupted) as caught:
        await task
    message = str(caught.value)
    assert message == (
        f"stopped waiting for run {run.id}; the run goes on (running). "
        f"To stop it: run.cancel() or %loom cancel {run.id}"
    )
    assert caught.value._render_traceback_() == [f"WaitInterrupted: {message}"]
    assert run.status == "running"  # the wait stopped, not the run
    await run.cancel()
    assert run.status == "cancelled"


async def test_recover_shows_progress_while_it_runs() -> None:
    rt = make_runtime()
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    @loom.tool(idempotent=True)
    async def fetch(url: str) -> str:
        """Fetch a page (slow)."""
        calls.append(url)
        started.set()
        await release.wait()
        return "page"

    def respond(request: ModelRequest) -> loom.ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            return loom.ModelResponse.tool_calls([("fetch", {"url": "a"})], text="Fetching.")
        return loom.ModelResponse.text("Got it.")

    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[fetch], name="fetcher")
    agent.start("fetch a", runtime=rt, execution_id="r-1")
    await asyncio.wait_for(started.wait(), 5)
    # A kernel restart kills the run's task: no cancel is recorded, the execution stays running.
    crashed = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in crashed:
        t.cancel()
    await asyncio.gather(*crashed, return_exceptions=True)
    assert rt.journal.get_execution("r-1").status == "running"  # type: ignore[union-attr]
    started.clear()

    view = RecoveryView(rt, ["r-1"])
    assert view.text() == "loom_nb: recovering 1 execution(s)… 0/1 done"
    recovering = asyncio.ensure_future(rt.recover())
    await asyncio.wait_for(started.wait(), 5)
    assert view.text().splitlines() == [
        "loom_nb: recovering 1 execution(s)… 0/1 done",
        "  r-1: at step #turn:0:tool:0 (tools.fetch)",
    ]
    release.set()
    view.done(await recovering)
    assert view.ended == {"r-1": "completed"} and view.progress.value == 1
    assert view.text().startswith("loom run r-1 (agent:fetcher): completed")
    assert calls == ["a", "a"]
