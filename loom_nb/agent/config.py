"""The agent loop's configuration and value types (all keyword-only and frozen)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer
from typing_extensions import TypeVar

from loom_nb.agent.bounds import MAX_ANSWER_CHARS, MAX_TOOL_CALLS
from loom_nb.agent.cut_answers import WHEN_CUT, WhenCut
from loom_nb.agent.output import OutputMode, OutputSpec, output_spec
from loom_nb.effects.claimcheck import ClaimCheck
from loom_nb.effects.tool import Tool
from loom_nb.errors import StaleApprovalError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import digest_value
from loom_nb.messages import ModelRequest, ModelResponse, ToolCall, Usage

APPROVAL_GATE = step_ids.APPROVAL_GATE
DEFAULT_WARN_BYTES = 256 * 1024
#: The type of an agent's final answer (``str`` unless ``output_type=`` says otherwise; a bare
#: ``Agent`` / ``Run`` / ``AgentResult`` annotation means any answer type).
Out = TypeVar("Out", default=Any)
#: The type of what a run hands its tools (``Agent(deps_type=...)``; ``agent.start(..., deps=...)``
#: gives the value, tools read it as ``EffectContext.deps``). ``None`` unless ``deps_type=`` says
#: otherwise; a bare ``Agent`` annotation means any.
Deps = TypeVar("Deps", default=Any)


class ApprovalDecision(BaseModel):
    """The resume payload of an ``AgentToolApproval`` gate.

    Attributes:
        approved: True to run the tool call, False to refuse it.
        reason: Why (shown to the model on refusal).
        arguments: The arguments to run instead of the model's (an edited call), or None to run
            the model's. The model is told the call ran with edited arguments.
        digest: ``digest_value`` of the exact arguments that will run (the edited ones, else the
            gate's), binding the approval to them: a mismatch is refused with
            ``StaleApprovalError`` before anything is recorded. None: not bound (as before the
            field existed).

    ``arguments`` and ``digest`` are left out of the journaled form while None, so an approval
    without them is journaled exactly as before they existed.
    """

    model_config = ConfigDict(frozen=True)

    approved: bool
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    digest: str | None = None

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("arguments", "digest"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    def check_gate_payload(self, payload: Any) -> None:
        """Check the digest against the arguments that will run (the gate's, unless edited).

        Raises:
            StaleApprovalError: they differ.
        """
        if self.digest is None:
            return
        original = payload.get("arguments") if isinstance(payload, dict) else None
        running = self.arguments if self.arguments is not None else original
        if digest_value(running) != self.digest:
            what = "the edited arguments" if self.arguments is not None else f"the gate's arguments {original!r}"
            raise StaleApprovalError(
                f"this approval is bound to arguments with digest {self.digest}, but {what} differ: "
                "the gate shows other arguments than the ones approved. Read the gate again "
                "(run.gates) and approve what it shows."
            )


class AgentResult(BaseModel, Generic[Out]):
    """How an agent run ended.

    Attributes:
        output: The final answer: text (the model's refusal when ``stop_reason`` is ``refusal``), or,
            with ``output_type=``, a validated value of that type (``Run.result`` and ``await run``
            give it back as that type; the journal holds its JSON).
        stop_reason: ``end_turn`` (the model answered), ``refusal`` (the model declined),
            ``max_turns``, or ``max_tokens`` / ``content_filter`` (the answer was cut off by the
            model's output token limit or the provider's filter: ``output`` is what came; see
            ``AgentConfig.when_cut``).
        turns: Model turns taken.
        usage: Token usage summed over model calls.
        tainted: True when the conversation the answer was made from held untrusted content (a
            result or error of a ``trusted=False`` tool, a summary of one, a tainted sub-agent's
            answer): a lead reads such a sub-agent's answer fenced (``Agent.as_tool``). Journaled
            only when True, so an untainted result is journaled as before the field existed.
    """

    model_config = ConfigDict(frozen=True)

    output: Out
    stop_reason: Literal["end_turn", "refusal", "max_turns", "max_tokens", "content_filter"]
    turns: int
    usage: Usage = Usage()
    tainted: bool = False

    @model_serializer(mode="wrap")
    def _drop_untainted(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not data.get("tainted"):
            data.pop("tainted", None)
        return data


@dataclass(frozen=True, kw_only=True)
class Compaction:
    """Fold old messages into a summary once the transcript grows past a threshold.

    Attributes:
        effect_id: The summarizer effect (``summarizer_effect(provider)`` registers one).
        after_messages: Fold when the transcript holds more messages than this (system excluded).
        after_bytes: Fold when the transcript's UTF-8 size (system messages excluded: they are never
            folded) passes this; the kept suffix is then the longest newest run within
            ``after_bytes / 2``, at least 1 message, at most ``keep_recent``, and the fold is skipped
            when that suffix is the whole transcript.
        keep_recent: Messages kept verbatim after a fold (at most, for either trigger). Either
            rule's suffix is shrunk forwards so that it never starts with a tool result whose
            assistant call is folded (providers refuse such requests; the orphaned result is folded
            into the summary), except when the newest message is such a result: then its call comes
            too (``docs/design.md``, section 6.7).
    """

    effect_id: str
    after_messages: int | None = None
    after_bytes: int | None = None
    keep_recent: int = 4

    def __post_init__(self) -> None:
        if self.after_messages is None and self.after_bytes is None:
            raise UsageError("Compaction needs a threshold: set after_messages=..., after_bytes=..., or both")
        if self.keep_recent < 1:
            raise UsageError("Compaction.keep_recent must be at least 1")


RoutePolicy = Callable[[Sequence[str], ModelRequest, int], Any]


@dataclass(frozen=True, kw_only=True)
class Routes:
    """Route each turn to one of several model effects, chosen by ``ctx.decide``.

    Attributes:
        models: Model effect ids, cheapest first.
        policy: ``policy(models, request, turn) -> model id | Decision`` (with probabilities for
            off-policy analysis).
        elevate: ``elevate(response, turn) -> bool``: True re-asks the next stronger model; each
            elevation is itself a recorded decision.
        name: The policy name recorded with each decision.
    """

    models: Sequence[str]
    policy: RoutePolicy
    elevate: Callable[[ModelResponse, int], bool] | None = None
    name: str = "routes"

    def __post_init__(self) -> None:
        if not self.models:
            raise UsageError("Routes(models=...) needs at least one model effect id")


@dataclass(frozen=True, kw_only=True)
class Skill:
    """Instructions the loop may add to a turn's system prompt when selected.

    Attributes:
        name: Its name (the decision's option).
        instructions: Text added to the system prompt when selected.
        description: What it is for (for selectors).
    """

    name: str
    instructions: str
    description: str = ""


ApprovalRule = Callable[[ToolCall, int], bool]
RefusalText = str | Callable[[ToolCall, ApprovalDecision], str]


class AgentOptions(TypedDict, total=False):
    """The ``AgentConfig`` fields ``Agent(...)`` passes on as they are (documented on ``AgentConfig``)."""

    system: str | None
    max_turns: int
    needs_approval: ApprovalRule | None
    refusal_text: RefusalText
    compaction: Compaction | None
    skill_selector: Callable[[Sequence[str]], Any] | None
    memory: Any
    recall_limit: int
    claim_check: ClaimCheck | None
    stream: bool
    chunk_min_chars: int
    parallel_tools: bool
    tool_timeout: float | None
    output_retries: int
    max_tool_calls: int
    max_answer_chars: int
    when_cut: WhenCut


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Everything ``agent_loop`` needs. Exactly one of ``model`` and ``routes`` is required.

    Attributes:
        model: The model effect id (the full ring applies).
        routes: Routes among model effect ids instead.
        tools: Tools the model may call.
        system: The system prompt.
        max_turns: Most model turns before the run ends with ``stop_reason="max_turns"``.
        needs_approval: An extra rule ``(call, turn) -> bool`` beside each tool's own.
        refusal_text: What the model is told when a call is refused (``{tool}`` and ``{reason}``
            are filled in), or a function of the call and the decision.
        compaction: Fold old messages into a summary (off when None).
        warn_transcript_bytes: Warn once per run when an uncompacted transcript passes this many
            bytes (False: never).
        skills: Skills a selector may add to a turn.
        skill_selector: ``policy(skill_names) -> names | Decision``.
        memory: A ``TieredMemory`` to recall from each turn.
        recall_limit: Most memories recalled per turn.
        claim_check: Offload listed tools' results (one-line opt-in).
        stream: Stream the model's text durably (chunked) to the journal and the cell.
        chunk_min_chars: Smallest durable stream chunk (split at sentence ends).
        parallel_tools: Run one turn's tool calls concurrently (ids stay fixed).
        tool_timeout: Seconds one tool call may take, for tools that set no ``timeout`` of their own
            (None: no limit). A call past it fails with ``EffectTimeout`` (see ``Tool``). ``Agent``
            applies it when it registers the tools; code that registers them itself for
            ``agent_loop`` passes it on: ``tool.register(effects, default_timeout=...)``.
        output_type: The type of the final answer (``str``: text, as always); see
            ``loom_nb.agent.output``.
        output_mode: How a typed answer is asked for: ``native`` (the wire's structured output),
            ``tool`` (a ``final_result`` tool) or ``auto`` (``tool`` here; ``loom.Agent`` resolves it
            from the provider).
        output_retries: Failed validations sent back to the model before ``OutputValidationError``.
        owner: Whose registrations of the model, compaction and tool effects the loop calls
            (``EffectSpec.owner``; ``loom.Agent`` sets its flow and version, so two agents' tools of
            one name each run their own body); None: the runtime's shared registrations.
        max_tool_calls: Most tool calls one model turn may ask for; past it none of them runs (no
            step, no gate) and each gets an error result the model can correct (``agent.bounds``).
        max_answer_chars: Most characters of text one model step may answer; past it the step
            fails with ``AnswerTooLargeError`` (counted as the text streams) and the run stops.
        when_cut: A final answer cut off by the model's token limit or the provider's content
            filter: ``finish`` with what came (``stop_reason`` says why), ``continue`` (ask the
            model to go on while turns remain; a filter's cut finishes) or ``fail``
            (``AnswerCutError``). See ``loom_nb.agent.cut_answers``.
    """

    model: str | None = None
    routes: Routes | None = None
    tools: Sequence[Tool] = ()
    system: str | None = None
    max_turns: int = 20
    needs_approval: ApprovalRule | None = None
    refusal_text: RefusalText = "The user refused to run {tool}.{reason}"
    compaction: Compaction | None = None
    warn_transcript_bytes: int | Literal[False] = DEFAULT_WARN_BYTES
    skills: Sequence[Skill] = ()
    skill_selector: Callable[[Sequence[str]], Any] | None = None
    memory: Any = None
    recall_limit: int = 3
    claim_check: ClaimCheck | None = None
    stream: bool = True
    chunk_min_chars: int = 40
    parallel_tools: bool = True
    tool_timeout: float | None = None
    output_type: Any = str
    output_mode: OutputMode = "auto"
    output_retries: int = 2
    owner: str | None = None
    max_tool_calls: int = MAX_TOOL_CALLS
    max_answer_chars: int = MAX_ANSWER_CHARS
    when_cut: WhenCut = "finish"
    _tools_by_name: dict[str, Tool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _output: list[OutputSpec[Any]] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.model is None) == (self.routes is None):
            raise UsageError(
                "an agent needs exactly one way to reach a model: model=<model effect id> "
                "(or a provider, with loom.Agent) or routes=Routes(...), "
                + ("not both" if self.model is not None else "and neither was given")
            )
        if self.max_turns < 1:
            raise UsageError("max_turns must be at least 1")
        for bound in ("max_tool_calls", "max_answer_chars"):
            value = getattr(self, bound)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{bound} must be a whole number of at least 1, got {value!r}")
        if self.when_cut not in WHEN_CUT:
            raise UsageError(f"when_cut must be one of {', '.join(WHEN_CUT)}, got {self.when_cut!r}")
        if self.tool_timeout is not None and not self.tool_timeout > 0:
            raise UsageError(f"tool_timeout must be a positive number of seconds, got {self.tool_timeout!r}")
        names = [t.name for t in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UsageError(
                f"two tools of one agent share the name {dupes[0]!r}: the model could not tell them apart. "
                "Rename one (@loom.tool(name=...)), or give an MCP server's tools a prefix "
                "(loom.mcp_tools(..., prefix='srv_'))."
            )
        self._tools_by_name.update({t.name: t for t in self.tools})
        spec = output_spec(self.output_type, self.output_mode, self.output_retries)
        if spec is not None:
            if spec.mode == "tool" and spec.tool_spec is not None and spec.tool_spec.name in self._tools_by_name:
                raise UsageError(
                    f"a tool is named {spec.tool_spec.name!r}, the tool a typed answer comes through: rename it"
                )
            self._output.append(spec)
        if self.skills and self.skill_selector is None:
            raise UsageError("skills=... needs skill_selector=... (a policy choosing skill names)")

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or None."""
        return self._tools_by_name.get(name)

    @property
    def output(self) -> OutputSpec[Any] | None:
        """How the typed answer is asked for and checked; None for text (``output_type=str``)."""
        return self._output[0] if self._output else None
