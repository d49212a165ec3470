"""``Agent.map``: ids from inputs, bounded concurrency (resumes included), failures kept per item,
re-running skips what the journal holds, gates answered all at once, the results frame."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.batch import Limiter, TextProgress
from loom_nb.analysis import BATCH_COLUMNS, batch_frame
from loom_nb.journal import InMemoryJournal, step_ids
from loom_nb.messages import ModelRequest, ModelResponse
from tests.agent.support import make_runtime


class Meter:
    """An async scripted model body that counts how many calls are in flight at once."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.now = 0
        self.peak = 0
        self.calls: list[str] = []

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        user = next(m.text for m in request.messages if m.role == "user")
        self.calls.append(user)
        if user.startswith("fail"):
            raise ValueError(f"cannot answer {user}")
        if user.startswith("ask") and not any(m.role == "tool" for m in request.messages):
            return ModelResponse.tool_calls([("act", {"what": user})])
        tool = next((m.text for m in request.messages if m.role == "tool"), None)
        return ModelResponse.text(f"answer to {user}" + (f" ({tool})" if tool else ""))


@loom.tool(needs_approval=True)
def act(what: str) -> str:
    """Do something that needs approval.

    Args:
        what: What to do.
    """
    return f"did {what}"


def make_agent(meter: Meter, name: str = "mapper") -> loom.Agent:
    return loom.Agent(model=loom.ScriptedModel(meter), tools=[act], name=name, model_retry=None)


# -- ids --------------------------------------------------------------------------------------------
def test_ids_are_derived_from_inputs_and_duplicates_are_numbered() -> None:
    a = step_ids.batch_execution_id("x", "hello")
    assert a.startswith("map:x:") and len(a) == len("map:x:") + 16
    assert a == step_ids.batch_execution_id("x", "hello")  # stable
    assert a != step_ids.batch_execution_id("y", "hello") != step_ids.batch_execution_id("x", "hello!")
    assert step_ids.batch_execution_id("x", "hello", 2) == a + ":2"
    rt, meter = make_runtime(), Meter(0)
    batch = make_agent(meter).map(["q1", "q2", "q1"], runtime=rt, progress=False)
    assert [i.execution_id for i in batch.items] == [
        step_ids.batch_execution_id("mapper", "q1"),
        step_ids.batch_execution_id("mapper", "q2"),
        step_ids.batch_execution_id("mapper", "q1", 2),
    ]
    assert batch.done == 3


def test_given_ids_are_checked() -> None:
    rt, agent = make_runtime(), make_agent(Meter(0))
    with pytest.raises(loom.UsageError, match="one id per input"):
        agent.map(["a", "b"], ids=["only-one"], runtime=rt)
    with pytest.raises(loom.UsageError, match="distinct"):
        agent.map(["a", "b"], ids=["same", "same"], runtime=rt)
    with pytest.raises(loom.UsageError, match="concurrency"):
        agent.map(["a"], concurrency=0, runtime=rt)
    batch = agent.map(["a", "b"], ids=["run-a", "run-b"], runtime=rt, progress=False)
    assert [i.execution_id for i in batch.items] == ["run-a", "run-b"] and batch.done == 2
    other = make_agent(Meter(0), name="other")
    with pytest.raises(loom.UsageError, match="runs flow 'agent:mapper'"):
        other.map(["a"], ids=["run-a"], runtime=rt)


# -- concurrency, failures, resumability ------------------------------------------------------------
def test_at_most_concurrency_runs_move_and_a_failure_stops_no_other() -> None:
    rt, meter = make_runtime(), Meter()
    inputs = [f"q{i}" for i in range(12)] + ["fail-1", "fail-2"]
    batch = make_agent(meter).map(inputs, concurrency=4, runtime=rt, progress=False)
    assert meter.peak == 4 and batch.limiter.peak == 4
    assert batch.counts == {"queued": 0, "running": 0, "suspended": 0, "completed": 12, "failed": 2}
    failed = [i for i in batch.items if i.status == "failed"]
    assert [i.input for i in failed] == ["fail-1", "fail-2"]
    assert "cannot answer fail-1" in str(failed[0].run.exception())
    assert batch.results[0] is not None and batch.results[0].output == "answer to q0"


def test_concurrency_one_runs_one_at_a_time() -> None:
    rt, meter = make_runtime(), Meter()
    make_agent(meter).map([f"q{i}" for i in range(5)], concurrency=1, runtime=rt, progress=False)
    assert meter.peak == 1 and meter.calls == [f"q{i}" for i in range(5)]


