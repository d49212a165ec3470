"""Typed output: ``Agent(output_type=...)`` (``docs/design.md``, section 6.15).

The final answer is validated with a pydantic ``TypeAdapter`` of ``output_type`` (a pydantic model, a
dataclass, a ``TypedDict``, ``list[...]``, or ``str``, the default, which changes nothing). It reaches
the loop one of two ways (``output_mode``):

- ``native``: the request carries the JSON schema (``ModelRequest.output``), which OpenAI chat sends
  as ``response_format`` and Responses as ``text.format``, both strict; the answer's text is JSON.
- ``tool``: the model is given one more tool, ``final_result``, whose arguments are the answer (a
  value that is not a JSON object is wrapped as ``{"response": ...}``). Any provider with tools
  can do this (Anthropic, and any registered model effect).

``auto`` (the default of ``loom.Agent``) picks ``native`` when the provider says it has it
(``native_output = True``), else ``tool``. An answer that fails validation goes back to the model:
in ``tool`` mode as the error result of its ``final_result`` call, in ``native`` mode as a user
message. Both are journaled in the next turn's delta, like every message; each attempt is a model
step of its own. After ``output_retries`` failed retries the run fails with
``OutputValidationError``.

What is persisted: the first model node's input carries ``"output": {"type", "mode"}`` (and the
``schema`` in native mode; in tool mode the ``final_result`` spec holds it), so a changed output
type is a changed input: replay reports it; the result is ``AgentResult.output``
dumped to JSON in ``execution_completed``. Text agents journal exactly what they did before.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin

import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError

from loom_nb.errors import OutputValidationError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.run_state import RunState
from loom_nb.messages import Message, ModelResponse, OutputFormat, ToolCall, ToolSpec

OutputMode = Literal["auto", "native", "tool"]
#: The tool a ``tool``-mode agent answers through (a persisted name: it is in the journaled calls).
FINAL_RESULT_TOOL = "final_result"
#: The key a non-object answer is wrapped in, as ``final_result``'s arguments.
WRAP_KEY = "response"

Out = TypeVar("Out")


def type_name(tp: Any) -> str:
    """A stable name of an output type: ``module:Qualname`` for a class, ``list[module:Qualname]``..."""
    origin = get_origin(tp)
    if origin is not None:
        inner = ", ".join(type_name(a) for a in get_args(tp))
        return f"{type_name(origin)}[{inner}]"
    if isinstance(tp, type):
        if tp.__module__ == "builtins":
            return tp.__qualname__
        return f"{tp.__module__}:{tp.__qualname__}"
    return repr(tp)


def _schema_name(tp: Any) -> str:
    """The name the wire gets (OpenAI allows ``[A-Za-z0-9_-]``, at most 64 characters)."""
    origin = get_origin(tp)
    if origin is not None:
        name = "_".join([_schema_name(origin), *(_schema_name(a) for a in get_args(tp))])
    else:
        name = getattr(tp, "__name__", "output")
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)
    return cleaned[:64] or "output"


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema made strict the way OpenAI's strict mode asks (as the official SDK makes a
    pydantic model's): every object closed (``additionalProperties: false``) with every property
    required, and no ``default: null``."""

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items() if not (k == "default" and v is None)}
        if out.get("type") == "object" and "properties" in out:
            out["additionalProperties"] = False
            out["required"] = list(out["properties"])
        return out

    return typing.cast(dict[str, Any], walk(dict(schema)))


def is_structured(tp: Any) -> bool:
    """True for a pydantic model (which ``frames().outputs()`` flattens into columns)."""
    return isinstance(tp, type) and issubclass(tp, BaseModel)


