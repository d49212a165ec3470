"""A session's SECOND run in a subprocess that a crash switch kills after the Nth committed event.

Usage::

    python tests/crash/session_crash_flow.py <journal_path> <calls_log> <crash> <start|recover>

``start`` runs the session's first run (``session:chat:s:0``, never cut: it asks for the weather
in Paris) on a plain runtime, closes it, then starts the second run (``session:chat:s:1``, "and
Rome?") on a journal that kills the process after the Nth event committed by that second run
(``crash`` N; ``none``: never). ``recover`` calls ``runtime.recover()`` in a fresh process and
prints the second run's result. The second run calls ``lookup`` for Rome, then answers with every
tool result and every user message of the whole conversation, so its output equals the
uninterrupted run's only if the conversation it carried from the first run is rebuilt exactly.

Every model call and tool call appends ``<model|tool> <idempotency_key> <attempt>`` to the calls log
(fsynced) when it is made. The result is one JSON line with ``commits`` (events committed by the
second run's process after each commit).
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

SESSION = "s"
FIRST = "session:chat:s:0"
EXECUTION_ID = "session:chat:s:1"
#: The exit status of a process the crash switch killed.
EXIT_CODE = CRASH_EXIT_CODE


def respond(request: ModelRequest) -> ModelResponse:
    """Look up the city of the newest user message, then answer with the whole conversation."""
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    asked = request.messages[last_user].text
    if not any(m.role == "tool" for m in request.messages[last_user:]):
        return ModelResponse.tool_calls([("lookup", {"city": asked.split()[-1].strip("?")})], text="Looking.")
    tools = [m.text for m in request.messages if m.role == "tool"]
    users = [m.text for m in request.messages if m.role == "user"]
    return ModelResponse.text(f"asked {users}; found {tools}")


def build_agent(log_path: str) -> loom.Agent:
    """The session's agent; its tool logs every call."""

    @loom.tool(idempotent=True)
    async def lookup(city: str, ctx: EffectContext) -> str:
        """Weather of a city."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"{city}: sunny"

    return loom.Agent(
        model=LoggedModel(log_path, respond), tools=[lookup], name="chat", system="Be brief.", model_retry=None
    )


def runtime(journal: Any) -> loom.Runtime:
    return loom.Runtime(journal, clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())


def run(journal_path: str, log_path: str, crash_after: int | None, mode: str) -> dict[str, Any]:
    """Run ``mode`` and return what to print."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    agent = build_agent(log_path)
    if mode == "start":
        first = runtime(stores.open_journal(journal_path))
        try:
            agent.session(SESSION, runtime=first).start("weather in Paris?")
        finally:
            first.close()
    journal = CountingCrashJournal(stores.open_journal(journal_path), crash_after)
    rt = runtime(journal)
    try:
        handle = start_or_recover(
            mode, agent, rt, EXECUTION_ID, lambda: agent.session(SESSION, runtime=rt).start("and Rome?")
        )
        result = handle.result
        return {
            "status": handle.status,
            "output": result.model_dump(mode="json") if result else None,
            "commits": journal.commits,
        }
    finally:
        rt.close()


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <calls_log> <crash> <mode>``."""
    return script_main(argv, run, __doc__)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import session_crash_flow

    sys.exit(session_crash_flow.main(sys.argv[1:]))
