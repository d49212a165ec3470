"""The engine is the one place a gate's answer is checked: a wrong answer raises where it is given
and changes nothing, a queued answer refused in its turn leaves the run suspended, and any other
error of a run's task is that run's failure (never taken for a refused answer)."""

from __future__ import annotations

import pytest

import loom_nb as loom
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.testing import FakeClock, SequentialIds


def runtime() -> loom.Runtime:
    return loom.Runtime(InMemoryJournal(), clock=FakeClock(), ids=SequentialIds())


def agent(name: str) -> loom.Agent:
    """An agent whose first turn asks to drop two files (two approval gates), then says done."""

    @loom.tool(needs_approval=True)
    def drop(path: str) -> str:
        """Drop a file."""
        return f"dropped {path}"

    both = loom.ModelResponse.tool_calls([("drop", {"path": "a"}), ("drop", {"path": "b"})])
    return loom.Agent(model=loom.ScriptedModel([both, loom.ModelResponse.text("done")]), tools=[drop], name=name)


def resolved(rt: loom.Runtime, execution_id: str) -> list[str | None]:
    return [e.step_id for e in rt.journal.read(execution_id) if e.kind == EventKind.GATE_RESOLVED]


async def test_a_queued_answer_refused_in_its_turn_leaves_the_run_suspended() -> None:
    rt = runtime()
    run = agent("queued").start("tidy", runtime=rt, execution_id="q-1")
    await run.wait(until="paused")
    first, second = run.gates
    first.approve()
    queued = second.resolve({"approved": "perhaps"})  # the run is moving: queued, checked in its turn
    with pytest.raises(loom.ResumeValidationError, match=r"gate '#turn:0:tool:1:approval' of execution 'q-1'"):
        await queued
    assert run.status == "suspended" and run.exception() is None
    assert isinstance(run.last_error, loom.ResumeValidationError)
    assert [g.gate_id for g in run.gates] == ["#turn:0:tool:1:approval"]
    assert resolved(rt, "q-1") == ["#turn:0:tool:0:approval"]


async def test_another_agents_execution_id_raises_at_once_in_the_cell() -> None:
    rt = runtime()
    first = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text("hi")]), name="first")
    await first.start("x", runtime=rt, execution_id="shared")
    with pytest.raises(loom.UsageError, match=r"already exists and runs flow 'agent:first', not 'agent:second'"):
        agent("second").start("tidy", runtime=rt, execution_id="shared")
    run = loom.Run.of(rt, "shared")
    assert run.status == "completed" and run.result is not None and run.result.output == "hi"
    assert len(rt.journal.read("shared")) == len(rt.history("shared").events)


def test_in_a_script_a_wrong_answer_raises_at_the_call_and_records_nothing() -> None:
    rt = runtime()
    run = agent("script").start("tidy", runtime=rt, execution_id="s-1")
    assert run.status == "suspended"
    before = len(rt.journal.read("s-1"))
    with pytest.raises(loom.ResumeValidationError, match="not a valid ApprovalDecision"):
        run.gates[0].resolve({"approved": "maybe"})
    assert len(rt.journal.read("s-1")) == before
    assert run.status == "suspended" and run.exception() is None and len(run.gates) == 2


async def test_answering_records_at_once_and_recover_leaves_the_run_to_proceed() -> None:
    rt = runtime()
    run = agent("reserved").start("tidy", runtime=rt, execution_id="r-1")
    await run.wait(until="paused")
    gates = [g.gate_id for g in run.gates]
    assert rt.answer("r-1", gates[0], {"approved": True}).resumed is False
    last = rt.answer("r-1", gates[1], {"approved": False})
    assert last.resumed and resolved(rt, "r-1") == gates
    assert rt.is_active("r-1") and await rt.recover() == []  # answered: proceed() runs it on
    result = await rt.proceed(last)
    assert result.status == "completed" and not rt.is_active("r-1")