class OutputSpec(Generic[Out]):
    """How one output type is asked for and checked (built once per agent).

    Args:
        output_type: The type of the final answer.
        mode: ``native`` or ``tool`` (``auto`` is resolved by ``loom.Agent`` before this).
        retries: Failed validations sent back to the model before the run fails.
    """

    def __init__(self, output_type: Any, *, mode: Literal["native", "tool"] = "tool", retries: int = 2) -> None:
        if mode not in ("native", "tool"):
            raise UsageError(f"output_mode must be 'auto', 'native' or 'tool', got {mode!r}")
        if retries < 0:
            raise UsageError(f"output_retries must be 0 or more, got {retries!r}")
        try:
            self.adapter: TypeAdapter[Out] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:  # pydantic raises several kinds for a type it cannot handle
            raise UsageError(
                f"output_type={output_type!r} is not a type pydantic can validate ({exc}); use a pydantic "
                "model, a dataclass, a TypedDict, list[...] or str"
            ) from exc
        self.output_type = output_type
        self.mode = mode
        self.retries = retries
        self.name = _schema_name(output_type)
        self.wrapped = schema.get("type") != "object"
        self.schema = schema
        wire = {"type": "object", "properties": {WRAP_KEY: schema}} if self.wrapped else schema
        if self.wrapped and "$defs" in schema:
            inner = {k: v for k, v in schema.items() if k != "$defs"}
            wire = {"type": "object", "properties": {WRAP_KEY: inner}, "$defs": schema["$defs"]}
        self.wire_schema = strict_schema(wire)

    def __repr__(self) -> str:
        return f"OutputSpec({type_name(self.output_type)}, mode={self.mode!r}, retries={self.retries})"

    # -- the request -----------------------------------------------------------------------------
    @property
    def tool_spec(self) -> ToolSpec | None:
        """The ``final_result`` tool (``tool`` mode), else None."""
        if self.mode != "tool":
            return None
        return ToolSpec(
            name=FINAL_RESULT_TOOL,
            description=(
                "Give the final answer. Call this once you have everything; its arguments are the answer "
                f"({self.name})."
            ),
            parameters=self.wire_schema,
        )

    @property
    def format(self) -> OutputFormat | None:
        """The native structured-output schema (``native`` mode), else None."""
        return OutputFormat(name=self.name, json_schema=self.wire_schema) if self.mode == "native" else None

    def record(self) -> dict[str, Any]:
        """What the first model node journals about the output type: its name and mode, and in
        ``native`` mode its schema (in ``tool`` mode the ``final_result`` spec, journaled with the
        tools, holds it)."""
        record: dict[str, Any] = {"type": type_name(self.output_type), "mode": self.mode}
        if self.mode == "native":
            record["schema"] = self.wire_schema
        return record

    # -- the answer ------------------------------------------------------------------------------
    def answer_calls(self, message: Message) -> list[int]:
        """Indexes of the ``final_result`` calls in ``message`` (``tool`` mode)."""
        if self.mode != "tool":
            return []
        return [j for j, c in enumerate(message.tool_calls) if c.name == FINAL_RESULT_TOOL]

    def validate_call(self, call: ToolCall) -> Out:
        """The answer in a ``final_result`` call's arguments (raises ``ValidationError``/``ValueError``)."""
        if call.raw_arguments is not None:
            raise ValueError(f"the arguments are not a JSON object: {call.raw_arguments[:200]!r}")
        args: Any = call.arguments
        if self.wrapped:
            if set(args) != {WRAP_KEY}:
                raise ValueError(f"the arguments must be one object {{{WRAP_KEY!r}: <the answer>}}")
            args = args[WRAP_KEY]
        return self.adapter.validate_python(args)

    def validate_text(self, text: str) -> Out:
        """The answer in a native answer's text (raises ``ValidationError``/``ValueError``)."""
        data = json.loads(text)
        if self.wrapped:
            if not isinstance(data, dict) or set(data) != {WRAP_KEY}:
                raise ValueError(f"the answer must be one JSON object {{{WRAP_KEY!r}: <the answer>}}")
            data = data[WRAP_KEY]
        return self.adapter.validate_python(data)

    def dump(self, value: Out) -> Any:
        """The answer as JSON (what ``execution_completed`` holds)."""
        return self.adapter.dump_python(value, mode="json")

    def load(self, data: Any) -> Out:
        """The answer back from its JSON (``Run.result`` after a restart)."""
        return self.adapter.validate_python(data)

    # -- the retry -------------------------------------------------------------------------------
    def retry_messages(self, message: Message, error: str) -> list[Message]:
        """The messages that send a failed answer back: the ``final_result`` call's error result (and
        a not-run result for every other call of that turn), or one user message in ``native`` mode."""
        fix = f"{error}\nFix the errors and give the final answer again."
        if self.mode == "native" or not message.tool_calls:
            if self.mode == "tool":
                fix = f"Give the final answer by calling the {FINAL_RESULT_TOOL} tool. {error}"
            return [Message.user(fix)]
        out = []
        for c in message.tool_calls:
            if c.name == FINAL_RESULT_TOOL:
                out.append(Message.tool(c, f"Error: {fix}", is_error=True))
            else:
                text = f"Error: not run: {FINAL_RESULT_TOOL} was called in the same turn. Call tools first."
                out.append(Message.tool(c, text, is_error=True))
        return out


def describe_error(exc: BaseException) -> str:
    """A validation error as the model reads it: one line per error, with its location."""
    if isinstance(exc, ValidationError):
        lines = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "answer"
            lines.append(f"- {where}: {err['msg']}")
        return "The answer failed validation:\n" + "\n".join(lines)
    if isinstance(exc, json.JSONDecodeError):
        return f"The answer is not valid JSON: {exc.msg} at character {exc.pos}."
    return f"The answer failed validation: {exc}."


