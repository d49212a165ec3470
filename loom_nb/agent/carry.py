"""A session's runs continue one conversation: the carry item and its resolution from the journal.

A run in a session (``Agent.session``) gets the input ``{"message": ..., "session": {"id", "previous",
"index"}}``. Its first transcript node does not copy the earlier runs' messages: it journals one
*carry item*, ``{"carry": {"execution": <previous run>, "node": <its last model node>}}``, which
stands for the previous run's conversation as it stood after that node answered (its messages
without the system prompt, the node's answer, and the results of any tool calls of that answer).
That conversation is itself rebuilt from the previous run's events, and so on back to the
session's first run, so every message of a session is journaled once and the log stays linear
across runs. Earlier runs are finished, so the resolution is the same on every re-run of the body.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from loom_nb.agent.output import FINAL_RESULT_TOOL
from loom_nb.agent.transcript import (
    Carry,
    rebuild_requests,
    system_prefix_len,
    tool_message,
)
from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.store import JournalStore
from loom_nb.messages import Message, ModelResponse

#: The text a carried conversation holds for a tool call its run never answered (it ended first).
UNANSWERED_CALL = "Error: this tool call was not run: the run ended (max_turns) before it could."

#: The text a carried conversation holds for the ``final_result`` call a typed run ended with.
ACCEPTED_ANSWER = "The final answer was accepted."

#: Conversations already rebuilt, per journal, by ``(execution, node)``. Only finished runs are
#: cached: their events never change, so a session's next run resolves its carry from here instead
#: of reading every earlier run again.
_RESOLVED: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], list[Message]]] = weakref.WeakKeyDictionary()
_FINISHED = (EventKind.EXECUTION_COMPLETED, EventKind.EXECUTION_FAILED)


def session_of(input: Any) -> dict[str, Any] | None:
    """The ``session`` part of an agent run's input (``{"id", "previous", "index"}``), or None."""
    if isinstance(input, dict) and isinstance(input.get("session"), dict):
        return dict(input["session"])
    return None


def carry_item(execution_id: str, node: str) -> dict[str, Any]:
    """The transcript delta item that stands for ``execution_id``'s conversation after ``node``."""
    return {"carry": {"execution": execution_id, "node": node}}


def last_model_node(events: Sequence[Event]) -> str | None:
    """The last model node of an execution that completed (the node a next run carries)."""
    node: str | None = None
    for e in events:
        if e.kind == EventKind.STEP_COMPLETED and step_ids.is_model_node(e.step_id or ""):
            node = e.step_id
    return node


def conversation(journal: JournalStore, execution_id: str, node: str) -> list[Message]:
    """``execution_id``'s conversation after ``node`` answered, without the system prompt: what a
    carry item stands for. Rebuilt from the journal alone (earlier carries resolved in turn)."""
    try:
        cache = _RESOLVED.setdefault(journal, {})
    except TypeError:  # a journal that cannot be weakly referenced: no cache
        cache = {}
    hit = cache.get((execution_id, node))
    if hit is not None:
        return list(hit)
    events = journal.read(execution_id)
    if not events:
        raise UsageError(f"a session run carries execution {execution_id!r}, which the journal does not hold")
    requests = rebuild_requests(events, carry=journal_carry(journal))
    request = requests.get(node)
    outputs = {e.step_id: e for e in events if e.kind == EventKind.STEP_COMPLETED}
    if request is None or node not in outputs:
        raise UsageError(f"a session run carries node {node!r} of execution {execution_id!r}, which did not answer")
    sent = list(request.messages)
    # The system prefix: the prompt and this turn's extra system messages (skills, memory); the next
    # run sends its own.
    messages = sent[system_prefix_len(sent) :]
    answer = ModelResponse.model_validate(outputs[node].data.get("output")).message
    messages.append(answer)
    turn = step_ids.parse_step_id(node).turn
    for j, call in enumerate(answer.tool_calls):
        done = outputs.get(step_ids.tool_step_id(turn or 0, j))
        if done is not None:
            messages.append(tool_message(call, done.data.get("output"), tainted=bool(done.data.get("tainted"))))
        elif call.name == FINAL_RESULT_TOOL:
            # A typed run ends at its final_result call, which no step answers (6.15): it was the answer.
            messages.append(Message.tool(call, ACCEPTED_ANSWER))
        else:
            messages.append(Message.tool(call, UNANSWERED_CALL, is_error=True))
    if events[-1].kind in _FINISHED:
        cache[(execution_id, node)] = messages
    return list(messages)


def journal_carry(journal: JournalStore) -> Carry:
    """A ``rebuild_requests(carry=...)`` resolver that reads earlier runs from ``journal``."""

    def resolve(execution_id: str, node: str) -> list[Message]:
        return conversation(journal, execution_id, node)

    return resolve


def carried(journal: JournalStore, input: Any) -> tuple[list[Message], dict[str, Any]] | None:
    """For a session run's ``input``: the previous run's conversation and the carry item that stands
    for it in the first node; None for a run with no previous run (or outside a session)."""
    session = session_of(input)
    previous = session.get("previous") if session else None
    if not previous:
        return None
    node = last_model_node(journal.read(str(previous)))
    if node is None:
        raise UsageError(
            f"session {session['id']!r}: the previous run {previous!r} has no model answer to continue from"  # type: ignore[index]
        )
    return conversation(journal, str(previous), node), carry_item(str(previous), node)
