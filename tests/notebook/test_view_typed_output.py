"""A typed run in the live view: every turn block shows what happened in it. A turn whose model
answered through ``final_result`` shows that answer and its verdict: invalid, with the validation
error that went back to the model, or valid (the value itself is shown once, as the Answer)."""

from __future__ import annotations

import html
import re

import pytest
from pydantic import BaseModel

import loom_nb as loom
from loom_nb.agent.output import answer_attempts
from loom_nb.journal.run_state import RunState
from loom_nb.messages import ModelRequest
from loom_nb.notebook.run_view import RunView, TurnBlock
from tests.notebook.support import make_runtime


class Forecast(BaseModel):
    city: str
    celsius: int
    summary: str


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 12C, light rain"


def forecaster(request: ModelRequest) -> loom.ModelResponse:
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return loom.ModelResponse.tool_calls([("weather", {"city": "Oslo"})])
    if len(results) == 1:  # a first answer that does not validate
        return loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": "12C"})])
    return loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": 12, "summary": "Light rain."})])


def block_html(block: TurnBlock) -> str:
    """Everything a turn block draws, as one HTML string ("" when the block is hidden)."""
    if block.layout.display == "none":
        return ""
    parts = [block.body.value, block.thinking.value, block.calling.value]
    parts += [w.value for w in block.tools.children]
    return "".join(parts)


def visible_text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


async def test_every_turn_of_a_typed_run_shows_its_answer_attempt_and_verdict() -> None:
    agent = loom.Agent(loom.ScriptedModel(forecaster), tools=[weather], output_type=Forecast, name="forecaster")
    run = agent.start("Forecast for Oslo?", execution_id="forecast", runtime=make_runtime())
    live = RunView(run)
    await run
    rebuilt = RunView(run)  # from the journal alone, after the run
    for view in (live, rebuilt):
        shown = {turn: visible_text(block_html(b)) for turn, b in view.blocks.items()}
        assert sorted(shown) == [0, 1, 2]
        assert all(shown.values()), shown  # no empty turn block
        assert "weather(city='Oslo') done" in shown[0]
        assert shown[1].startswith("answer attempt 1 final_result(city='Oslo', celsius='12C') invalid → ")
        assert "celsius: Input should be a valid integer" in shown[1] and "summary: Field required" in shown[1]
        assert (
            shown[2]
            == "answer attempt 2 final_result(city='Oslo', celsius=12, summary='Light rain.') valid, shown below"
        )
        assert "loom-tool-failed" in block_html(view.blocks[1]) and "loom-tool-done" in block_html(view.blocks[2])
        lines = view.text().splitlines()
        assert lines[2].startswith(
            "  answer attempt 1 (final_result(city='Oslo', celsius='12C')): invalid -> celsius: "
        )
        valid = "(final_result(city='Oslo', celsius=12, summary='Light rain.')): valid, shown below"
        assert lines[3] == "  answer attempt 2 " + valid
        assert lines[4] == '  answer: Forecast {"city":"Oslo","celsius":12,"summary":"Light rain."}'


async def test_a_run_that_fails_validation_marks_its_last_answer_invalid() -> None:
    stubborn = loom.Agent(
        loom.ScriptedModel(lambda request: loom.ModelResponse.text("It's rainy.")),
        output_type=Forecast,
        output_retries=1,
        name="stubborn",
    )
    run = stubborn.start("Forecast?", execution_id="stubborn", runtime=make_runtime())
    view = RunView(run)
    with pytest.raises(loom.OutputValidationError):
        await run
    attempts = answer_attempts(RunState.fold(run.runtime.journal.read(run.id), run.id))
    assert [(a.attempt, a.status, a.arguments, a.text) for a in attempts] == [
        (1, "invalid", None, "It's rainy."),
        (2, "invalid", None, "It's rainy."),
    ]
    assert attempts[0].error == (  # the retry message the model read
        "Give the final answer by calling the final_result tool. "
        "The answer failed validation: the answer was text, not a call of the final_result tool."
    )
    shown = {turn: visible_text(block_html(b)) for turn, b in view.blocks.items()}
    assert all(shown.values()), shown
    assert "It's rainy." in shown[0] and "answer attempt 1 (text) invalid → Give the final answer" in shown[0]
    assert "the run failed on it" in shown[1]


async def test_a_text_agent_has_no_answer_rows() -> None:
    agent = loom.Agent(loom.ScriptedModel([loom.ModelResponse.text("Hi.")]), name="plain")
    run = agent.start("hello", runtime=make_runtime())
    view = RunView(run)
    await run
    assert view.answer_rows == {} and answer_attempts(view.state) == []


async def test_a_native_answer_is_the_turns_json_text_and_its_verdict() -> None:
    model = loom.ScriptedModel(
        [loom.ModelResponse.text('{"city": "Oslo", "celsius": 12, "summary": "Rain."}')], native_output=True
    )
    run = loom.Agent(model, output_type=Forecast, name="native").start("Oslo?", runtime=make_runtime())
    view = RunView(run)
    await run
    assert visible_text(block_html(view.blocks[0])).endswith("answer attempt 1 (JSON text) valid, shown below")
    assert "  answer attempt 1 (JSON text): valid, shown below" in view.text().splitlines()
