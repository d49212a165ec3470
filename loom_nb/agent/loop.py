"""``agent_loop``: the durable ReAct loop as an ordinary function over ``FlowContext``.

Each model turn is the step ``#turn:<i>``, each tool call ``#turn:<i>:tool:<j>``; approvals are
gates ``#turn:<i>:tool:<j>:approval`` opened together before any of the turn's effects run;
skills, recall and routing are decisions ``#turn:<i>:skills|recall|route``; a compaction is the
step ``#turn:<i>:compact``. All ids are pure functions of journaled values, so a recovered run
re-derives them and is served every completed step from the log.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

from loom_nb.agent.bounds import AnswerBound, answer_too_large, too_many_calls
from loom_nb.agent.carry import carried, session_of
from loom_nb.agent.chunking import chunk_deltas
from loom_nb.agent.compaction import BACKWARD_RULE, keep_rule_of, whole_calls
from loom_nb.agent.config import (
    APPROVAL_GATE,
    AgentConfig,
    AgentResult,
    ApprovalDecision,
    Routes,
)
from loom_nb.agent.cut_answers import GO_ON, answer_cut, cut_reason
from loom_nb.agent.output import TypedAnswers
from loom_nb.agent.transcript import (
    fold,
    result_images,
    summary_message,
    system_prefix_len,
    tool_message,
    tool_result_text,
    with_extras,
)
from loom_nb.effects.claimcheck import contains_envelope
from loom_nb.errors import (
    ClaimCheckError,
    FlowNotFoundError,
    JournalError,
    NonDeterminismError,
    NotAuthorizedError,
    QuotaExceededError,
    RecordedError,
    ToolArgumentsError,
    UsageError,
)
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json, to_jsonable
from loom_nb.journal.event_format import FORMAT_1
from loom_nb.kernel.decisions import Decision
from loom_nb.kernel.flow_context import FlowContext
from loom_nb.kernel.gates import GateRequest
from loom_nb.messages import Message, ModelRequest, ModelResponse, ToolCall, Transcript, Usage, refusal_reason

SUMMARIZE_INSTRUCTION = (
    "Summarize the conversation below for your own later use: keep every fact, decision, open "
    "question and tool result that may matter. Answer with the summary only."
)
#: Errors from a tool call that end the run instead of going back to the model. A journal error
#: (a failed commit, a replay that differs from the record) is never data: it stops the run.
FATAL_TOOL_ERRORS = (NotAuthorizedError, QuotaExceededError, JournalError)


class TranscriptGrowthWarning(UserWarning):
    """An uncompacted agent transcript passed ``warn_transcript_bytes``."""


def _user_text(input: Any) -> str:
    if isinstance(input, str):
        return input
    if isinstance(input, dict) and isinstance(input.get("message"), str):
        return str(input["message"])
    raise ToolArgumentsError("agent_loop input must be the user's message (a string) or {'message': '...'}")


def _msg(m: Message) -> dict[str, Any]:
    return {"msg": m.model_dump(mode="json", exclude_defaults=True)}


class _Turn:
    """Mutable loop state that is a pure function of journaled values."""

    def __init__(
        self, config: AgentConfig, text: str, carry: tuple[list[Message], dict[str, Any]] | None = None
    ) -> None:
        first = [Message.system(config.system)] if config.system else []
        self.pending: list[dict[str, Any]] = [_msg(m) for m in first]
        if carry is not None:  # a session's earlier runs: journaled by reference (agent/carry.py)
            first.extend(carry[0])
            self.pending.append(carry[1])
        first.append(Message.user(text))
        self.pending.append(_msg(first[-1]))
        self.transcript = Transcript(first)
        self.prev: str | None = None
        #: Event format 2 records a turn's additions shorter: the previous model node's message is
        #: implied by ``prev`` and a tool result is ``{"tool": j}`` (``transcript.rebuild_requests``).
        self.short = False
        self.tools_sent = False
        self.usage = Usage()
        self.cut_text = ""  # a cut answer's parts the model was asked to go on from (``cut_answers``)


async def agent_loop(ctx: FlowContext, config: AgentConfig, input: Any) -> AgentResult[Any]:
    """Run the agent to an answer (or ``max_turns``), one durable step per model turn and tool call.

    Args:
        ctx: The execution context of the flow calling it.
        config: The agent's configuration.
        input: The user's message (a string, or ``{"message": ...}``; a session run adds
            ``"session": {"id", "previous", "index"}`` and continues the previous run's conversation).

    Returns:
        The final text, the stop reason, the turns taken and the usage.
    """
    # Only a session run with a previous run reads the journal (an opaque agent_step has no runtime).
    carry = carried(ctx.runtime.journal, input) if session_of(input) is not None else None
    state = _Turn(config, _user_text(input), carry)
    out = config.output
    state.short = ctx.event_format > FORMAT_1
    specs = [t.spec for t in config.tools]
    if out is not None and out.tool_spec is not None:
        specs.append(out.tool_spec)
    answers = TypedAnswers(ctx.execution_id, out) if out is not None else None
    last_text = ""
    for turn in range(config.max_turns):
        await ctx.boundary()  # a stop asked for "after this turn" (Run.cancel(when="after_turn")) lands here
        await _maybe_compact(ctx, config, state, turn)
        _maybe_warn(ctx, config, state)
        extras = await _turn_extras(ctx, config, state, turn)
        # Built without validating again: every message already is a validated ``Message`` (validating
        # the whole transcript each turn would make a long run's turns slower and slower).
        request = ModelRequest.model_construct(
            messages=with_extras(state.transcript.messages, extras),
            tools=tuple(specs),
            output=out.format if out is not None else None,
        )
        record: dict[str, Any] = {"prev": state.prev, "add": state.pending}
        if extras:
            record["extra"] = [m.model_dump(mode="json", exclude_defaults=True) for m in extras]
        if not state.tools_sent:
            record["tools"] = [s.model_dump(mode="json") for s in specs]
            if out is not None:
                record["output"] = out.record()
            state.tools_sent = True
        node, response = await _call_model(ctx, config, request, record, turn)
        state.usage = state.usage + response.usage
        message = response.message
        state.transcript.append(message)
        state.pending = [] if state.short else [{"ref": node}]
        state.prev = node
        last_text = message.text
        if answers is not None:
            verdict = answers.check(response, node)
            if verdict is not None and verdict.final:
                return AgentResult(
                    output=verdict.value,
                    stop_reason="end_turn",
                    turns=turn + 1,
                    usage=state.usage,
                    tainted=_tainted(state),
                )
            if verdict is not None:
                for m in verdict.retry:
                    state.transcript.append(m)
                    state.pending.append(_msg(m))
                continue
        if not message.tool_calls:
            cut = cut_reason(response)
            if cut is not None and config.when_cut == "fail":
                raise answer_cut(ctx.execution_id, node, cut)
            if cut == "max_tokens" and config.when_cut == "continue" and turn + 1 < config.max_turns:
                state.cut_text += message.text  # the answer so far: the next turn goes on from it
                state.transcript.append(GO_ON)
                state.pending.append(_msg(GO_ON))
                continue
            return _final(response, turns=turn + 1, usage=state.usage, tainted=_tainted(state), before=state.cut_text)
        outcomes = await _run_tools(ctx, config, message.tool_calls, turn, node)
        for j, (call, (kind, payload)) in enumerate(zip(message.tool_calls, outcomes, strict=True)):
            if kind == "tool":
                tool = config.tool(call.name)
                state.transcript.append(tool_message(call, payload, tainted=bool(tool and not tool.trusted)))
                state.pending.append({"tool": j} if state.short else {"tool": step_ids.tool_step_id(turn, j)})
            else:
                state.transcript.append(payload)
                state.pending.append(_msg(payload))
    if answers is not None:
        answers.out_of_turns(config.max_turns)
    return AgentResult(
        output=last_text, stop_reason="max_turns", turns=config.max_turns, usage=state.usage, tainted=_tainted(state)
    )


def _tainted(state: _Turn) -> bool:
    """Whether the conversation the answer was made from holds untrusted content (6.9)."""
    return any(m.tainted for m in state.transcript.messages)


def _final(response: ModelResponse, *, turns: int, usage: Usage, tainted: bool, before: str = "") -> AgentResult[str]:
    """The run's result from its last response (``before``: the parts of a cut answer it continues)."""
    message = response.message
    if message.refusal is not None or response.finish_reason == "refusal":
        output = message.text if message.refusal is None else message.refusal
        return AgentResult(output=output, stop_reason="refusal", turns=turns, usage=usage, tainted=tainted)
    cut = cut_reason(response)
    return AgentResult(
        output=before + message.text, stop_reason=cut or "end_turn", turns=turns, usage=usage, tainted=tainted
    )


