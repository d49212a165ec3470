"""The live view shows the model's reasoning (extended thinking) collapsed, never its signatures."""

from __future__ import annotations

import html

import loom_nb as loom
from loom_nb.messages import Message, ModelResponse, ReasoningBlock, Usage
from loom_nb.notebook.run_view import RunView

SIGNATURE = "sig-EXAMPLE-do-not-show"
THOUGHT = "The user wants <b>42</b>; check the units first."


def thinking_model() -> loom.ScriptedModel:
    message = Message.assistant("It is 42.").model_copy(
        update={
            "reasoning": (
                ReasoningBlock(text=THOUGHT, signature=SIGNATURE),
                ReasoningBlock(type="redacted_thinking", data="opaque-DATA"),
            )
        }
    )
    usage = Usage(input_tokens=10, output_tokens=30, reasoning_tokens=20)
    return loom.ScriptedModel([ModelResponse(message=message, usage=usage, finish_reason="stop")])


async def test_reasoning_is_shown_collapsed_escaped_and_without_signatures() -> None:
    agent = loom.Agent(model=thinking_model(), name="thinker")
    with loom.Runtime.open(":memory:") as rt:
        run = agent.start("What is the answer?", runtime=rt, view=False)
        view = RunView(run)
        assert (await run).output == "It is 42."
        value = view.thinking.value
        assert value.startswith("<details class='loom-thinking'><summary>Thinking (2 block(s) · 20 reasoning tokens)")
        assert html.escape(THOUGHT) in value and "<b>42</b>" not in value
        assert "[redacted by the provider]" in value
        assert SIGNATURE not in value and "opaque-DATA" not in value
        assert "thinking: 2 block(s)" in view.text()
        # A view opened later reads the same from the journal.
        again = RunView(loom.Run.attach(rt, run.id))
        assert again.thinking.value == value


async def test_no_reasoning_no_thinking_section() -> None:
    agent = loom.Agent(model=loom.ScriptedModel([ModelResponse.text("plain")]), name="plain")
    with loom.Runtime.open(":memory:") as rt:
        run = agent.start("hi", runtime=rt, view=False)
        view = RunView(run)
        await run
        assert view.thinking.value == "" and "thinking" not in view.text()
