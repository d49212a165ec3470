"""The agent run behind the golden journal ``tests/agent/golden/agent_typed_output.jsonl``.

A typed-output run (``output_type=Forecast``, ``final_result`` tool mode): turn 0 calls a tool, turn 1
answers with a value that fails validation (its error goes back as the call's error result), turn 2
answers validly. It pins the persisted shapes of typed output: the first node's ``"output"``
(type, mode, strict schema), the ``final_result`` tool spec, the journaled error result, and the
answer's JSON in ``execution_completed``. The file is event format 1 (recorded before formats were
versioned); ``agent_typed_output_v2.jsonl`` is its format 2 twin.

Regenerate one (only for a deliberate, migrated change of those shapes) with::

    .venv/bin/python tests/agent/golden_typed_flows.py --write [--format 2]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pydantic import BaseModel

import loom_nb as loom
from loom_nb.journal import Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest
from tests.agent.support import golden_runtime

GOLDEN = Path(__file__).with_name("golden") / "agent_typed_output.jsonl"
#: The golden file of each event format.
GOLDENS = {1: GOLDEN, 2: GOLDEN.with_name("agent_typed_output_v2.jsonl")}
EXECUTION_ID = "golden-typed-1"
AGENT_NAME = "forecaster"


class Forecast(BaseModel):
    """The typed answer (a persisted name: ``tests.agent.golden_typed_flows:Forecast``)."""

    city: str
    celsius: int


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city (a fixed answer).

    Args:
        city: The city.
    """
    return f"{city}: 12C"


def respond(request: ModelRequest) -> loom.ModelResponse:
    """Call the tool, then answer wrongly once, then rightly."""
    tools = [m for m in request.messages if m.role == "tool"]
    if not tools:
        return loom.ModelResponse.tool_calls([("weather", {"city": "Oslo"})])
    if len(tools) == 1:
        return loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": "12C"})])
    return loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": 12})])


def make_agent() -> loom.Agent[None, Forecast]:
    """The golden typed agent."""
    return loom.Agent(
        loom.ScriptedModel(respond), tools=[weather], name=AGENT_NAME, output_type=Forecast, system="Forecast."
    )


def make_runtime(journal: JournalStore, event_format: int = 1) -> loom.Runtime:
    """A deterministic runtime with the golden agent registered, writing ``event_format``."""
    return golden_runtime(journal, make_agent(), event_format)


async def record(event_format: int = 1) -> list[Event]:
    """Run the golden agent to its answer in ``event_format`` and return its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal, event_format)
    result = await rt.start(make_agent().flow_name, "Forecast for Oslo?", execution_id=EXECUTION_ID)
    assert result.status == "completed", result
    return journal.read(EXECUTION_ID)


def load(event_format: int = 1) -> InMemoryJournal:
    """An ``InMemoryJournal`` holding the golden journal of ``event_format``."""
    from tests.kernel import golden_flows

    return golden_flows.load(GOLDENS[event_format])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.agent import golden_typed_flows
    from tests.kernel import golden_flows

    args = sys.argv[1:]
    event_format = int(args[args.index("--format") + 1]) if "--format" in args else 1
    text = "\n".join(golden_flows.to_lines(asyncio.run(golden_typed_flows.record(event_format)))) + "\n"
    if "--write" in args:
        GOLDENS[event_format].write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
