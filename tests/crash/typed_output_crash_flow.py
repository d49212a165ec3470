"""A typed-output agent run in a subprocess that a crash switch kills after the Nth committed event.

Usage::

    python tests/crash/typed_output_crash_flow.py <journal_path> <calls_log> <crash> <start|recover>

The agent (``loom.Agent(output_type=Trip)`` over a DuckDB FILE journal, ``final_result`` tool mode)
answers in three model turns: turn 0 calls ``lookup``; turn 1 calls ``final_result`` with an answer
that fails validation (no ``celsius``), which goes back to the model as the call's error result;
turn 2 calls ``final_result`` with a valid answer built from what it was sent (the tool result and
the validation error), so the output equals the uninterrupted run's only if the transcript does.

``start`` starts ``run-1``; ``recover`` calls ``runtime.recover()`` in a fresh process. Every model and
tool call is logged as in ``agent_crash_flow.py``; ``crash`` is ``none`` or N (die right after the
commit that brings this process's committed events to N or more).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import loom_nb as loom
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import FakeClock, SequentialIds
from tests.crash.agent_crash_flow import (
    CRASH_EXIT_CODE,
    EXECUTION_ID,
    CountingCrashJournal,
    LoggedModel,
    log_call,
    script_main,
    start_or_recover,
)

__all__ = ["CRASH_EXIT_CODE", "EXECUTION_ID", "Trip", "main"]

INPUT = "Plan a day in Rome."


class Trip(BaseModel):
    """The typed answer."""

    city: str
    weather: str
    celsius: int
    note: str


def respond(request: ModelRequest) -> ModelResponse:
    """The scripted model: a pure function of the request."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    tools = [m.text for m in request.messages if m.role == "tool"]
    if turn == 0:
        return ModelResponse.tool_calls([("lookup", {"city": "Rome"})], text="Checking Rome.")
    if turn == 1:
        return ModelResponse.tool_calls([("final_result", {"city": "Rome", "weather": tools[0], "note": "-"})])
    note = tools[-1].splitlines()[1]  # the first line of the validation error sent back
    return ModelResponse.tool_calls(
        [("final_result", {"city": "Rome", "weather": tools[0], "celsius": 21, "note": note})]
    )


def build_agent(log_path: str) -> loom.Agent[None, Trip]:
    """The typed agent, its tool logging every call."""

    @loom.tool(idempotent=True)
    async def lookup(city: str, ctx: EffectContext) -> str:
        """Weather of a city."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"{city}: sunny, 21C"

    return loom.Agent(
        LoggedModel(log_path, respond), tools=[lookup], name="typed-trip", model_retry=None, output_type=Trip
    )


def run(journal_path: str, log_path: str, crash_after: int | None, mode: str) -> dict[str, Any]:
    """Run ``mode`` and return what to print."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    journal = CountingCrashJournal(stores.open_journal(journal_path), crash_after)
    rt = loom.Runtime(journal, clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    agent = build_agent(log_path)
    try:
        handle = start_or_recover(
            mode, agent, rt, EXECUTION_ID, lambda: agent.start(INPUT, runtime=rt, execution_id=EXECUTION_ID)
        )
        result = handle.result
        return {
            "status": handle.status,
            "output": result.output.model_dump(mode="json") if result else None,
            "typed": type(result.output).__name__ if result else None,
            "resolved": [],
            "commits": journal.commits,
        }
    finally:
        rt.close()


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <calls_log> <crash> <mode>``."""
    return script_main(argv, run, __doc__)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import typed_output_crash_flow

    sys.exit(typed_output_crash_flow.main(sys.argv[1:]))
