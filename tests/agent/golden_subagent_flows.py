"""The sub-agent runs behind the golden journal ``tests/agent/golden/agent_subagent_v2.jsonl``.

A lead agent calls a researcher (``Agent.as_tool``) whose tool needs approval (fake clock,
sequential ids, seeded randomness, in-memory journal, event format 2). It journals every persisted
form sub-agents added: the child execution id ``<parent>/<step>``, the child's
``execution_started.parent {execution, step}``, the parent's gate of kind ``ChildExecution`` and its
answer ``{status, output, error}``, the child's approval gate answered while the parent waits, and
the child's answer inline as the lead's tool result. A change to any of those shows up as a diff.

Regenerate (only for a deliberate, migrated change of the journal's shapes) with::

    .venv/bin/python tests/agent/golden_subagent_flows.py --write

(without ``--write`` it prints the lines a fresh recording gives).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import loom_nb as loom
from loom_nb.journal import Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest
from tests.agent.support import golden_runtime

GOLDEN = Path(__file__).with_name("golden") / "agent_subagent_v2.jsonl"
EVENT_FORMAT = 2
PARENT = "lead-1"
CHILD = "lead-1/#turn:0:tool:0"
APPROVAL = "#turn:0:tool:0:approval"


@loom.tool(needs_approval=True)
def fetch_page(url: str) -> str:
    """Fetch a web page (a fixed answer).

    Args:
        url: The page.
    """
    return f"<page {url}: sunny>"


def lead_respond(request: ModelRequest) -> loom.ModelResponse:
    """Ask the researcher, then report what it said."""
    tools = [m.text for m in request.messages if m.role == "tool"]
    if not tools:
        return loom.ModelResponse.tool_calls([("research", {"input": "weather in Rome?"})], text="Asking.")
    return loom.ModelResponse.text(f"Lead: {tools[0]}")


def researcher_respond(request: ModelRequest) -> loom.ModelResponse:
    """Fetch the page, then answer with it."""
    tools = [m.text for m in request.messages if m.role == "tool"]
    if not tools:
        return loom.ModelResponse.tool_calls([("fetch_page", {"url": "https://rome.test"})], text="Fetching.")
    return loom.ModelResponse.text(f"Researcher: {tools[0]}")


def make_lead() -> loom.Agent:
    """The lead agent with the researcher as its one tool."""
    researcher = loom.Agent(model=loom.ScriptedModel(researcher_respond), tools=[fetch_page], name="researcher")
    return loom.Agent(
        model=loom.ScriptedModel(lead_respond),
        tools=[researcher.as_tool(name="research", description="Research a question.")],
        system="You delegate.",
        name="lead",
    )


def make_runtime(journal: JournalStore) -> loom.Runtime:
    """A deterministic runtime with the golden agents registered."""
    return golden_runtime(journal, make_lead(), EVENT_FORMAT)


async def record() -> list[Event]:
    """Run the lead until the child's gate parks it, approve, and return both executions' events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal)
    run = make_lead().start("go", runtime=rt, execution_id=PARENT)
    await run.wait(until="paused")
    await run.gates[0].approve()
    return [e for eid in (PARENT, CHILD) for e in journal.read(eid)]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kernel import golden_flows

    text = "\n".join(golden_flows.to_lines(asyncio.run(record()))) + "\n"
    if "--write" in sys.argv[1:]:
        GOLDEN.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
