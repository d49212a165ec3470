"""The tool calls of a run as its journal holds them, and the arguments each ran with.

This module is the one owner of the rule "the arguments that ran": a person's edit of an approved
call (the approval gate's answer ``arguments``), else the model's. The live view's rows and cards,
the timeline and the trace spans read it here; the analysis ``tool_calls`` view computes the same in
SQL, and a test compares the two over the same journals.

A call whose arguments the loop rejected before any step or gate (not a JSON object, refused by the
tool's schema, an unknown tool) is ``invalid``: its ``error`` is the tool message the model read
instead, journaled in the input of the next model node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loom_nb.journal import step_ids
from loom_nb.journal.run_state import GateState, RunState, StepState


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call a model asked for, as the journal holds it.

    Attributes:
        step_id: Its tool step's id (``#turn:<i>:tool:<j>``), whether or not the step ran.
        turn: The turn.
        index: The call's index in the model's answer.
        name: The tool's name.
        call_id: The provider's id of the call.
        requested: The arguments the model asked for.
        arguments: The arguments that ran (or run once approved): the edited ones when a person
            edited them, else ``requested``.
        edited: True when a person approved the call with other arguments.
        answered_at: When its approval gate was answered, if it has one that was.
        invalid: For a call rejected before it could run or wait at a gate: the error the model
            read instead; else None.
        waited: Seconds its tool step waited at in-doubt gates for a person's answer (part of the
            step's span in the journal, not the tool's own time).
    """

    step_id: str
    turn: int
    index: int
    name: str
    call_id: str | None
    requested: Any
    arguments: Any
    edited: bool = False
    answered_at: float | None = None
    invalid: str | None = None
    waited: float = 0.0


def ran_arguments(requested: Any, answer: Any) -> tuple[Any, bool]:
    """The arguments a call runs with, given its approval gate's answer (None while unanswered):
    ``(the edited arguments, True)`` for an approval with arguments, else ``(requested, False)``."""
    if isinstance(answer, dict) and answer.get("approved") is True and isinstance(answer.get("arguments"), dict):
        edited = answer["arguments"]
        return edited, edited != requested
    return requested, False


def tool_calls(state: RunState) -> list[ToolCallRecord]:
    """Every tool call of the run, in turn and call order: each turn's calls are those of its last
    answered model call (a retried or elevated model call's earlier answers are not the turn's)."""
    found: list[ToolCallRecord] = []
    told = _told_errors(state)
    for turn, node in sorted(_answering_nodes(state).items()):
        output = node.output if isinstance(node.output, dict) else {}
        message = output.get("message") if isinstance(output.get("message"), dict) else {}
        for j, raw in enumerate((message or {}).get("tool_calls") or ()):
            call = raw if isinstance(raw, dict) else {}
            found.append(_record(state, turn, j, call, told.get(node.step_id, {}), node.step_id))
    return found


def tool_call(state: RunState, step_id: str) -> ToolCallRecord | None:
    """The call the tool step ``step_id`` answers (None when the journal holds no model answer
    with that call yet)."""
    where = step_ids.parse_step_id(step_id)
    if where.turn is None or where.tool_index is None:
        return None
    # the turn's last answered model step: steps are kept in the order of their first event
    node = next(
        (
            s
            for s in reversed(state.steps.values())
            if s.kind == step_ids.MODEL_KIND and s.turn == where.turn and s.completed
        ),
        None,
    )
    output = node.output if node is not None and isinstance(node.output, dict) else {}
    message = output.get("message") if isinstance(output.get("message"), dict) else {}
    calls = (message or {}).get("tool_calls") or ()
    if node is None or where.tool_index >= len(calls):
        return None
    call = calls[where.tool_index] if isinstance(calls[where.tool_index], dict) else {}
    return _record(state, where.turn, where.tool_index, call, None, node.step_id)


def _record(
    state: RunState, turn: int, j: int, call: dict[str, Any], told: dict[str, str] | None, node: str
) -> ToolCallRecord:
    sid = step_ids.tool_step_id(turn, j)
    gate: GateState | None = state.gates.get(step_ids.approval_gate_id(turn, j))
    requested = call.get("arguments")
    answer = gate.resolution if gate is not None and gate.resolved else None
    arguments, edited = ran_arguments(requested, answer)
    call_id = call.get("id")
    step = state.steps.get(sid)
    invalid = None
    if step is None and gate is None and isinstance(call_id, str):
        invalid = (told if told is not None else _told_errors(state).get(node, {})).get(call_id)
    return ToolCallRecord(
        step_id=sid,
        turn=turn,
        index=j,
        name=str(call.get("name", "")),
        call_id=call_id if isinstance(call_id, str) else None,
        requested=requested,
        arguments=arguments,
        edited=edited,
        answered_at=gate.resolved_at if gate is not None and gate.resolved else None,
        invalid=invalid,
        waited=gate_wait(state, sid),
    )


def gate_wait(state: RunState, step_id: str) -> float:
    """Seconds the step ``step_id`` waited at its answered in-doubt gates (from opening to answer)."""
    waited = 0.0
    for gate in state.gates.values():
        answered = gate.resolved_at is not None and gate.subject == step_id
        if answered and gate.resolved_at is not None and step_ids.parse_step_id(gate.gate_id).kind == step_ids.IN_DOUBT:
            waited += max(gate.resolved_at - gate.opened_at, 0.0)
    return waited


def _answering_nodes(state: RunState) -> dict[int, StepState]:
    """Each turn's last answered model step (the one whose calls the turn's tool steps answer)."""
    nodes: dict[int, StepState] = {}
    for step in state.steps.values():
        if step.kind == step_ids.MODEL_KIND and step.turn is not None and step.completed:
            held = nodes.get(step.turn)
            if held is None or step.seq > held.seq:
                nodes[step.turn] = step
    return nodes


def _told_errors(state: RunState) -> dict[str, dict[str, str]]:
    """The error tool messages each transcript node's successors add: ``{node: {call id: text}}``."""
    told: dict[str, dict[str, str]] = {}
    for step in state.steps.values():
        record = step.input
        if not step_ids.is_transcript_node(step.step_id) or not isinstance(record, dict):
            continue
        prev = record.get("prev")
        if not isinstance(prev, str):
            continue
        for item in record.get("add") or ():
            msg = item.get("msg") if isinstance(item, dict) else None
            if not isinstance(msg, dict) or msg.get("role") != "tool" or msg.get("is_error") is not True:
                continue
            if isinstance(msg.get("tool_call_id"), str):
                told.setdefault(prev, {}).setdefault(msg["tool_call_id"], str(msg.get("text", "")))
    return told