def test_running_the_same_map_again_skips_finished_items() -> None:
    rt, meter = make_runtime(), Meter(0)
    agent = make_agent(meter)
    first = agent.map(["q1", "fail-x", "q2"], runtime=rt, progress=False)
    assert (first.done, first.failed) == (2, 1)
    calls = list(meter.calls)
    again = agent.map(["q1", "fail-x", "q2", "q3"], runtime=rt, progress=False)
    assert meter.calls == [*calls, "q3"]  # only the new input made a model call
    assert [i.resumed for i in again.items] == [True, True, True, False]
    assert [i.status for i in again.items] == ["completed", "failed", "completed", "completed"]


async def test_an_item_left_running_is_recovered_not_restarted() -> None:
    """A crash leaves an execution ``running`` (here: its first model call done, then the process
    'died'); the batch drives just that one on through ``recover(execution_ids=...)``."""
    rt = make_runtime()
    meter = Meter(0)
    agent = make_agent(meter)
    eid = step_ids.batch_execution_id(agent.name, "ask-1")
    other = step_ids.batch_execution_id(agent.name, "q-left")
    agent.register(rt)
    # Craft "left running" by recording the events of a run cut after its model step.
    await rt.start(agent.flow_name, "ask-1", execution_id=eid)  # suspends at the gate
    await rt.start(agent.flow_name, "q-left", execution_id=other)
    events = rt.journal.read(eid)
    cut = [e for e in events if e.kind in ("execution_started", "step_started", "step_completed")]
    fresh = InMemoryJournal()
    fresh.append(cut)
    rt2 = make_runtime(fresh)
    meter.calls.clear()
    batch = agent.map(["ask-1"], runtime=rt2, view=False)
    await batch
    assert batch.items[0].resumed and batch.items[0].status == "suspended"
    assert meter.calls == []  # the recorded model call was served, not made again
    assert [g.gate_id for g in batch.gates] == [step_ids.approval_gate_id(0, 0)]


async def test_recover_drives_only_the_executions_named() -> None:
    rt = make_runtime()
    meter = Meter(0)
    agent = make_agent(meter)
    agent.register(rt)
    ids = ["left-1", "left-2"]
    for eid in ids:
        await rt.start(agent.flow_name, f"q {eid}", execution_id=eid)
    fresh = InMemoryJournal()
    for eid in ids:
        fresh.append([e for e in rt.journal.read(eid) if e.kind == "execution_started"])
    rt2 = make_runtime(fresh)
    agent.register(rt2)
    results = await rt2.recover(execution_ids=["left-2", "nope", "left-2"])
    assert [r.execution_id for r in results] == ["left-2"]
    assert rt2.result("left-1").status == "running" and rt2.result("left-2").status == "completed"


# -- gates ------------------------------------------------------------------------------------------
async def test_every_gate_of_the_batch_answered_at_once_and_resumes_wait_for_a_slot() -> None:
    rt, meter = make_runtime(), Meter()
    batch = make_agent(meter).map([f"ask-{i}" for i in range(6)] + ["q"], concurrency=2, runtime=rt, view=False)
    await batch
    assert (batch.waiting, batch.done) == (6, 1)
    assert len(batch.gates) == 6
    meter.peak = 0
    answered = batch.approve_all("fine")
    assert len(answered) == 6
    await batch.wait(until="settled")
    assert batch.done == 7 and meter.peak == 2 and batch.limiter.peak == 2
    assert batch.results[0] is not None and batch.results[0].output == "answer to ask-0 (did ask-0)"


async def test_refuse_all_and_a_gate_answered_alone() -> None:
    rt = make_runtime()
    batch = make_agent(Meter(0)).map(["ask-a", "ask-b", "ask-c"], runtime=rt, view=False)
    await batch
    first = batch.items[0].gates[0]
    await first.approve()
    assert batch.items[0].status == "completed" and batch.waiting == 2
    assert len(batch.refuse_all("no")) == 2
    await batch
    outputs = [r.output for r in batch.results if r is not None]
    assert outputs[0] == "answer to ask-a (did ask-a)"
    assert all("refused" in o for o in outputs[1:])


def test_approve_all_in_a_script_returns_when_the_runs_settle() -> None:
    rt = make_runtime()
    batch = make_agent(Meter(0)).map(["ask-a", "ask-b"], runtime=rt, progress=False)
    assert batch.waiting == 2
    assert len(batch.approve_all()) == 2
    assert batch.done == 2


# -- listeners, frame, progress ---------------------------------------------------------------------
async def test_on_change_listeners_unsubscribe() -> None:
    rt = make_runtime()
    seen: list[str] = []
    batch = make_agent(Meter(0)).map(["q1", "q2"], runtime=rt, view=False)
    stop = batch.on_change(lambda b, item: seen.append(item.status))
    run_seen: list[str] = []
    stop_run = batch.items[0].run.on_change(lambda run: run_seen.append(run.status))
    stop_run()
    stop_run()  # twice is harmless
    await batch
    assert "completed" in seen and run_seen == []
    stop()
    n = len(seen)
    batch.items[0].run.refresh()
    assert len(seen) == n


