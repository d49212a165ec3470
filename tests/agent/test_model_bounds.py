"""Bounds on model-driven fan-out and size (``docs/design.md``, sections 6.11 and 7): more tool calls
in one turn than ``max_tool_calls`` run nothing (no step, no gate) and come back as error results the
model corrects; an answer past ``max_answer_chars`` fails its model step with ``AnswerTooLargeError``
while it streams (never journaled whole), and an answer that came whole is refused too."""

from __future__ import annotations

from typing import Any

import pytest

import loom_nb as loom
from loom_nb.errors import AnswerTooLargeError, UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.base import DeltaSink
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import calls, make_runtime, turn_of


def fan_out(count: int) -> Any:
    def respond(request: ModelRequest) -> ModelResponse:
        if turn_of(request) == 0:
            return calls(*[("delete_file", {"path": f"/tmp/f{i}"}) for i in range(count)])
        if turn_of(request) == 1:
            return calls(("delete_file", {"path": "/tmp/f0"}))
        return ModelResponse.text("done")

    return respond


def gated_tool(deleted: list[str]) -> loom.Tool:
    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    return delete_file


async def test_too_many_calls_in_one_turn_run_nothing_and_the_model_corrects_itself() -> None:
    rt, deleted = make_runtime(), []
    model = ScriptedModel(fan_out(2_000))
    agent = loom.Agent(model=model, tools=[gated_tool(deleted)], name="fan", warn_transcript_bytes=False)
    run = agent.start("clean up", runtime=rt, view=False)
    await run.wait(until="paused")
    # No step and no gate for the 2,000 calls: the run went on to the model's corrected turn.
    assert run.status == "suspended"
    assert [g.gate_id for g in run.gates] == ["#turn:1:tool:0:approval"]
    started = [e.step_id for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_STARTED]
    assert started == ["#turn:0", "#turn:1"]
    tool_results = [m for m in model.history[1].messages if m.role == "tool"]
    assert len(tool_results) == 2_000 and all(m.is_error for m in tool_results)
    assert "2,000 tool calls in one turn; at most 128 run" in tool_results[0].text
    assert "see the first call's result" in tool_results[1].text
    run.gates[0].approve()
    assert (await run).output == "done"
    assert deleted == ["/tmp/f0"]
    assert (await rt.replay(run.id)).reproduced


async def test_max_tool_calls_is_configurable() -> None:
    rt, deleted = make_runtime(), []
    agent = loom.Agent(model=ScriptedModel(fan_out(3)), tools=[gated_tool(deleted)], name="few", max_tool_calls=2)
    run = agent.start("clean up", runtime=rt, view=False)
    await run.wait(until="paused")
    assert [g.gate_id for g in run.gates] == ["#turn:1:tool:0:approval"]
    roomy = loom.Agent(model=ScriptedModel(fan_out(3)), tools=[gated_tool(deleted)], name="roomy", max_tool_calls=3)
    run = roomy.start("clean up", runtime=rt, view=False)
    await run.wait(until="paused")
    assert len(run.gates) == 3
    with pytest.raises(UsageError, match="max_tool_calls must be a whole number of at least 1"):
        loom.Agent(model=ScriptedModel(fan_out(1)), max_tool_calls=0)


class Flood:
    """A provider that streams ``total`` characters in deltas of ``size`` (counting what it sent)."""

    name = "flood"

    def __init__(self, total: int, size: int = 10_000, *, whole: bool = False) -> None:
        self.total, self.size, self.whole, self.sent = total, size, whole, 0

    async def complete(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        text = "x" * self.total
        if on_delta is not None and not self.whole:
            for i in range(0, self.total, self.size):
                self.sent += self.size
                on_delta(text[i : i + self.size])
        return ModelResponse.text(text)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed-to-the-journal"])
async def test_an_answer_past_the_default_limit_fails_its_step_while_it_streams(stream: bool) -> None:
    rt = make_runtime()
    model = Flood(100_000_000)
    run = loom.Agent(model=model, name="flood", stream=stream).start("write", runtime=rt, view=False)
    with pytest.raises(AnswerTooLargeError, match=r"step '#turn:0'.*max_answer_chars=1,000,000"):
        await run
    assert model.sent <= 1_000_000 + 65 * model.size, "the stream was not cut near the limit"
    evs = rt.journal.read(run.id)
    failed = [e for e in evs if e.kind == EventKind.STEP_FAILED]
    assert [e.step_id for e in failed] == ["#turn:0"]
    assert len([e for e in evs if e.kind == EventKind.STEP_STARTED]) == 1, "an answer too large is not retried"
    assert sum(len(e.data.get("text", "")) for e in evs if e.kind == EventKind.STREAM_CHUNK) <= 1_000_000
    assert rt.result(run.id).status == "failed"


async def test_an_answer_that_came_whole_is_checked_when_its_step_completes() -> None:
    rt = make_runtime()
    agent = loom.Agent(model=Flood(5_000, whole=True), name="whole", max_answer_chars=4_000)
    run = agent.start("write", runtime=rt, view=False)
    with pytest.raises(AnswerTooLargeError, match=r"max_answer_chars=4,000 \(5,000 characters"):
        await run
    ok = loom.Agent(model=Flood(5_000, whole=True), name="whole2", max_answer_chars=5_000)
    assert len((await ok.start("write", runtime=rt, view=False)).output) == 5_000
