"""A batch (``agent.map``) in a subprocess that a crash switch kills after the Nth committed event.

Usage::

    python tests/crash/batch_crash_flow.py <journal_path> <calls_log> <crash>

Maps an agent over ``INPUTS`` (concurrency 4) on a DuckDB FILE journal, as a script re-run after a
crash would: the same call every time. Each input takes two model turns (each waiting 2 ms, so the
items' runs interleave) around one idempotent ``lookup`` call. Every model and tool call appends
``<model|tool> <idempotency_key> <attempt>`` to the calls log (flushed and fsynced) when it is made.
``crash`` is ``none`` or N: the process dies (exit code 86) right after the commit that brings the
events committed by this process to N or more. The result (each item's status and output, in input
order) is printed as one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import CrashingJournal, FakeClock, SequentialIds
from tests.crash.agent_crash_flow import LoggedModel, log_call

CRASH_EXIT_CODE = 86
INPUTS = [f"city {name}" for name in ("Paris", "Rome", "Oslo", "Lima", "Pune", "Kyiv", "Bern", "Doha", "Baku")]
CONCURRENCY = 4


def respond(request: ModelRequest) -> ModelResponse:
    """The scripted model: a pure function of the request."""
    user = next(m.text for m in request.messages if m.role == "user")
    tool = next((m.text for m in request.messages if m.role == "tool"), None)
    if tool is None:
        return ModelResponse.tool_calls([("lookup", {"city": user.split()[-1]})])
    return ModelResponse.text(f"{user}: {tool}")


def build_agent(log_path: str) -> loom.Agent:
    """The agent; its tool logs every call."""

    @loom.tool(idempotent=True)
    async def lookup(city: str, ctx: EffectContext) -> str:
        """Weather of a city."""
        log_call(log_path, "tool", ctx.idempotency_key, ctx.attempt)
        return f"sunny in {city}"

    return loom.Agent(
        model=LoggedModel(log_path, respond, latency=0.002), tools=[lookup], name="weather", model_retry=None
    )


def run(journal_path: str, log_path: str, crash_after: int | None) -> dict[str, Any]:
    """Map the agent over ``INPUTS`` and return what to print."""
    from tests import stores  # the repository root is on sys.path by now (see __main__)

    journal = CrashingJournal(stores.open_journal(journal_path), crash_after, exit_code=CRASH_EXIT_CODE)
    rt = loom.Runtime(journal, clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    try:
        batch = build_agent(log_path).map(INPUTS, concurrency=CONCURRENCY, runtime=rt, progress=False)
        return {
            "ids": [item.execution_id for item in batch.items],
            "resumed": [item.resumed for item in batch.items],
            "status": [item.status for item in batch.items],
            "output": [r.output if r else None for r in batch.results],
            "peak": batch.limiter.peak,
        }
    finally:
        rt.close()


def main(argv: list[str]) -> int:
    """Entry point: ``<journal_path> <calls_log> <crash>``."""
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    journal_path, log_path, crash = argv
    print(json.dumps(run(journal_path, log_path, None if crash == "none" else int(crash)), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import batch_crash_flow

    sys.exit(batch_crash_flow.main(sys.argv[1:]))