def output_spec(output_type: Any, mode: str, retries: int) -> OutputSpec[Any] | None:
    """The ``OutputSpec`` of a config, or None for plain text (``str``: nothing changes)."""
    if mode not in ("auto", "native", "tool"):
        raise UsageError(f"output_mode must be 'auto', 'native' or 'tool', got {mode!r}")
    if output_type is str:
        return None
    if dataclasses.is_dataclass(output_type) and not isinstance(output_type, type):
        raise UsageError(f"output_type must be a type, not an instance: {output_type!r}")
    resolved: Literal["native", "tool"] = "native" if mode == "native" else "tool"
    return OutputSpec(output_type, mode=resolved, retries=retries)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """What a model turn's message means for a typed answer.

    Attributes:
        final: True when it holds a valid answer (``value``).
        value: The validated answer.
        retry: The messages that send a failed answer back to the model (when not ``final``).
        error: The validation error, as the model reads it.
    """

    final: bool
    value: Any = None
    retry: tuple[Message, ...] = ()
    error: str = ""


def judge(spec: OutputSpec[Any], message: Message) -> Verdict | None:
    """Check a model turn's message against the output type.

    Returns:
        None when the turn is an ordinary tool turn (the loop runs its tools); else a ``Verdict``:
        the valid answer, or what to send back.
    """
    answers = spec.answer_calls(message)
    if message.tool_calls and not answers:
        return None
    try:
        if answers:
            value = spec.validate_call(message.tool_calls[answers[0]])
        elif spec.mode == "tool":
            raise ValueError(f"the answer was text, not a call of the {FINAL_RESULT_TOOL} tool")
        else:
            value = spec.validate_text(message.text)
    except (ValidationError, ValueError) as exc:
        error = describe_error(exc)
        return Verdict(final=False, retry=tuple(spec.retry_messages(message, error)), error=error)
    return Verdict(final=True, value=value)


class TypedAnswers:
    """The loop's view of a typed answer over one run: checks each turn, counts failed attempts.

    The count is a pure function of the journaled turns, so a recovered or replayed run fails, or
    answers, at the same turn as the live one.

    Args:
        execution_id: The run (for the error message).
        spec: The output spec.
    """

    def __init__(self, execution_id: str, spec: OutputSpec[Any]) -> None:
        self.execution_id = execution_id
        self.spec = spec
        self.failures: list[tuple[str, str]] = []

    def check(self, response: ModelResponse, node: str) -> Verdict | None:
        """Judge one model turn (``node``); raise once the retries are used up.

        Raises:
            OutputValidationError: the model refused, or its answer failed validation once more than
                ``output_retries`` allows.
        """
        message = response.message
        if message.refusal is not None or response.finish_reason == "refusal":
            reason = message.refusal or message.text
            raise OutputValidationError(
                f"execution {self.execution_id!r}, step {node!r}: the model refused to give the "
                f"{type_name(self.spec.output_type)} answer ({reason!r}). Change the request or the "
                "instructions, then start a new run."
            )
        verdict = judge(self.spec, message)
        if verdict is None or verdict.final:
            return verdict
        self.failures.append((node, verdict.error))
        if len(self.failures) > self.spec.retries:
            steps = ", ".join(sid for sid, _ in self.failures)
            raise OutputValidationError(
                f"execution {self.execution_id!r}: the final answer failed {type_name(self.spec.output_type)} "
                f"{len(self.failures)} times (steps {steps}; output_retries={self.spec.retries}). Make the type "
                "easier to fill, say more in the system prompt, or allow more output_retries. Last error: "
                f"{verdict.error}"
            )
        return verdict

    def out_of_turns(self, max_turns: int) -> None:
        """The run reached ``max_turns`` with no valid answer.

        Raises:
            OutputValidationError: always (a typed run has no text to fall back on).
        """
        raise OutputValidationError(
            f"execution {self.execution_id!r}: no valid {type_name(self.spec.output_type)} answer in "
            f"max_turns={max_turns} turns ({len(self.failures)} failed). Raise max_turns or ask for the "
            "answer sooner in the system prompt."
        )


def output_text(value: Any, *, indent: int | None = None) -> str:
    """How an answer is shown (the live view, ``Run`` reprs): text as it is, a typed value as JSON,
    prefixed with its type's name (``Forecast {"city": ...}``)."""
    if isinstance(value, str):
        return value
    body = pydantic_core.to_json(value, indent=indent).decode()
    return f"{type(value).__name__} {body}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RecordedOutput:
    """A typed-output run as its journal holds it (what ``frames().outputs()`` shows).

    Attributes:
        output_type: The output type's name (``module:Qualname``, ``list[...]``...).
        mode: ``native`` or ``tool``.
        attempts: Model turns that gave a final answer (valid or not).
        failed_attempts: Those that failed validation.
        output: The answer's JSON once the run completed, else None.
    """

    output_type: str
    mode: str
    attempts: int
    failed_attempts: int
    output: Any