async def _call_model(
    ctx: FlowContext, config: AgentConfig, request: ModelRequest, record: dict[str, Any], turn: int
) -> tuple[str, ModelResponse]:
    routes = config.routes
    if routes is None:
        assert config.model is not None
        node = step_ids.turn_id(turn)
        return node, await _model_step(ctx, config, config.model, request, record, node)
    policy = _route_policy(routes, request, turn)
    model_id = await ctx.decide(step_ids.turn_decision_id(turn, step_ids.ROUTE), list(routes.models), policy)
    if model_id not in routes.models:
        raise UsageError(
            f"the route policy {routes.name!r} chose {model_id!r} at turn {turn}, which is not one of "
            f"Routes.models {list(routes.models)}: return one of them (or a Decision whose choice is one)"
        )
    node = step_ids.turn_id(turn)
    response = await _model_step(ctx, config, str(model_id), request, record, node)
    level = 0
    while routes.elevate is not None and routes.elevate(response, turn):
        stronger = list(routes.models)[list(routes.models).index(model_id) + 1 :]
        if not stronger:
            break
        level += 1
        model_id = await ctx.decide(step_ids.route_elevate_id(turn, level), stronger, _elevation_policy)
        node = step_ids.elevated_id(turn, level)
        response = await _model_step(ctx, config, str(model_id), request, record, node)
    return node, response


