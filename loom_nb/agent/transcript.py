"""How the loop journals its transcript as deltas, and how any turn's request is rebuilt.

Each model turn (``#turn:<i>``) and each compaction (``#turn:<i>:compact``) is a *node*. A node's
journaled input (its ``record=``) is a delta, never the whole transcript::

    {"prev": "<previous node>" | null,
     "add": [{"ref": "<model step>"},        # that step's assistant message (its output)
             {"tool": "<tool step>"},         # that tool step's output as a tool message
             {"msg": {...}},                  # a message no step holds (user input, refusal, error)
             {"carry": {"execution": e, "node": n}}],  # a session's earlier run: its conversation
     "extra": [{...}],                        # this turn only: skill / memory system messages
     "tools": [{...}],                        # tool specs, on the first model node
     "keep": k,                               # compaction nodes: messages kept after the summary
     "keep_rule": 2}                          # compaction nodes: the kept-suffix rule (compaction.py)

Every message is journaled once, so the log grows linearly with the conversation. The request
any turn sent is a pure fold over the journal: ``rebuild_requests(events)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.events import Event, EventKind
from loom_nb.messages import ImageRef, Message, ModelResponse, ToolCall, ToolSpec

SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"


def tool_result_text(output: Any) -> str:
    """How a tool's output is shown to the model: strings as they are, anything else as JSON."""
    return output if isinstance(output, str) else canonical_json(output)


def tool_message(call: ToolCall, output: Any, *, tainted: bool) -> Message:
    """The tool message for a successful call: its output as text, and the images it holds by
    reference (``result_images``), which a provider that takes images sends as image content."""
    message = Message.tool(call, tool_result_text(output), tainted=tainted)
    images = result_images(output)
    return message.model_copy(update={"images": images}) if images else message


def result_images(output: Any) -> tuple[ImageRef, ...]:
    """The images in a tool's output: each ``{"type": "image", "mime_type": "image/...", "ref",
    "size"}`` block of its ``content`` list (the shape an MCP image block is recorded in)."""
    content = output.get("content") if isinstance(output, dict) else None
    if not isinstance(content, list):
        return ()
    return tuple(
        ImageRef(ref=block["ref"], mime_type=block["mime_type"], size=int(block.get("size") or 0))
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "image"
        and isinstance(block.get("ref"), str)
        and isinstance(block.get("mime_type"), str)
        and block["mime_type"].startswith("image/")
    )


def summary_message(summary: ModelResponse, *, tainted: bool = False) -> Message:
    """The message a compaction's summary becomes."""
    return Message(role="user", text=SUMMARY_PREFIX + summary.message.text, tainted=tainted)


def system_prefix_len(messages: Sequence[Message]) -> int:
    """How many messages at the start are system messages."""
    n = 0
    while n < len(messages) and messages[n].role == "system":
        n += 1
    return n


def with_extras(messages: Sequence[Message], extras: Sequence[Message]) -> tuple[Message, ...]:
    """Insert this turn's extra system messages after the system prefix."""
    if not extras:
        return tuple(messages)
    n = system_prefix_len(messages)
    return (*messages[:n], *extras, *messages[n:])


def fold(messages: Sequence[Message], summary: Message, keep: int) -> list[Message]:
    """The transcript after a compaction: system prefix, summary, the newest ``keep`` messages."""
    n = system_prefix_len(messages)
    rest = messages[n:]
    return [*messages[:n], summary, *rest[len(rest) - keep :]]


class RebuiltRequest:
    """What one model node sent.

    Attributes:
        step_id: The node.
        messages: The messages, exactly as the model was sent them (before the guard).
        tools: The tool specs.
    """

    def __init__(self, step_id: str, messages: tuple[Message, ...], tools: tuple[ToolSpec, ...]) -> None:
        self.step_id = step_id
        self.messages = messages
        self.tools = tools

    def __repr__(self) -> str:
        return f"RebuiltRequest({self.step_id!r}, {len(self.messages)} messages)"