def recorded_output(state: RunState) -> RecordedOutput | None:
    """Read a run's typed output from its folded journal (None for a text agent or another flow)."""
    steps = [s for s in state.steps.values() if s.kind == step_ids.MODEL_KIND]
    first = steps[0].input if steps else None
    if not isinstance(first, dict) or not isinstance(first.get("output"), dict):
        return None
    record = first["output"]
    mode = str(record.get("mode"))
    attempts = 0
    for step in steps:
        if not step.completed or not isinstance(step.output, dict):
            continue
        message = step.output.get("message") or {}
        calls = message.get("tool_calls") or ()
        answered = any(c.get("name") == FINAL_RESULT_TOOL for c in calls) if mode == "tool" else not calls
        attempts += answered
    completed = state.status == "completed"
    output = state.output.get("output") if completed and isinstance(state.output, dict) else None
    return RecordedOutput(
        output_type=str(record.get("type")),
        mode=mode,
        attempts=attempts,
        failed_attempts=attempts - 1 if completed else attempts,
        output=output,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnswerAttempt:
    """One model turn that gave a typed run's final answer, as its journal holds it (what the live
    view shows in that turn).

    Attributes:
        step_id: The model step (``#turn:<i>``).
        turn: Its turn.
        attempt: 1 for the first answer, 2 for the first retry...
        mode: ``tool`` or ``native``.
        arguments: The ``final_result`` call's arguments (``tool`` mode), else None.
        text: The answer's text (``native`` mode, or a text answer in ``tool`` mode).
        status: ``valid`` (the run completed with it), ``invalid`` (it went back to the model, or the
            run failed on it) or ``checking`` (nothing after it yet).
        error: Why it is invalid, as the model read it (its lines joined by ``; ``), else "".
    """

    step_id: str
    turn: int
    attempt: int
    mode: str
    arguments: Any
    text: str
    status: str
    error: str


def _retry_error(next_input: Any) -> str:
    """The validation error a model step's input sends back (the retry messages it adds), or ""."""
    adds = next_input.get("add") if isinstance(next_input, dict) else None
    for item in adds or ():
        msg = item.get("msg") if isinstance(item, dict) else None
        if not isinstance(msg, dict):
            continue
        is_retry = (msg.get("role") == "tool" and msg.get("name") == FINAL_RESULT_TOOL and msg.get("is_error")) or (
            msg.get("role") == "user"
        )
        if is_retry:
            lines = str(msg.get("text") or "").removeprefix("Error: ").splitlines()
            kept = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("Fix the errors")]
            if len(kept) > 1 and kept[0].endswith(":"):  # "The answer failed validation:" then "- a: b" lines
                kept = [ln.removeprefix("- ") for ln in kept[1:]]
            return "; ".join(kept)
    return ""


def answer_attempts(state: RunState) -> list[AnswerAttempt]:
    """The final-answer attempts of a typed run, in turn order, read from its folded journal ([] for
    a text agent or another flow). A pure function of the events, like ``recorded_output``."""
    steps = [s for s in state.steps.values() if s.kind == step_ids.MODEL_KIND]
    first = steps[0].input if steps else None
    if not isinstance(first, dict) or not isinstance(first.get("output"), dict):
        return []
    mode = str(first["output"].get("mode"))
    by_turn = {step_ids.parse_step_id(s.step_id).turn or 0: s for s in steps}
    last_turn = max(by_turn)
    found: list[AnswerAttempt] = []
    for turn in sorted(by_turn):
        step = by_turn[turn]
        if not step.completed or not isinstance(step.output, dict):
            continue
        message = step.output.get("message") or {}
        calls = [c for c in message.get("tool_calls") or () if isinstance(c, dict)]
        answer = next((c for c in calls if c.get("name") == FINAL_RESULT_TOOL), None)
        if calls and answer is None:
            continue  # a turn that called tools: not an answer
        following = by_turn.get(turn + 1)
        error = _retry_error(following.input) if following is not None else ""
        if following is not None:
            status = "invalid"
        elif turn == last_turn and state.status == "completed":
            status = "valid"
        elif turn == last_turn and state.status == "failed":
            status, error = "invalid", "the run failed on it (the error is below)"
        else:
            status = "checking"
        found.append(
            AnswerAttempt(
                step_id=step.step_id,
                turn=turn,
                attempt=len(found) + 1,
                mode=mode,
                arguments=answer.get("arguments") if answer is not None else None,
                text=str(message.get("text") or ""),
                status=status,
                error=error,
            )
        )
    return found