def _elevation_policy(options: Sequence[Any]) -> Decision:
    return Decision(choice=options[0], propensity=1.0)


def _route_policy(routes: Routes, request: ModelRequest, turn: int) -> Any:
    def policy(options: Sequence[Any]) -> Any:
        return routes.policy([str(o) for o in options], request, turn)

    policy.__qualname__ = routes.name
    return policy


async def _model_step(
    ctx: FlowContext,
    config: AgentConfig,
    model_id: str,
    request: ModelRequest,
    record: dict[str, Any],
    node: str,
) -> ModelResponse:
    chunker = None
    if config.stream:
        # To the journal as the step's stream (its output holds the text: event format 2 keeps no
        # copy). A partial, not a closure: that would make ``ctx`` and ``node`` cells at every step.
        chunker = chunk_deltas(partial(ctx.stream, step_id=node), min_chars=config.chunk_min_chars)
    # The bound fails the step once its streamed text passes max_answer_chars (agent/bounds.py).
    sink = AnswerBound(config.max_answer_chars, ctx.execution_id, node, chunker)
    live = not ctx.recorded(node)
    # The chunker only makes the step's held text (its output holds it once it completes): it may
    # be fed late, and not at all for an attempt that completes unobserved (``defer_deltas``).
    output = await ctx.execute(
        model_id, request, step_id=node, record=record, on_delta=sink, defer_deltas=True, owner=config.owner
    )
    if chunker is not None:
        chunker.flush()
    if live and sink.seen <= config.max_answer_chars:
        # An answer that came whole (or was not fed to the sink): checked now. A recorded answer
        # is not checked again, so a run recorded under a larger limit replays as recorded.
        text = output.get("message", {}).get("text") if isinstance(output, dict) else None
        if isinstance(text, str) and len(text) > config.max_answer_chars:
            raise answer_too_large(ctx.execution_id, node, config.max_answer_chars, len(text))
    if contains_envelope(output):
        raise ClaimCheckError(
            f"the model effect {model_id!r} returned a claim-check envelope at step {node!r}: a model result "
            "must reach the loop whole. Remove it from claim_check.tool_ids."
        )
    return ModelResponse.model_validate(output)


