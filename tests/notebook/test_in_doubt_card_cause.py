"""An in-doubt card names why the call is in doubt (a timeout, an MCP server gone, a crash) with the
step inline, "It happened" with nothing typed records an explicit "no result given", and the tool
row's duration does not count the time a person took to answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

import loom_nb as loom
from loom_nb.messages import ModelResponse
from loom_nb.notebook.cards import NO_RESULT_GIVEN, InDoubtCard, in_doubt_cause
from loom_nb.notebook.run_view import RunView
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import calls
from tests.notebook.support import make_runtime

STEP = "#turn:0:tool:0"


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test: the hanging tool returns, so no thread lingers."""
    gate = threading.Event()
    yield gate
    gate.set()


async def test_a_timeout_is_named_on_the_card_and_an_empty_it_happened_says_no_result(
    release: threading.Event,
) -> None:
    @loom.tool
    def transfer(amount: int) -> str:
        """Move money."""
        release.wait(5)
        return "moved"

    rt = make_runtime()
    model = ScriptedModel([calls(("transfer", {"amount": 10})), ModelResponse.text("Done.")])
    run = loom.Agent(model, tools=[transfer], tool_timeout=0.05, name="bank").start("Pay Bob 10", runtime=rt)
    view = RunView(run)
    async with asyncio.timeout(10):
        await run.wait(until="paused")
    card = view.cards[f"{STEP}:in_doubt"]
    assert isinstance(card, InDoubtCard)
    title = card.children[0].value
    assert "The call ran past its timeout and was abandoned (EffectTimeout: " in title and "0.05 s" in title
    assert f"(step {STEP}, attempt 1)" in title and "title=" not in title  # inline, not a hover tooltip
    assert "cut off" not in title

    rt.clock.advance(100.0)  # type: ignore[attr-defined]  # a person takes 100 s to answer
    card.happened.click()  # nothing typed in the output box
    async with asyncio.timeout(10):
        result = await run
    assert result.output == "Done."
    assert run.runtime.history(run.id).gates[f"{STEP}:in_doubt"].resolution["output"] == NO_RESULT_GIVEN
    assert model.history[1].messages[-1].text == NO_RESULT_GIVEN  # what the model read
    row = view.tool_rows[STEP]
    assert row.status == "done" and row.waited >= 100.0
    assert row.duration is not None and row.duration < 1.0
    assert RunView(run).tool_rows[STEP].duration == row.duration  # rebuilt from the journal


def test_the_other_causes_are_named() -> None:
    gone = {"type": "loom_nb.errors:McpServerGone", "message": "the server 'fs' exited mid-call"}
    assert in_doubt_cause(gone) == "The MCP server went away mid-call (McpServerGone: the server 'fs' exited mid-call)"
    assert in_doubt_cause(None).startswith("The process stopped (a crash, a kill or a kernel restart)")
