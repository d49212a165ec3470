"""The agent run behind the golden journal ``tests/agent/golden/agent_approval_keep_rule_2.jsonl``.

A small agent run (fake clock, sequential ids, seeded randomness, in-memory journal) that journals
every id form the agent loop uses most: model turns ``#turn:<i>``, a tool step ``#turn:<i>:tool:<j>``,
an approval gate ``#turn:<i>:tool:<j>:approval`` (approved), a compaction ``#turn:<i>:compact``, the
effect ids ``tools.<name>`` / ``model.<agent>`` and the flow ``agent:<name>``. A change to any of those
persisted strings, or to the loop's event shapes, shows up as a diff against the file.

One file per event format, each recorded with compactions that journal ``keep_rule`` 2:
``agent_approval_keep_rule_2.jsonl`` (format 1) and ``agent_approval_v2.jsonl`` (format 2: tool inputs by
reference, no digest or key, no durable copy of the model's streamed text). ``agent_approval.jsonl`` is
the format 1 run recorded before compactions journaled ``keep_rule`` (``docs/design.md``, section 6.7):
never regenerated, it must keep replaying. Regenerate one file of ``GOLDENS`` (only for a deliberate,
migrated change of the journal's shapes) with::

    .venv/bin/python tests/agent/golden_agent_flows.py --write [--format 2]

(without ``--write`` it prints the lines a fresh recording gives).

``tests/agent/golden/agent_approval_edited.jsonl`` (recorded with ``keep_rule`` 2) is the same agent
with the delete approved on edited arguments (``ApprovalDecision.arguments`` and ``.digest``): the
gate keeps the model's arguments, its resolution the edited ones, the tool step runs the edited ones and the next turn
tells the model so (``EDITED_NOTE``). Write it with ``--write-edited``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import loom_nb as loom
from loom_nb.journal import Event, InMemoryJournal, digest_value
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest
from tests.agent.support import golden_runtime

GOLDEN = Path(__file__).with_name("golden") / "agent_approval_keep_rule_2.jsonl"
#: The golden file of each event format (what a fresh recording must journal identically).
GOLDENS = {1: GOLDEN, 2: Path(__file__).with_name("golden") / "agent_approval_v2.jsonl"}
#: The same run recorded before ``keep_rule`` 2: it must replay, never be regenerated.
BEFORE_KEEP_RULE = GOLDEN.with_name("agent_approval.jsonl")
#: Every golden file that must replay.
REPLAYED = [*GOLDENS.values(), BEFORE_KEEP_RULE]
EXECUTION_ID = "golden-agent-1"
GOLDEN_EDITED = Path(__file__).with_name("golden") / "agent_approval_edited.jsonl"
EDITED_EXECUTION_ID = "golden-agent-edited-1"
EDITED_ARGUMENTS = {"path": "/tmp/x/notes.md"}
AGENT_NAME = "tidy"


@loom.tool(idempotent=True)
def list_files(folder: str) -> list[str]:
    """List a folder (a fixed answer).

    Args:
        folder: The folder.
    """
    return [f"{folder}/old.log", f"{folder}/notes.md"]


@loom.tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend; asks for approval first).

    Args:
        path: The file.
    """
    return f"deleted {path}"


def respond(request: ModelRequest) -> loom.ModelResponse:
    """List, then delete (gated); answer once the transcript was compacted."""
    if any(m.text.startswith("[Summary") for m in request.messages):
        return loom.ModelResponse.text("Done: old.log is gone.")
    if not any(m.role == "tool" for m in request.messages):
        return loom.ModelResponse.tool_calls([("list_files", {"folder": "/tmp/x"})], text="Looking.")
    return loom.ModelResponse.tool_calls([("delete_file", {"path": "/tmp/x/old.log"})], text="Deleting.")


def make_agent() -> loom.Agent:
    """The golden agent: two tools (one gated) and a compaction after a few messages."""
    return loom.Agent(
        model=loom.ScriptedModel(respond),
        tools=[list_files, delete_file],
        system="You tidy folders.",
        name=AGENT_NAME,
        compaction=loom.Compaction(effect_id="summarize", after_messages=4, keep_recent=1),
        summarizer=loom.ScriptedModel([loom.ModelResponse.text("Listed the folder; deleting old.log.")] * 3),
    )


def make_runtime(journal: JournalStore, event_format: int = 1) -> loom.Runtime:
    """A deterministic runtime with the golden agent registered, writing ``event_format``."""
    return golden_runtime(journal, make_agent(), event_format)


async def record(event_format: int = 1) -> list[Event]:
    """Run the golden agent to its answer (approving the delete) in ``event_format``; return its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal, event_format)
    result = await rt.start(make_agent().flow_name, "Tidy /tmp/x", execution_id=EXECUTION_ID)
    while result.status == "suspended":
        result = await rt.resume(EXECUTION_ID, result.gates[0].gate_id, loom.ApprovalDecision(approved=True))
    assert result.status == "completed", result
    return journal.read(EXECUTION_ID)


async def record_edited() -> list[Event]:
    """Run the golden agent, approving the delete with edited arguments, and return its events."""
    journal = InMemoryJournal()
    rt = make_runtime(journal)
    result = await rt.start(make_agent().flow_name, "Tidy /tmp/x", execution_id=EDITED_EXECUTION_ID)
    while result.status == "suspended":
        decision = loom.ApprovalDecision(
            approved=True, arguments=EDITED_ARGUMENTS, digest=digest_value(EDITED_ARGUMENTS)
        )
        result = await rt.resume(EDITED_EXECUTION_ID, result.gates[0].gate_id, decision)
    assert result.status == "completed", result
    return journal.read(EDITED_EXECUTION_ID)


def load(which: Path | int = 1) -> InMemoryJournal:
    """An ``InMemoryJournal`` holding the golden agent journal of event format ``which`` (or the file
    at the path ``which``)."""
    from tests.kernel import golden_flows

    return golden_flows.load(which if isinstance(which, Path) else GOLDENS[which])


if __name__ == "__main__":
    # Launched by path: the repository root goes on ``sys.path`` so ``tests.kernel.golden_flows`` imports.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kernel import golden_flows

    args = sys.argv[1:]
    event_format = int(args[args.index("--format") + 1]) if "--format" in args else 1
    edited = "--write-edited" in args
    text = "\n".join(golden_flows.to_lines(asyncio.run(record_edited() if edited else record(event_format)))) + "\n"
    if edited:
        GOLDEN_EDITED.write_text(text, encoding="utf-8")
    elif "--write" in args:
        GOLDENS[event_format].write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