async def _turn_extras(ctx: FlowContext, config: AgentConfig, state: _Turn, turn: int) -> list[Message]:
    extras: list[Message] = []
    if config.skills and config.skill_selector is not None:
        names = [s.name for s in config.skills]
        chosen = await ctx.decide(step_ids.turn_decision_id(turn, step_ids.SKILLS), names, config.skill_selector)
        picked = chosen if isinstance(chosen, list) else [chosen]
        for skill in config.skills:
            if skill.name in picked:
                extras.append(Message.system(f"Skill {skill.name}: {skill.instructions}"))
    if config.memory is not None:
        query = " ".join(m.text for m in state.transcript.messages if m.role == "user")[-2000:]
        recalled = await ctx.decide(
            step_ids.turn_decision_id(turn, step_ids.RECALL),
            list(config.memory.items),
            config.memory.policy(query, config.recall_limit),
        )
        items = list(recalled)[: config.recall_limit] if isinstance(recalled, list) else []
        if items:
            extras.append(Message.system("Relevant memory:\n" + "\n".join(f"- {m}" for m in items)))
    return extras


def _kept_suffix_by_bytes(sizes: Sequence[int], budget: float, keep_recent: int) -> int:
    kept, total = 0, 0
    for size in reversed(sizes):
        if kept >= keep_recent or (kept >= 1 and total + size > budget):
            break
        kept += 1
        total += size
    return max(kept, 1)


async def _maybe_compact(ctx: FlowContext, config: AgentConfig, state: _Turn, turn: int) -> None:
    compaction = config.compaction
    if compaction is None:
        return
    messages = state.transcript.messages
    n_sys = system_prefix_len(messages)
    rest = len(messages) - n_sys
    keep: int | None = None
    sizes = state.transcript.sizes[n_sys:]
    # Only what a fold can remove counts toward the byte trigger: a system prompt larger than
    # after_bytes would otherwise ask for a summary every turn while folding nothing of it.
    foldable = state.transcript.nbytes - sum(state.transcript.sizes[:n_sys])
    if compaction.after_bytes is not None and foldable > compaction.after_bytes:
        keep = _kept_suffix_by_bytes(sizes, compaction.after_bytes / 2, compaction.keep_recent)
        if keep >= rest:
            keep = None  # the suffix is the whole transcript: folding would summarise nothing
    if keep is None and compaction.after_messages is not None and rest > compaction.after_messages:
        keep = min(compaction.keep_recent, rest)
        if keep >= rest:
            keep = None
    if keep is None:
        return
    # Never keep a tool result without the assistant message that called it: providers refuse a
    # request whose tool results answer no call. The rule a recorded node was made with applies again.
    node = step_ids.compaction_id(turn)
    rule = keep_rule_of(ctx.recorded_input(node), step_id=node)
    keep = whole_calls([m.role for m in messages[n_sys:]], keep, rule=rule)
    if keep >= rest:
        return
    folded = messages[n_sys : len(messages) - keep]
    request = ModelRequest(messages=(Message.system(SUMMARIZE_INSTRUCTION), *folded))
    record: dict[str, Any] = {"prev": state.prev, "add": state.pending, "keep": keep}
    if rule != BACKWARD_RULE:
        record["keep_rule"] = rule
    output = await ctx.execute(compaction.effect_id, request, step_id=node, record=record, owner=config.owner)
    if contains_envelope(output):
        raise ClaimCheckError(
            f"the compaction effect {compaction.effect_id!r} returned a claim-check envelope; remove it "
            "from claim_check.tool_ids"
        )
    summary = ModelResponse.model_validate(output)
    tainted = any(m.tainted for m in folded)
    state.transcript.replace(fold(messages, summary_message(summary, tainted=tainted), keep))
    state.pending = []
    state.prev = node


def _maybe_warn(ctx: FlowContext, config: AgentConfig, state: _Turn) -> None:
    limit = config.warn_transcript_bytes
    if limit is False or config.compaction is not None or state.transcript.nbytes <= limit:
        return
    message = (
        f"execution {ctx.execution_id}: the agent transcript is {state.transcript.nbytes:,} bytes, past "
        f"warn_transcript_bytes={limit:,}, and nothing compacts it: every model call sends it whole. "
        "Set compaction=loom.Compaction(...), or warn_transcript_bytes=False to silence this."
    )
    if ctx.warn("transcript_bytes", message, bytes=state.transcript.nbytes, limit=limit):
        warnings.warn(message, TranscriptGrowthWarning, stacklevel=3)