def test_the_frame_has_one_row_per_input() -> None:
    rt = make_runtime()
    batch = make_agent(Meter(0)).map(["q1", "fail-1", "ask-1"], runtime=rt, progress=False)
    df = batch.frame()
    assert list(df.columns) == list(BATCH_COLUMNS)
    assert list(df["input"]) == ["q1", "fail-1", "ask-1"]
    assert list(df["status"]) == ["completed", "failed", "suspended"]
    assert df.loc[0, "output"] == "answer to q1" and df.loc[0, "turns"] == 1 and df.loc[0, "tokens"] > 0
    assert df.loc[1, "error"].startswith("ValueError") and df.loc[1, "output"] is None
    assert (df["duration_seconds"] > 0).all()
    assert list(df["execution_id"]) == [i.execution_id for i in batch.items]
    assert batch_frame(batch).equals(df)


def test_a_script_prints_a_progress_line_then_the_frame(capsys: pytest.CaptureFixture[str]) -> None:
    rt = make_runtime()
    make_agent(Meter(0)).map(["q1", "fail-1"], runtime=rt)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "batch agent:mapper: 1/2 done, 1 failed, 0 waiting at a gate"
    assert out[1].split() == [
        "input",
        "output",
        "status",
        "error",
        "turns",
        "tokens",
        "duration_seconds",
        "execution_id",
    ]
    assert "answer to q1" in out[2]


def test_text_progress_rewrites_one_line_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    rt = make_runtime()
    batch = make_agent(Meter(0)).map(["ask-1"], runtime=rt, progress=False)
    stream = Tty()
    progress = TextProgress(batch, stream=stream, interval=0)
    batch.approve_all()
    progress.finish()
    text = stream.getvalue()
    assert text.startswith("\r") and text.endswith("\rbatch agent:mapper: 1/1 done, 0 failed, 0 waiting at a gate\n")


async def test_a_limiter_cancelled_while_waiting_leaves_no_unawaited_coroutine() -> None:
    limiter = Limiter(1)
    gate = asyncio.Event()

    async def hold() -> Any:
        await gate.wait()

    first = asyncio.ensure_future(limiter(hold))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(limiter(hold))
    await asyncio.sleep(0)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    never_started = asyncio.ensure_future(limiter(hold))
    never_started.cancel()  # before its first step: nothing was made, so nothing is left unawaited
    with pytest.raises(asyncio.CancelledError):
        await never_started
    gate.set()
    await first
    assert limiter.peak == 1 and limiter.active == 0


def test_a_script_answers_and_waits_again_on_later_loops() -> None:
    """Each ``approve_all`` in a script runs on an ``asyncio.run`` loop of its own."""
    rt = make_runtime()

    def respond(request: ModelRequest) -> ModelResponse:
        user = next(m.text for m in request.messages if m.role == "user")
        tools = [m for m in request.messages if m.role == "tool"]
        if len(tools) < 2:
            return ModelResponse.tool_calls([("act", {"what": f"{user} {len(tools)}"})])
        return ModelResponse.text("two done")

    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[act], name="twice", model_retry=None)
    batch = agent.map(["a", "b"], runtime=rt, progress=False)
    assert batch.waiting == 2
    batch.approve_all()
    assert batch.waiting == 2  # each run asked for a second call
    batch.approve_all()
    assert batch.done == 2 and [r.output for r in batch.results if r] == ["two done", "two done"]


async def test_the_same_map_run_again_while_the_first_moves_shares_its_runs() -> None:
    rt, meter = make_runtime(), Meter()
    agent = make_agent(meter)
    first = agent.map([f"q{i}" for i in range(6)], concurrency=2, runtime=rt, view=False)
    second = agent.map([f"q{i}" for i in range(6)], concurrency=2, runtime=rt, view=False)
    assert [i.run for i in second.items] == [i.run for i in first.items]
    await first
    await second
    assert first.done == second.done == 6 and sorted(meter.calls) == [f"q{i}" for i in range(6)]


def test_a_batch_id_names_its_agent() -> None:
    eid = step_ids.batch_execution_id("my:agent", {"ticket": 1})
    assert step_ids.batch_agent_name(eid) == "my:agent"
    assert step_ids.batch_agent_name(step_ids.batch_execution_id("a", "x", 3)) == "a"
    assert step_ids.batch_agent_name("map:a:notahexdigest000") is None
    assert step_ids.batch_agent_name("run-1") is None
