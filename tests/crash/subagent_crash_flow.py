"""A lead agent calling a sub-agent (``Agent.as_tool``) in a subprocess that a crash switch kills
after the Nth committed event (of the parent and the child together).

Usage::

    python tests/crash/subagent_crash_flow.py <journal_path> <calls_log> <crash> <start|recover>

``start`` starts the lead (execution ``lead-1``) on a journal that kills the process after the Nth
event committed (``crash`` N; ``none``: never); ``recover`` calls ``runtime.recover()`` in a fresh
process and prints the lead's result. The lead asks the researcher (child ``lead-1/#turn:0:tool:0``),
which looks a city up, then both answer. Every model and tool call appends
``<model|tool> <idempotency_key> <attempt>`` to the calls log (fsynced) when it is made. The result
is one JSON line with ``commits`` (events committed after each commit).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import FakeClock, SequentialIds
from tests.crash.agent_crash_flow import (
    CRASH_EXIT_CODE,
    CountingCrashJournal,
    LoggedModel,
    log_call,
    script_main,
    start_or_recover,
)

EXECUTION_ID = "lead-1"
CHILD_ID = "lead-1/#turn:0:tool:0"
#: The exit status of a process the crash switch killed.
EXIT_CODE = CRASH_EXIT_CODE


def lead_respond(request: ModelRequest) -> ModelResponse:
    """Ask the researcher, then report what it said."""
    tools = [m.text for m in request.messages if m.role == "tool"]
    if not tools:
        return ModelResponse.tool_calls([("research", {"input": "weather in Rome?"})], text="Asking.")
    return ModelResponse.text(f"lead: {tools}")


def researcher_respond(request: ModelRequest) -> ModelResponse:
    """Look the city up, then answer with it."""
    tools = [m.text for m in request.messages if m.role == "tool"]
    if not tools:
        return ModelResponse.tool_calls([("lookup", {"city": "Rome"})], text="Looking.")
    return ModelResponse.text(f"researcher: {tools}")


def build_lead(log_path: str) -> loom.Agent:
    """The lead agent and, as its one tool, the researcher."""

    @loom.tool(idempotent=True)
    async def lookup(city: str, ctx: EffectContext) -> str:
        """Weather of a city."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"{city}: sunny"

    researcher = loom.Agent(
        model=LoggedModel(log_path, researcher_respond), tools=[lookup], name="researcher", model_retry=None
    )
    return loom.Agent(
        model=LoggedModel(log_path, lead_respond),
        tools=[researcher.as_tool(name="research", description="Research a question.")],
        name="lead",
        model_retry=None,
    )


def run(journal_path: str, log_path: str, crash_after: int | None, mode: str) -> dict[str, Any]:
    """Run ``mode`` and return what to print."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    lead = build_lead(log_path)
    journal = CountingCrashJournal(stores.open_journal(journal_path), crash_after)
    rt = loom.Runtime(journal, clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    try:
        handle = start_or_recover(
            mode, lead, rt, EXECUTION_ID, lambda: lead.start("go", runtime=rt, execution_id=EXECUTION_ID)
        )
        result = handle.result
        child = rt.result(CHILD_ID)
        return {
            "status": handle.status,
            "output": result.model_dump(mode="json") if result else None,
            "child": child.status,
            "commits": journal.commits,
        }
    finally:
        rt.close()


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <calls_log> <crash> <mode>``."""
    return script_main(argv, run, __doc__)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import subagent_crash_flow

    sys.exit(subagent_crash_flow.main(sys.argv[1:]))