def _failure(exc: BaseException) -> str:
    """``Type: message`` of a tool failure, the same live and when rebuilt from the journal (where a
    type no module defines comes back as ``RecordedError``): it is part of the next turn's input."""
    if isinstance(exc, RecordedError) and exc.type_name:
        qualname = exc.type_name.rpartition(":")[2]
        return f"{qualname.rpartition('.')[2]}: {str(exc).removeprefix(exc.type_name + ': ')}"
    return f"{type(exc).__name__}: {exc}"


#: What the model reads before the result of a call a person edited before approving it.
EDITED_NOTE = "Note: a person edited this call before approving it; it ran with the arguments {arguments}.\n"


def _refusal(config: AgentConfig, call: ToolCall, decision: ApprovalDecision) -> str:
    rule = config.refusal_text
    if callable(rule):
        return rule(call, decision)
    reason = f" Reason: {decision.reason}" if decision.reason else ""
    return rule.format(tool=call.name, reason=reason)


def _waits_for_approval(ctx: FlowContext, config: AgentConfig, call: ToolCall, turn: int, j: int) -> bool:
    """Whether call ``j`` of ``turn`` waits at an approval gate: as recorded when the journal holds
    its gate (the person's answer is served whatever the rules say now); else as the rules say. A
    rule that now gates a call that already ran is non-determinism, never a gate for what is done."""
    if ctx.recorded(step_ids.approval_gate_id(turn, j)):
        return True
    tool = config.tool(call.name)
    rule = tool is not None and (
        tool.requires_approval(call, turn) or (config.needs_approval is not None and config.needs_approval(call, turn))
    )
    step = step_ids.tool_step_id(turn, j)
    if rule and ctx.recorded(step):
        raise NonDeterminismError(
            f"execution {ctx.execution_id!r}, step {step!r}: the approval rules now gate this call to "
            f"{call.name!r}, which ran without a gate when the run was recorded. The rules changed since "
            "the run started: restore the old rule to go on, or fork the run at this step (or start a "
            "new one) to apply the new rule."
        )
    return rule


async def _run_one(
    ctx: FlowContext,
    config: AgentConfig,
    calls: Sequence[ToolCall],
    turn: int,
    node: str,
    edited: dict[int, dict[str, Any]],
    outcomes: list[tuple[str, Any] | None],
    j: int,
) -> None:
    """Run the approved call ``j`` of ``_run_tools`` and put its outcome in ``outcomes[j]`` (a
    module function, not a closure: a closure's captured locals are cells made at every turn)."""
    call = calls[j]
    tool = config.tool(call.name)
    assert tool is not None
    arguments = edited.get(j, call.arguments)
    # Journaled inline in the next turn's input (like the error texts): changing it breaks the
    # replay of recorded runs.
    note = EDITED_NOTE.format(arguments=canonical_json(arguments)) if j in edited else ""
    done: Any = None
    try:
        if tool.child_flow is not None:  # a sub-agent (``Agent.as_tool``): a child execution
            child_input = tool.child_input(arguments, ctx.runtime)
            done = await ctx.child(tool.child_flow, child_input, step_id=step_ids.tool_step_id(turn, j))
            output = done.get("output") if isinstance(done, dict) else done
        else:
            output = await ctx.execute(
                tool.effect_id,
                arguments,
                step_id=step_ids.tool_step_id(turn, j),
                input_ref=(node, "message", "tool_calls", j, "arguments"),
                owner=config.owner,
            )
    except FATAL_TOOL_ERRORS:
        raise
    except Exception as exc:
        if tool.child_flow is not None and isinstance(exc, FlowNotFoundError):
            raise  # the sub-agent's flow is not registered: a setup error, not the tool's answer
        # An untrusted tool's exception text is as untrusted as its results: fenced for the model.
        text = f"{note}Error: the tool {call.name!r} failed: {_failure(exc)}"
        # The note is loom's own: the guard fences only what follows it.
        message = Message.tool(call, text, is_error=True, tainted=not tool.trusted, trusted_prefix=len(note))
        outcomes[j] = ("message", message)
        return
    if tool.child_flow is not None:
        # A sub-agent's answer is no step output a reference could name: it goes inline, tainted
        # when the child's conversation was (``AgentResult.tainted``) unless its tool vouches for it.
        text = note + tool_result_text(output)
        outcomes[j] = ("message", Message.tool(call, text, tainted=tool.child_tainted(done)))
        return
    if note:
        text = note + tool_result_text(output)
        edited_message = Message.tool(call, text, tainted=not tool.trusted, trusted_prefix=len(note))
        outcomes[j] = ("message", edited_message.model_copy(update={"images": result_images(output)}))
        return
    outcomes[j] = ("tool", output)


