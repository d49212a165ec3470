"""The session runs behind the golden journal ``tests/agent/golden/agent_session.jsonl``.

Three runs of one agent session (fake clock, sequential ids, seeded randomness, in-memory journal)
that journal every persisted form sessions and versioned agents added: the session run's execution
id ``session:<agent>:<session>:<index>``, its input ``{message, session: {id, previous, index}}``,
the carry item ``{"carry": {"execution", "node"}}`` in a run's first node, a compaction that folds
messages of earlier runs, and the patch marker ``#patched:<change>`` (the agent has one patch). A
change to any of those shows up as a diff against the file.

One file per event format (``loom_nb.journal.event_format``): ``agent_session.jsonl`` (format 1)
and ``agent_session_v2.jsonl`` (format 2). Regenerate one (only for a deliberate, migrated change of
the journal's shapes) with::

    .venv/bin/python tests/agent/golden_session_flows.py --write [--format 2]

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

GOLDEN = Path(__file__).with_name("golden") / "agent_session_keep_rule_2.jsonl"
#: The golden file of each event format (what a fresh recording must journal identically).
GOLDENS = {1: GOLDEN, 2: Path(__file__).with_name("golden") / "agent_session_v2.jsonl"}
#: The same runs recorded before compactions journaled ``keep_rule`` (docs/design.md, section 6.7):
#: never regenerated, they must keep replaying.
BEFORE_KEEP_RULE = GOLDEN.with_name("agent_session.jsonl")
#: Every golden file that must replay.
REPLAYED = [*GOLDENS.values(), BEFORE_KEEP_RULE]
AGENT_NAME = "chat"
SESSION_ID = "thread-1"
MESSAGES = ("What is in /tmp/x?", "Which one is the oldest?", "Thanks.")


@loom.tool(idempotent=True)
def list_files(folder: str) -> list[str]:
    """List a folder (a fixed answer).

    Args:
        folder: The folder.
    """
    return [f"{folder}/old.log", f"{folder}/notes.md"]


def respond(request: ModelRequest) -> loom.ModelResponse:
    """List the folder for the first message; otherwise answer from the conversation."""
    users = [m.text for m in request.messages if m.role == "user"]
    if users[-1] == MESSAGES[0] and not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("list_files", {"folder": "/tmp/x"})], text="Looking.")
    return loom.ModelResponse.text(f"Answer {len(users)}: old.log and notes.md.")


def make_agent() -> loom.Agent:
    """The golden session agent: one tool, a compaction after a few messages, one patch."""
    agent = loom.Agent(
        model=loom.ScriptedModel(respond),
        tools=[list_files],
        system="You answer about folders.",
        name=AGENT_NAME,
        compaction=loom.Compaction(effect_id="summarize", after_messages=5, keep_recent=2),
        summarizer=loom.ScriptedModel([loom.ModelResponse.text("The user asked about /tmp/x.")] * 3),
    )
    return agent.patch("short-answers", system="You answer about folders, briefly.")


def make_runtime(journal: JournalStore, event_format: int = 1) -> loom.Runtime:
    """A deterministic runtime with the golden agent registered, writing ``event_format``."""
    return golden_runtime(journal, make_agent(), event_format)


async def record(event_format: int = 1) -> list[Event]:
    """Run the three session runs in ``event_format`` and return their events, run by run."""
    journal = InMemoryJournal()
    rt = make_runtime(journal, event_format)
    session = make_agent().session(SESSION_ID, runtime=rt)
    for message in MESSAGES:
        await session.run(message)
    return [e for eid in session.execution_ids() for e in journal.read(eid)]


def load(which: Path | int = 1) -> InMemoryJournal:
    """An ``InMemoryJournal`` holding the golden session journal of event format ``which`` (or the file
    at the path ``which``)."""
    from tests.kernel import golden_flows

    return golden_flows.load(which if isinstance(which, Path) else GOLDENS[which])


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kernel import golden_flows

    args = sys.argv[1:]
    event_format = int(args[args.index("--format") + 1]) if "--format" in args else 1
    text = "\n".join(golden_flows.to_lines(asyncio.run(record(event_format)))) + "\n"
    if "--write" in args:
        GOLDENS[event_format].write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
