"""The span model of one execution, built from its journaled events, and its emission to OpenTelemetry.

``span_specs(events)`` folds an execution's events with ``RunState`` (the one fold every view uses)
and returns plain ``SpanSpec`` values: no clock, no live state, so a live run, a recovered one and
one read back from an old journal give the same specs. ``emit(tracer, specs)`` turns them into
OpenTelemetry spans with the journal's times as explicit start and end times.

This module imports OpenTelemetry at the top: ``loom_nb.tracing`` imports it only after checking the
``otel`` extra is installed, so ``import loom_nb`` never pulls it in.

The GenAI attribute names come from ``opentelemetry-semantic-conventions``, where they are published
in the incubating module (the GenAI conventions are still in development upstream).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.attributes.exception_attributes import EXCEPTION_MESSAGE, EXCEPTION_TYPE
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue
from pydantic import ValidationError

from loom_nb.agent.carry import session_of
from loom_nb.agent.tool_calls import ToolCallRecord, tool_call
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json, digest_value
from loom_nb.journal.events import Event, EventKind
from loom_nb.journal.run_state import FAILED, GateState, RunState, StepState
from loom_nb.messages import ModelResponse
from loom_nb.tracing.served_by import ServedBy

#: ``gen_ai.operation.name`` values (the GenAI semantic conventions' own words).
INVOKE_AGENT: Final[str] = gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
INVOKE_WORKFLOW: Final[str] = gen_ai.GenAiOperationNameValues.INVOKE_WORKFLOW.value
CHAT: Final[str] = gen_ai.GenAiOperationNameValues.CHAT.value
EXECUTE_TOOL: Final[str] = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value

#: loom_nb's own attributes (no semantic convention covers them).
LOOM_EXECUTION_ID: Final = "loom.execution_id"
LOOM_FLOW: Final = "loom.flow"
#: A session run's place in its session (``gen_ai.conversation.id`` is the session id).
LOOM_SESSION_INDEX: Final = "loom.session.index"
#: The run a session run continues.
LOOM_SESSION_PREVIOUS: Final = "loom.session.previous"
LOOM_STATUS: Final = "loom.status"
LOOM_STEP_ID: Final = "loom.step_id"
LOOM_EFFECT_ID: Final = "loom.effect_id"
LOOM_STEP_KIND: Final = "loom.step.kind"
LOOM_STEP_STATUS: Final = "loom.step.status"
LOOM_ATTEMPTS: Final = "loom.step.attempts"
LOOM_ATTEMPT: Final = "loom.attempt"
LOOM_TURN: Final = "loom.turn"
LOOM_TOOL_INDEX: Final = "loom.tool_index"
LOOM_GATE_ID: Final = "loom.gate_id"
LOOM_GATE_KIND: Final = "loom.gate.kind"
LOOM_GATE_STATUS: Final = "loom.gate.status"
LOOM_GATE_ANSWER: Final = "loom.gate.answer"
LOOM_GATE_REASON: Final = "loom.gate.reason"
#: True on a tool call's span and its approval gate's when a person edited its arguments before
#: approving (set only then; the arguments themselves, like every content, are not exported).
LOOM_TOOL_EDITED: Final = "loom.tool.edited"
#: ``digest_value`` of the arguments a tool call ran with, and, when a person edited them, of the
#: arguments the model asked for: which arguments ran, without exporting them.
LOOM_TOOL_ARGUMENTS_DIGEST: Final = "loom.tool.arguments_digest"
LOOM_TOOL_REQUESTED_DIGEST: Final = "loom.tool.requested_arguments_digest"
LOOM_COST: Final = "loom.usage.cost"
LOOM_RETRY_DELAY: Final = "loom.retry.delay"

#: Span event names.
RETRY_EVENT: Final = "loom.retry"
ATTEMPT_EVENT: Final = "loom.attempt"
IN_DOUBT_EVENT: Final = "loom.in_doubt"
RESOLVED_EVENT: Final = "loom.resolved"
DECISION_EVENT: Final = "loom.decision"
SUSPENDED_EVENT: Final = "loom.suspended"
RESUMED_EVENT: Final = "loom.resumed"
WARNING_EVENT: Final = "loom.warning"
EXCEPTION_EVENT: Final = "exception"

Attributes = dict[str, AttributeValue]
SpanKey = tuple[str, str]

_EXECUTION: Final[SpanKey] = ("execution", "")


@dataclass(frozen=True)
class SpanEventSpec:
    """One span event.

    Attributes:
        name: The event name (``loom.retry``, ``loom.in_doubt``, ``exception``...).
        at: When (the journal event's ``at``, epoch seconds).
        attributes: Its attributes.
    """

    name: str
    at: float
    attributes: Attributes = field(default_factory=dict)


@dataclass
class SpanSpec:
    """One span to emit, as plain data.

    Attributes:
        key: Its key in the trace: ``("execution", "")``, ``("turn", "<i>")``, ``("step", <step id>)``
            or ``("gate", <gate id>)``.
        parent: Its parent's key (None for the execution span).
        name: The span name.
        client: True for a span of a call out of the process (a model call: ``SpanKind.CLIENT``).
        start: Start time (epoch seconds, from the journal).
        end: End time (epoch seconds, from the journal).
        attributes: Its attributes.
        events: Its span events, in journal order.
        error: The error status description, for a failed execution or step; None otherwise.
    """

    key: SpanKey
    parent: SpanKey | None
    name: str
    client: bool
    start: float
    end: float
    attributes: Attributes = field(default_factory=dict)
    events: list[SpanEventSpec] = field(default_factory=list)
    error: str | None = None


def span_specs(events: Iterable[Event], served: Mapping[str, ServedBy] | None = None) -> list[SpanSpec]:
    """The spans of one execution's events: the execution, then its turns, steps and gates.

    Parents always come before their children. Only what the events hold is used, and ``served``
    (what serves each model effect: ``served_by.served_for``), so the same events and providers
    always give the same specs.
    """
    ordered = sorted(events, key=lambda e: e.seq)
    if not ordered:
        return []
    state = RunState(execution_id=ordered[0].execution_id)
    marks: dict[str, list[SpanEventSpec]] = {}
    run_marks: list[SpanEventSpec] = []
    decisions: list[tuple[int | None, SpanEventSpec]] = []
    for e in ordered:
        touched = state.apply(e)
        if isinstance(touched, StepState):
            _mark_step(e, marks.setdefault(touched.step_id, []))
        elif e.kind == EventKind.DECISION_RECORDED:
            turn = step_ids.parse_step_id(e.step_id or "").turn
            decisions.append((turn, SpanEventSpec(DECISION_EVENT, e.at, _decision_attributes(e))))
        elif e.kind in _RUN_MARKS:
            run_marks.append(SpanEventSpec(_RUN_MARKS[e.kind], e.at, _attributes(e.data, _RUN_MARK_FIELDS)))
    first_at, last_at = ordered[0].at, max(e.at for e in ordered)
    execution = _execution_spec(state, first_at, last_at)
    execution.events[:0] = run_marks + [mark for turn, mark in decisions if turn is None]
    steps = [_step_spec(state, s, marks.get(s.step_id, []), last_at, served or {}) for s in state.steps.values()]
    gates = [_gate_spec(state, g, last_at) for g in state.gates.values()]
    turns = _turn_specs(state, steps + gates, decisions)
    return [execution, *turns, *steps, *gates]


def emit(tracer: Tracer, specs: Sequence[SpanSpec]) -> str:
    """Emit ``specs`` (parents first, as ``span_specs`` orders them) through ``tracer``.

    Returns:
        The trace id (32 hex digits).
    """
    if not specs:
        raise ValueError("no spans to emit: span_specs gives at least the execution's span for any event")
    spans: dict[SpanKey, Span] = {}
    for spec in specs:
        parent = Context() if spec.parent is None else trace.set_span_in_context(spans[spec.parent])
        span = tracer.start_span(
            spec.name,
            context=parent,
            kind=SpanKind.CLIENT if spec.client else SpanKind.INTERNAL,
            attributes=spec.attributes,
            start_time=nanoseconds(spec.start),
        )
        for mark in spec.events:
            span.add_event(mark.name, mark.attributes, timestamp=nanoseconds(mark.at))
        if spec.error is not None:
            span.set_status(Status(StatusCode.ERROR, spec.error))
        spans[spec.key] = span
    for spec in reversed(specs):
        spans[spec.key].end(end_time=nanoseconds(spec.end))
    root = spans[specs[0].key].get_span_context()
    return trace.format_trace_id(root.trace_id)


def nanoseconds(at: float) -> int:
    """Epoch seconds as the integer nanoseconds OpenTelemetry takes (to the microsecond: exact for any
    clock reading a float holds to that precision)."""
    return round(at * 1_000_000) * 1000


# -- the execution ----------------------------------------------------------------------------------
def _execution_spec(state: RunState, start: float, end: float) -> SpanSpec:
    agent = step_ids.agent_name(state.flow)
    attributes: Attributes = {LOOM_EXECUTION_ID: state.execution_id, LOOM_FLOW: state.flow, LOOM_STATUS: state.status}
    if agent is not None:
        name = f"{INVOKE_AGENT} {agent}"
        attributes |= {gen_ai.GEN_AI_OPERATION_NAME: INVOKE_AGENT, gen_ai.GEN_AI_AGENT_NAME: agent}
    else:
        name = f"{INVOKE_WORKFLOW} {state.flow}"
        attributes |= {gen_ai.GEN_AI_OPERATION_NAME: INVOKE_WORKFLOW, gen_ai.GEN_AI_WORKFLOW_NAME: state.flow}
    session = session_of(state.input)
    if session is not None:  # a session's run: the conversation it belongs to
        attributes |= {gen_ai.GEN_AI_CONVERSATION_ID: str(session.get("id")), LOOM_SESSION_INDEX: int(session["index"])}
        if session.get("previous"):
            attributes[LOOM_SESSION_PREVIOUS] = str(session["previous"])
    if state.usage.calls:
        attributes |= {
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: state.usage.input_tokens,
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: state.usage.output_tokens,
        }
        if state.usage.cost is not None:
            attributes[LOOM_COST] = state.usage.cost
    spec = SpanSpec(_EXECUTION, None, name, False, start, end, attributes)
    if state.status == FAILED:
        _fail(spec, state.error or {}, end)
    return spec


_RUN_MARKS: Final[Mapping[str, str]] = {
    EventKind.EXECUTION_SUSPENDED: SUSPENDED_EVENT,
    EventKind.EXECUTION_RESUMED: RESUMED_EVENT,
    EventKind.WARNING: WARNING_EVENT,
}
#: Which payload fields of a run-level event become attributes, and their names.
_RUN_MARK_FIELDS: Final[Mapping[str, str]] = {
    "gates": "loom.gate_ids",
    "gate_id": LOOM_GATE_ID,
    "code": "loom.warning.code",
    "message": "loom.warning.message",
}


def _decision_attributes(e: Event) -> Attributes:
    attributes: Attributes = {LOOM_STEP_ID: e.step_id or ""}
    return attributes | _attributes(e.data, {"choice": "loom.decision.choice", "policy": "loom.decision.policy"})


# -- turns ----------------------------------------------------------------------------------------
def _turn_specs(
    state: RunState, children: Sequence[SpanSpec], decisions: Sequence[tuple[int | None, SpanEventSpec]]
) -> list[SpanSpec]:
    """One span per agent turn, from the first to the last moment of anything in it."""
    members: dict[int, list[float]] = {}
    for child in children:
        if child.parent is not None and child.parent[0] == "turn":
            members.setdefault(int(child.parent[1]), []).extend((child.start, child.end))
    for turn, mark in decisions:
        if turn is not None:
            members.setdefault(turn, []).append(mark.at)
    specs = []
    for turn in sorted(members):
        times = members[turn]
        attributes: Attributes = {LOOM_EXECUTION_ID: state.execution_id, LOOM_TURN: turn}
        marks = [mark for t, mark in decisions if t == turn]
        key, name = _turn_key(turn), f"turn {turn}"
        specs.append(SpanSpec(key, _EXECUTION, name, False, min(times), max(times), attributes, events=marks))
    return specs


def _turn_key(turn: int) -> SpanKey:
    return ("turn", str(turn))


def _parent(turn: int | None) -> SpanKey:
    return _EXECUTION if turn is None else _turn_key(turn)


# -- steps ----------------------------------------------------------------------------------------
def _mark_step(e: Event, marks: list[SpanEventSpec]) -> None:
    """The span events one step event adds: later attempts, retries, in-doubt, resolutions."""
    d = e.data
    attempt = {LOOM_ATTEMPT: int(d.get("attempt") or 0)}
    if e.kind == EventKind.STEP_STARTED and attempt[LOOM_ATTEMPT] > 1:
        marks.append(SpanEventSpec(ATTEMPT_EVENT, e.at, dict(attempt)))
    elif e.kind == EventKind.STEP_FAILED and d.get("will_retry"):
        attributes: Attributes = attempt | _error_attributes(d.get("error") or {})
        if d.get("delay") is not None:
            attributes[LOOM_RETRY_DELAY] = float(d["delay"])
        marks.append(SpanEventSpec(RETRY_EVENT, e.at, attributes))
    elif e.kind == EventKind.STEP_IN_DOUBT:
        marks.append(SpanEventSpec(IN_DOUBT_EVENT, e.at, dict(attempt)))
    elif e.kind == EventKind.STEP_COMPLETED and d.get("resolved_by"):
        marks.append(SpanEventSpec(RESOLVED_EVENT, e.at, {LOOM_GATE_ID: str(d["resolved_by"])}))


def _step_spec(
    state: RunState, step: StepState, marks: list[SpanEventSpec], last_at: float, served: Mapping[str, ServedBy]
) -> SpanSpec:
    attributes: Attributes = {
        LOOM_EXECUTION_ID: state.execution_id,
        LOOM_STEP_ID: step.step_id,
        LOOM_EFFECT_ID: step.effect,
        LOOM_STEP_KIND: step.kind,
        LOOM_STEP_STATUS: step.status,
        LOOM_ATTEMPTS: step.attempts,
    }
    attributes |= _attributes({LOOM_TURN: step.turn, LOOM_TOOL_INDEX: step.tool_index})
    if step.kind in (step_ids.MODEL_KIND, step_ids.COMPACTION_KIND):
        by = served.get(step.effect)
        model = _requested_model(step) or (by.model if by is not None else step.effect)
        name, client = f"{CHAT} {model}", True
        attributes |= {gen_ai.GEN_AI_OPERATION_NAME: CHAT, gen_ai.GEN_AI_REQUEST_MODEL: model}
        if by is not None:
            found = {gen_ai.GEN_AI_PROVIDER_NAME: by.provider, SERVER_ADDRESS: by.address, SERVER_PORT: by.port}
            attributes |= _attributes(found)
        attributes |= _model_attributes(step)
    elif step.kind == step_ids.TOOL_KIND:
        tool = step.tool or step.effect
        name, client = f"{EXECUTE_TOOL} {tool}", False
        attributes |= {gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL, gen_ai.GEN_AI_TOOL_NAME: tool}
        attributes |= {gen_ai.GEN_AI_TOOL_TYPE: "function"}
        attributes |= _attributes({gen_ai.GEN_AI_TOOL_CALL_ID: _tool_call_id(state, step)})
        attributes |= _edit_attributes(tool_call(state, step.step_id))
    else:
        name, client = step.effect, False
    end = step.ended_at if step.ended_at is not None else last_at
    start = step.started_at if step.started_at is not None else end
    key = ("step", step.step_id)
    spec = SpanSpec(key, _parent(step.turn), name, client, start, end, attributes, events=list(marks))
    if step.error is not None:
        _fail(spec, step.error, end)
    return spec


def _requested_model(step: StepState) -> str | None:
    """The model the request names, if it names one (the provider's own is not journaled: ``served``)."""
    requested = step.input.get("model") if isinstance(step.input, dict) else None
    return requested if isinstance(requested, str) and requested else None


def _model_attributes(step: StepState) -> Attributes:
    usage = step.usage or {}
    attributes = _attributes(
        {
            gen_ai.GEN_AI_USAGE_INPUT_TOKENS: usage.get("input_tokens"),
            gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS: usage.get("output_tokens"),
            LOOM_COST: usage.get("cost"),
        }
    )
    response = _response(step)
    if response is not None:
        if response.usage.reasoning_tokens:  # in the model's output only (the metered usage has none)
            attributes[gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = response.usage.reasoning_tokens
        if response.finish_reason:
            attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] = (response.finish_reason,)
        if response.response_id:
            attributes[gen_ai.GEN_AI_RESPONSE_ID] = response.response_id
        if response.model:
            attributes[gen_ai.GEN_AI_RESPONSE_MODEL] = response.model
    return attributes


def _response(step: StepState) -> ModelResponse | None:
    """A model step's recorded output as a ``ModelResponse`` (None when it has none, or another shape)."""
    if step.kind != step_ids.MODEL_KIND or not step.completed or not isinstance(step.output, dict):
        return None
    try:
        return ModelResponse.model_validate(step.output)
    except ValidationError:
        return None


def _tool_call_id(state: RunState, step: StepState) -> str | None:
    """The provider's id of the call a tool step runs: from its turn's last answered model call."""
    answers = [s for s in state.steps.values() if s.turn == step.turn and s.kind == step_ids.MODEL_KIND]
    response = next((r for s in reversed(answers) if (r := _response(s)) is not None), None)
    calls = response.message.tool_calls if response is not None else ()
    index = step.tool_index
    return calls[index].id if index is not None and index < len(calls) else None


# -- gates ----------------------------------------------------------------------------------------
def _gate_spec(state: RunState, gate: GateState, last_at: float) -> SpanSpec:
    attributes: Attributes = {
        LOOM_EXECUTION_ID: state.execution_id,
        LOOM_GATE_ID: gate.gate_id,
        LOOM_GATE_KIND: gate.kind,
        LOOM_GATE_STATUS: "resolved" if gate.resolved else "open",
    }
    attributes |= _attributes({LOOM_STEP_ID: gate.subject, LOOM_TURN: gate.turn, LOOM_TOOL_INDEX: gate.tool_index})
    payload = gate.payload if isinstance(gate.payload, dict) else {}
    if gate.kind == step_ids.APPROVAL_GATE:
        attributes |= _attributes(payload, {"tool": gen_ai.GEN_AI_TOOL_NAME, "call_id": gen_ai.GEN_AI_TOOL_CALL_ID})
        if gate.subject is not None and gate.resolved:
            attributes |= _edit_attributes(tool_call(state, gate.subject))
    resolution = gate.resolution if isinstance(gate.resolution, dict) else {}
    if gate.resolved:
        attributes |= _attributes({LOOM_GATE_ANSWER: _answer(resolution), LOOM_GATE_REASON: resolution.get("reason")})
    end = gate.resolved_at if gate.resolved_at is not None else last_at
    return SpanSpec(
        ("gate", gate.gate_id), _parent(gate.turn), f"gate {gate.kind}", False, gate.opened_at, end, attributes
    )


def _edit_attributes(call: ToolCallRecord | None) -> Attributes:
    """For a call a person edited before approving it: ``loom.tool.edited`` and the digests of the
    arguments that ran and of the model's (``agent/tool_calls.py``); else nothing."""
    if call is None or not call.edited:
        return {}
    return {
        LOOM_TOOL_EDITED: True,
        LOOM_TOOL_ARGUMENTS_DIGEST: digest_value(call.arguments),
        LOOM_TOOL_REQUESTED_DIGEST: digest_value(call.requested),
    }


def _answer(resolution: Mapping[str, Any]) -> str | None:
    """``approved`` / ``refused`` for an approval, the action (``happened``...) for an in-doubt gate."""
    if isinstance(resolution.get("approved"), bool):
        return "approved" if resolution["approved"] else "refused"
    action = resolution.get("action")
    return action if isinstance(action, str) else None


# -- shared ---------------------------------------------------------------------------------------
def _fail(spec: SpanSpec, error: Mapping[str, Any], at: float) -> None:
    """Mark ``spec`` failed with a journaled error: error status, ``error.type``, an ``exception`` event."""
    attributes = _error_attributes(error)
    spec.error = f"{attributes.get(EXCEPTION_TYPE, 'error')}: {attributes.get(EXCEPTION_MESSAGE, '')}"
    spec.attributes[ERROR_TYPE] = attributes.get(EXCEPTION_TYPE, "error")
    spec.events.append(SpanEventSpec(EXCEPTION_EVENT, at, attributes))


def _error_attributes(error: Mapping[str, Any]) -> Attributes:
    """A journaled error (``{type: "module:Qualname", message, ...}``) as ``exception.*`` attributes."""
    return _attributes(error, {"type": EXCEPTION_TYPE, "message": EXCEPTION_MESSAGE})


def _attributes(values: Mapping[str, Any], names: Mapping[str, str] | None = None) -> Attributes:
    """``values`` as span attributes (renamed by ``names`` when given, keeping only those): None
    dropped, lists of strings kept, any other non-scalar as canonical JSON."""
    picked = values if names is None else {names[k]: v for k, v in values.items() if k in names}
    out: Attributes = {}
    for key, value in picked.items():
        if value is None:
            continue
        if isinstance(value, str | bool | int | float):
            out[key] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[key] = tuple(value)
        else:
            out[key] = canonical_json(value)
    return out