def _ran_any(ctx: FlowContext, turn: int, count: int) -> bool:
    """Whether the journal holds a step or an approval gate of any of ``turn``'s ``count`` calls."""
    return any(
        ctx.recorded(step_ids.tool_step_id(turn, j)) or ctx.recorded(step_ids.approval_gate_id(turn, j))
        for j in range(count)
    )


async def _run_tools(
    ctx: FlowContext, config: AgentConfig, calls: Sequence[ToolCall], turn: int, node: str
) -> list[tuple[str, Any]]:
    """Each call's outcome: ("tool", output) or ("message", an error / refusal tool message).

    A tool step's input is call ``j``'s arguments in the output of the model step ``node``: the
    journal may keep that reference instead of a copy (``input_ref``)."""
    if len(calls) > config.max_tool_calls and not _ran_any(ctx, turn, len(calls)):
        # Too many calls: none runs (no step, no gate); the model reads why (agent/bounds.py). A
        # turn recorded before the limit changed, with calls that ran, goes on as recorded.
        return [("message", m) for m in too_many_calls(calls, config.max_tool_calls)]
    outcomes: list[tuple[str, Any] | None] = [None] * len(calls)
    runnable: list[int] = []
    for j, call in enumerate(calls):
        tool = config.tool(call.name)
        if tool is None:
            known = ", ".join(sorted(t.name for t in config.tools)) or "none"
            text = f"Error: there is no tool named {call.name!r}. Available tools: {known}."
        elif call.raw_arguments is not None and (reason := refusal_reason(call.raw_arguments)) is not None:
            text = (
                f"Error: the arguments for {call.name!r} were refused ({reason}). "
                "Call the tool again with smaller, flatter arguments."
            )
        elif call.raw_arguments is not None:
            raw = call.raw_arguments[:200]
            # Journaled inline in the next turn's input: changing this text breaks the replay of
            # recorded runs (a format change needs a migration and golden journals).
            text = f"Error: the arguments for {call.name!r} are not a JSON object: {raw!r}"
        else:
            try:
                tool.validate(call.arguments)
            except ToolArgumentsError as exc:
                text = f"Error: {exc}. Call the tool again with corrected arguments."
            else:
                runnable.append(j)
                continue
        outcomes[j] = ("message", Message.tool(call, text, is_error=True))
    gated = [j for j in runnable if _waits_for_approval(ctx, config, calls[j], turn, j)]
    edited: dict[int, dict[str, Any]] = {}  # call index -> the arguments a person edited and approved
    if gated:
        answers = await ctx.gates(
            [
                GateRequest(
                    gate_id=step_ids.approval_gate_id(turn, j),
                    kind=APPROVAL_GATE,
                    payload={
                        "tool": calls[j].name,
                        "arguments": to_jsonable(calls[j].arguments),
                        "call_id": calls[j].id,
                        "turn": turn,
                    },
                    schema=ApprovalDecision,
                )
                for j in gated
            ]
        )
        for j, decision in zip(gated, answers, strict=True):
            if not decision.approved:
                refusal = _refusal(config, calls[j], decision)
                outcomes[j] = ("message", Message.tool(calls[j], refusal, is_error=True))
                runnable.remove(j)
            elif decision.arguments is not None:
                edited[j] = dict(decision.arguments)

    if config.parallel_tools and len(runnable) > 1:
        results = await asyncio.gather(
            *(_run_one(ctx, config, calls, turn, node, edited, outcomes, j) for j in runnable),
            return_exceptions=True,
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r
    else:
        for j in runnable:
            await _run_one(ctx, config, calls, turn, node, edited, outcomes, j)
    return [o for o in outcomes if o is not None]