#: Resolves a session's carry item: the conversation of ``execution`` as it stood after ``node``.
Carry = Callable[[str, str], Sequence[Message]]


def rebuild_requests(events: Iterable[Event], *, carry: Carry | None = None) -> dict[str, RebuiltRequest]:
    """Rebuild, from the journal alone, the request every model node of one execution sent.

    A session's run starts from an earlier run's conversation (a ``carry`` item): pass ``carry``
    (``loom_nb.agent.carry.journal_carry(journal)``) to resolve it."""
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    tainted: dict[str, bool] = {}
    order: list[str] = []
    for e in events:
        sid = e.step_id or ""
        if e.kind == EventKind.STEP_STARTED and sid not in inputs:
            inputs[sid] = e.data.get("input")
            if step_ids.is_transcript_node(sid):
                order.append(sid)
        elif e.kind == EventKind.STEP_COMPLETED:
            outputs[sid] = e.data.get("output")
            tainted[sid] = bool(e.data.get("tainted"))
    state: dict[str, list[Message]] = {}
    calls: dict[str, tuple[ToolCall, ...]] = {}
    sent: dict[str, RebuiltRequest] = {}
    tools: tuple[ToolSpec, ...] = ()
    for sid in order:
        rec = inputs[sid]
        if not isinstance(rec, dict) or "add" not in rec:
            continue
        prev = rec.get("prev") or ""
        base = list(state.get(prev, []))
        items = list(rec["add"])
        if step_ids.is_model_node(prev) and not (items and items[0] == {"ref": prev}):
            items.insert(0, {"ref": prev})  # event format 2: the previous model node's message is implied
        for item in items:
            if "msg" in item:
                base.append(Message.model_validate(item["msg"]))
            elif "ref" in item:
                message = ModelResponse.model_validate(outputs[item["ref"]]).message
                calls[item["ref"]] = message.tool_calls
                base.append(message)
            elif "carry" in item:
                ref = item["carry"]
                if carry is None:
                    raise UsageError(
                        f"node {sid!r} carries the conversation of execution {ref.get('execution')!r} (a session): "
                        "pass carry=loom_nb.agent.carry.journal_carry(journal) to rebuild it"
                    )
                base.extend(carry(str(ref["execution"]), str(ref["node"])))
            elif "tool" in item:
                tool_sid = item["tool"]
                if isinstance(tool_sid, int):  # event format 2: call j of the model node ``prev``
                    tool_sid = step_ids.tool_step_id(step_ids.parse_step_id(prev).turn or 0, tool_sid)
                tool = step_ids.parse_step_id(tool_sid)
                assert tool.turn is not None and tool.tool_index is not None, tool_sid
                call = _call_for(calls, tool.turn, tool.tool_index)
                base.append(tool_message(call, outputs[tool_sid], tainted=tainted.get(tool_sid, False)))
        if "tools" in rec:
            tools = tuple(ToolSpec.model_validate(t) for t in rec["tools"])
        if step_ids.is_compaction(sid):
            if sid in outputs:
                summary = ModelResponse.model_validate(outputs[sid])
                keep = int(rec["keep"])
                # As the loop does: a summary of tainted messages is itself tainted.
                tainted_fold = any(m.tainted for m in base[system_prefix_len(base) : len(base) - keep])
                state[sid] = fold(base, summary_message(summary, tainted=tainted_fold), keep)
            continue
        state[sid] = base
        extras = [Message.model_validate(m) for m in rec.get("extra", ())]
        sent[sid] = RebuiltRequest(sid, with_extras(base, extras), tools)
    return sent


def _call_for(calls: dict[str, tuple[ToolCall, ...]], turn: int, j: int) -> ToolCall:
    # Tool step j of turn i answers call j of the last model node of turn i.
    for sid in reversed(list(calls)):
        node = step_ids.parse_step_id(sid)
        if node.kind == step_ids.MODEL and node.turn == turn:
            return calls[sid][j]
    raise KeyError(f"no model step of {step_ids.turn_id(turn)} holds tool call {j}")
