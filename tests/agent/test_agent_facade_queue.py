"""The facade in a running loop: answers queue while the run moves, a refused answer leaves the run
as it was, the resume handle has a stable repr, and ``view=False`` skips the live view."""

from __future__ import annotations

from typing import Any

import loom_nb as loom
from loom_nb.agent import agent as agent_module
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.testing import FakeClock, SequentialIds

deleted: list[str] = []


@loom.tool(needs_approval=True)
def remove(path: str) -> str:
    """Remove a file."""
    deleted.append(path)
    return f"removed {path}"


def respond(request: loom.ModelRequest) -> loom.ModelResponse:
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("remove", {"path": "a"}), ("remove", {"path": "b"})])
    refused = [m.text for m in request.messages if m.role == "tool" and m.is_error]
    return loom.ModelResponse.text(f"done; refused: {len(refused)}")


def runtime() -> loom.Runtime:
    return loom.Runtime(InMemoryJournal(), clock=FakeClock(), ids=SequentialIds())


async def test_two_answers_in_one_go_queue_up_and_both_count() -> None:
    deleted.clear()
    rt = runtime()
    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[remove], name="queue")
    run = agent.start("tidy", runtime=rt, execution_id="q-1")
    await run.wait(until="paused")
    first, second = run.gates
    pending = first.approve()
    assert repr(pending) == "<resuming run q-1 at #turn:0:tool:0:approval>"
    assert run.status == "running"
    second.refuse("keep b")  # answered while the first resume is still in flight: queued, not refused
    result = await run
    assert result.output == "done; refused: 1"
    assert deleted == ["a"]
    resolved = [e.step_id for e in rt.journal.read("q-1") if e.kind == EventKind.GATE_RESOLVED]
    assert resolved == ["#turn:0:tool:0:approval", "#turn:0:tool:1:approval"]


async def test_a_refused_answer_leaves_the_run_suspended() -> None:
    rt = runtime()
    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[remove], name="refused")
    run = agent.start("tidy", runtime=rt, execution_id="r-1")
    await run.wait(until="paused")
    gate = run.gates[0]
    try:
        gate.resolve({"approved": "maybe"})
    except loom.ResumeValidationError as exc:
        assert "not a valid ApprovalDecision" in str(exc)
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("an invalid payload was accepted")
    assert run.status == "suspended" and run.exception() is None
    assert len(run.gates) == 2


async def test_view_false_shows_no_live_view(monkeypatch: Any) -> None:
    seen: list[str] = []
    monkeypatch.setattr(agent_module, "RUN_HOOKS", [lambda r: seen.append(r.id)])
    rt = runtime()
    agent = loom.Agent(model=loom.ScriptedModel(lambda _request: loom.ModelResponse.text("hi")), name="quiet")
    await agent.start("x", runtime=rt, execution_id="v-1", view=False)
    await agent.start("x", runtime=rt, execution_id="v-2")
    assert seen == ["v-2"]


def test_decision_takes_the_choice_positionally() -> None:
    d = loom.Decision("model.small", probabilities=[0.8, 0.2])
    assert (d.choice, d.probabilities, d.propensity) == ("model.small", [0.8, 0.2], None)


async def test_a_route_policy_choosing_an_unknown_model_fails_the_run_clearly() -> None:
    rt = runtime()
    rt.effects.register("model.a", lambda _r: {"message": {"role": "assistant", "text": "hi"}}, kind="model")
    routes = loom.Routes(models=["model.a"], policy=lambda _models, _request, _turn: "model.zzz")
    agent = loom.Agent(routes=routes, name="routed")
    run = agent.start("x", runtime=rt, execution_id="u-1")
    try:
        await run
    except loom.UsageError as exc:
        assert "chose 'model.zzz'" in str(exc) and "Routes.models ['model.a']" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unknown route choice was accepted")


def test_408_is_retryable_and_400_is_not() -> None:
    assert loom.ProviderHTTPError("timeout", status_code=408).retryable
    assert not loom.ProviderHTTPError("bad", status_code=400).retryable
