"""The agent run behind ``tests/agent/golden/agent_compaction_backward.jsonl``.

Recorded with the code before ``keep_rule`` 2 (docs/design.md, section 6.7): the kept suffix of a
compaction was then extended *backwards* until it no longer started with a tool result, so at
``#turn:3:compact`` (``after_messages=5, keep_recent=3``) the record holds ``keep: 4`` where the rule
now keeps 2. The file must keep replaying: the loop reads a compaction's recorded input and applies
the rule it was recorded with (no ``keep_rule`` key: the backward rule).

Never regenerate this file: it stands for runs recorded before the change. Without ``--write`` the
script prints what a fresh recording gives today (which differs: ``keep_rule: 2``).
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

GOLDEN = Path(__file__).with_name("golden") / "agent_compaction_backward.jsonl"
EXECUTION_ID = "golden-compaction-1"
AGENT_NAME = "noter"
NOTES = 4


@loom.tool(idempotent=True)
def note(n: int) -> str:
    """Return note n.

    Args:
        n: Which note.
    """
    return f"note {n}"


def respond(request: ModelRequest) -> loom.ModelResponse:
    """Ask for the note after the newest one (read from the newest message, which every fold keeps)."""
    last = request.messages[-1]
    i = int(last.text.split()[1]) + 1 if last.role == "tool" else 0
    if i >= NOTES:
        return loom.ModelResponse.text("all noted")
    return loom.ModelResponse.tool_calls([("note", {"n": i})], text=f"step {i}")


def summarize(request: ModelRequest) -> loom.ModelResponse:
    """A summary that depends only on what it is sent."""
    return loom.ModelResponse.text("SUMMARY of " + " | ".join(m.text for m in request.messages if m.role != "system"))


def make_agent() -> loom.Agent:
    """Four note calls; compaction past 5 messages keeping 3."""
    return loom.Agent(
        model=loom.ScriptedModel(respond),
        tools=[note],
        system="You take notes.",
        name=AGENT_NAME,
        compaction=loom.Compaction(effect_id="summarize", after_messages=5, keep_recent=3),
        summarizer=loom.ScriptedModel(summarize),
    )


def make_runtime(journal: JournalStore) -> loom.Runtime:
    """A deterministic runtime with the golden agent registered."""
    return golden_runtime(journal, make_agent())


async def record() -> list[Event]:
    """Run the golden agent to its answer and return its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal)
    result = await rt.start(make_agent().flow_name, "Take the notes", execution_id=EXECUTION_ID)
    assert result.status == "completed", result
    return journal.read(EXECUTION_ID)


def load() -> InMemoryJournal:
    """An ``InMemoryJournal`` holding the golden journal."""
    from tests.kernel import golden_flows

    return golden_flows.load(GOLDEN)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kernel import golden_flows

    text = "\n".join(golden_flows.to_lines(asyncio.run(record()))) + "\n"
    if sys.argv[1:] == ["--write"]:
        if GOLDEN.exists():
            raise SystemExit(f"{GOLDEN} exists: it stands for runs recorded before keep_rule 2; never regenerate it")
        GOLDEN.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
