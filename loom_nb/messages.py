"""Message value types shared by providers and the agent loop, and a transcript's running byte count.

These sit low in the layering (beside the journal) so that ``providers/`` and ``agent/`` can both
use them without depending on each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

from loom_nb.journal.canonical import canonical_json

Role = Literal["system", "user", "assistant", "tool"]


def _empty(value: Any) -> bool:
    """True for a field added after the journal format was fixed, left at its empty default (not dumped)."""
    return not value


#: Tool-call arguments nested deeper than this (objects and arrays) are refused as an invalid call.
MAX_ARGUMENT_DEPTH = 64
#: Tool-call arguments larger than this (characters of their JSON text) are refused as an invalid call.
MAX_ARGUMENT_CHARS = 1_000_000
#: How ``raw_arguments`` of refused arguments begins (followed by the reason and an excerpt).
REFUSED_PREFIX = "[refused: "
_EXCERPT_CHARS = 200


def _depth_over(value: Any, limit: int) -> bool:
    """True when ``value`` nests objects / arrays deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def refused_arguments(reason: str, text: str) -> str:
    """The ``raw_arguments`` of a call whose arguments were refused: ``[refused: <reason>] <excerpt>``."""
    return f"{REFUSED_PREFIX}{reason}] {text[:_EXCERPT_CHARS]}"


def refusal_reason(raw_arguments: str) -> str | None:
    """Why a tool call's arguments were refused (too deep, too large), or None for ordinary raw text."""
    if not raw_arguments.startswith(REFUSED_PREFIX):
        return None
    reason, sep, _ = raw_arguments[len(REFUSED_PREFIX) :].partition("] ")
    return reason if sep else None


def bound_arguments(arguments: Any, raw_arguments: Any) -> tuple[Any, Any]:
    """``(arguments, raw_arguments)`` of a tool call, with arguments nested deeper than
    ``MAX_ARGUMENT_DEPTH`` or longer than ``MAX_ARGUMENT_CHARS`` (parsed or raw) replaced by ``({},
    "[refused: <reason>] <excerpt>")``: an invalid call the agent loop hands back to the model, never
    a value too deep to journal or too large to resend every turn."""
    if isinstance(raw_arguments, str) and len(raw_arguments) > MAX_ARGUMENT_CHARS:
        return {}, refused_arguments(
            f"{len(raw_arguments):,} characters, more than {MAX_ARGUMENT_CHARS:,}", raw_arguments
        )
    if not isinstance(arguments, dict) or not arguments:
        return arguments, raw_arguments
    if _depth_over(arguments, MAX_ARGUMENT_DEPTH):
        return {}, refused_arguments(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels", str(list(arguments)))
    try:
        text = canonical_json(arguments)
    except Exception:
        return arguments, raw_arguments  # not JSON at all: journaling the step reports it, as before
    if len(text) > MAX_ARGUMENT_CHARS:
        return {}, refused_arguments(f"{len(text):,} characters, more than {MAX_ARGUMENT_CHARS:,}", text)
    return arguments, raw_arguments


class ToolCall(BaseModel):
    """A tool call the model asked for.

    Attributes:
        id: The provider's id for the call (tool results refer to it).
        name: The tool's name.
        arguments: The parsed JSON object of arguments (empty when they did not parse).
        raw_arguments: The argument text as received when it was not a JSON object, else None.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


class ReasoningBlock(BaseModel):
    """A block of the model's reasoning, kept to be sent back unchanged on the next turn.

    Anthropic's extended thinking signs each block, and OpenAI's Responses API returns reasoning
    items: a tool loop with reasoning on must send the last assistant turn's reasoning back exactly as
    received, so it is journaled with the model step's output. Each wire sends back only its own kind.

    Attributes:
        type: ``thinking`` (Anthropic: readable reasoning and its signature), ``redacted_thinking``
            (Anthropic: encrypted reasoning, in ``data``), ``reasoning_item`` (OpenAI Responses: the
            item, in ``item``) or ``chat_reasoning`` (an OpenAI-compatible chat server: the assistant
            message's reasoning fields, ``reasoning_content``, ``reasoning``, ``reasoning_details``
            or ``thinking_blocks``, by name in ``item``, as the server sent them).
        text: The readable reasoning (a thinking block's text, a reasoning item's summary); empty when
            the provider shows none.
        signature: The provider's signature over the block (``thinking`` blocks).
        data: The encrypted reasoning (``redacted_thinking`` blocks).
        item: The reasoning item as the API accepts it back (``reasoning_item`` blocks), or the
            message's reasoning fields (``chat_reasoning`` blocks).
    """

    model_config = ConfigDict(frozen=True)

    type: Literal["thinking", "redacted_thinking", "reasoning_item", "chat_reasoning"] = "thinking"
    text: str = ""
    signature: str = ""
    data: str = ""
    item: dict[str, Any] | None = Field(default=None, exclude_if=_empty)


class ImageRef(BaseModel):
    """An image a tool gave (an MCP image block), by reference: its bytes stay in the content store
    and reach a provider that takes images as image content when a request is sent
    (``effects/images.py``), never inlined in the journal.

    Attributes:
        ref: The content store's digest of the bytes.
        mime_type: ``image/png``, ``image/jpeg``...
        size: The bytes' length.
        data: The bytes, filled in for the request being sent only (never dumped or journaled);
            None when they were not looked up or the store no longer holds them.
    """

    model_config = ConfigDict(frozen=True)

    ref: str
    mime_type: str
    size: int = 0
    data: bytes | None = Field(default=None, exclude=True, repr=False)


class Message(BaseModel):
    """One message of a transcript.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        text: The text content.
        tool_calls: Tool calls (assistant messages only).
        reasoning: The model's reasoning blocks, in the order received (assistant messages only).
            Left out of every dump while empty, so messages without reasoning serialize (and are
            journaled, digested and counted) exactly as before the field existed.
        images: Images a tool's result carried (tool messages only), by reference; left out of
            every dump while empty.
        trusted_prefix: How many characters at the start of a tainted ``text`` are loom's own (the
            note that a person edited the call): the prompt guard fences only the rest. Never
            dumped (not journaled, digested or counted); a message read back from JSON has 0, and
            its whole text is fenced.
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    tainted: bool = False
    refusal: str | None = Field(default=None, exclude_if=_empty)
    reasoning: tuple[ReasoningBlock, ...] = Field(default=(), exclude_if=_empty)
    images: tuple[ImageRef, ...] = Field(default=(), exclude_if=_empty)
    trusted_prefix: int = Field(default=0, exclude=True)

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls(role="system", text=text)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls(role="user", text=text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Sequence[ToolCall] = (), *, refusal: str | None = None) -> Message:
        """An assistant message (``refusal``: the model's refusal, kept apart from ``text``)."""
        return cls(role="assistant", text=text, tool_calls=tuple(tool_calls), refusal=refusal)

    @classmethod
    def tool(
        cls, call: ToolCall, text: str, *, is_error: bool = False, tainted: bool = False, trusted_prefix: int = 0
    ) -> Message:
        """The result of ``call`` as a tool message (``trusted_prefix``: see the attribute)."""
        return cls(
            role="tool",
            text=text,
            tool_call_id=call.id,
            name=call.name,
            is_error=is_error,
            tainted=tainted,
            trusted_prefix=trusted_prefix,
        )


class Usage(BaseModel):
    """Token usage (and cost, when the provider reports one) of a model call.

    Attributes:
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        cost: Cost in the provider's currency, if known.
        reasoning_tokens: The part of ``output_tokens`` spent on reasoning, when the provider reports
            it (left out of every dump while 0, like ``Message.reasoning``).
    """

    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    reasoning_tokens: int = Field(default=0, exclude_if=_empty)

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=cost,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ToolSpec(BaseModel):
    """A tool as the model sees it.

    Attributes:
        name: The tool's name.
        description: What it does (from the function's docstring).
        parameters: JSON schema of its arguments object.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class OutputFormat(BaseModel):
    """A JSON schema the model's final answer must follow, sent as the wire's native structured
    output (OpenAI chat ``response_format``, Responses ``text.format``, both with ``strict``).

    Attributes:
        name: The schema's name (letters, digits, ``_`` and ``-``).
        json_schema: The JSON schema (strict: every object closed, every property required).
        strict: Ask the provider to enforce the schema exactly.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    json_schema: dict[str, Any]
    strict: bool = True


class ModelRequest(BaseModel):
    """What a model call is sent.

    Attributes:
        messages: The transcript, system messages included (first).
        tools: The tools the model may call.
        model: A provider-specific model name override, if any.
        max_tokens: An output cap, if any.
        temperature: Sampling temperature, if any.
        output: The schema of a typed final answer, sent natively (``Agent(output_mode="native")``);
            None for text answers, and when the answer comes through a ``final_result`` tool.
    """

    model_config = ConfigDict(frozen=True)

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    output: OutputFormat | None = Field(default=None, exclude_if=_empty)

    @property
    def system(self) -> str | None:
        """The text of the system messages joined, or None."""
        parts = [m.text for m in self.messages if m.role == "system"]
        return "\n\n".join(parts) if parts else None


class ModelResponse(BaseModel):
    """A model's answer.

    Attributes:
        message: The assistant message (text and tool calls).
        usage: Token usage.
        finish_reason: Why the model stopped (``stop``, ``tool_calls``, ``length``, ``refusal``...), if
            known; ``refusal`` when the model declined (its words are in ``message.refusal``).
        response_id: The provider's id of the response, if any.
        model: The model the server says answered (``gpt-4o-mini-2024-07-18``), if it says; left out
            of every dump while None, so responses without it are journaled exactly as before.
    """

    model_config = ConfigDict(frozen=True)

    message: Message
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    response_id: str | None = None
    model: str | None = Field(default=None, exclude_if=_empty)

    @classmethod
    def text(cls, text: str, *, usage: Usage | None = None) -> ModelResponse:
        """A final answer with no tool calls."""
        return cls(message=Message.assistant(text), usage=usage or Usage(), finish_reason="stop")

    @classmethod
    def refused(cls, refusal: str, *, usage: Usage | None = None) -> ModelResponse:
        """A refusal: the model declined to answer, saying ``refusal``."""
        return cls(message=Message.assistant(refusal=refusal), usage=usage or Usage(), finish_reason="refusal")

    @classmethod
    def tool_calls(
        cls,
        calls: Iterable[tuple[str, dict[str, Any]] | ToolCall],
        *,
        text: str = "",
        usage: Usage | None = None,
    ) -> ModelResponse:
        """A response that calls tools: ``[(name, arguments), ...]`` (ids are assigned ``call_<j>``)."""
        built: list[ToolCall] = []
        for j, call in enumerate(calls):
            if isinstance(call, ToolCall):
                built.append(call)
            else:
                name, arguments = call
                built.append(ToolCall(id=f"call_{j}", name=name, arguments=dict(arguments)))
        return cls(message=Message.assistant(text, built), usage=usage or Usage(), finish_reason="tool_calls")


def _sized_exactly(value: Any) -> bool:
    """True when ``value`` holds only dicts with ``str`` keys, lists, tuples, strings, ints, bools and
    None: plain data whose JSON text pydantic writes as long as canonical JSON writes it (no float,
    whose digits the two write differently, and no other type)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key in item:
                if type(key) is not str:
                    return False
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is not str and kind is not int and kind is not bool and item is not None:
            return False
    return True


def message_bytes(message: Message) -> int:
    """UTF-8 size of a message's canonical JSON (the unit of the transcript byte count)."""
    # Fast path, exact: a size does not depend on the order of the keys, and pydantic's JSON of a
    # ``Message`` is compact and escapes strings as ``json.dumps(ensure_ascii=False)`` does (the same
    # characters, as many bytes), so its length is the canonical text's wherever no value is a float
    # (written with other digits) and none holds a surrogate (pydantic refuses those: slow path).
    # Every field but the tool calls' arguments and the reasoning items is a validated str/bool/None.
    # ``test_message_bytes_fast_path`` checks this against the canonical text.
    if (
        type(message) is Message
        and all(_sized_exactly(call.arguments) for call in message.tool_calls)
        and all(block.item is None or _sized_exactly(block.item) for block in message.reasoning)
    ):
        try:
            return len(_MESSAGE_SERIALIZER.to_json(message))
        except PydanticSerializationError:
            pass
    return len(canonical_json(message.model_dump(mode="json")).encode("utf-8"))


_MESSAGE_SERIALIZER = Message.__pydantic_serializer__


class Transcript:
    """A list of messages with a running UTF-8 byte count, updated in O(1) per appended message."""

    __slots__ = ("_messages", "_sizes", "nbytes")

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = []
        self._sizes: list[int] = []
        self.nbytes = 0
        for m in messages:
            self.append(m)

    def append(self, message: Message) -> None:
        """Append a message and add its size to the running count."""
        size = message_bytes(message)
        self._messages.append(message)
        self._sizes.append(size)
        self.nbytes += size

    def extend(self, messages: Iterable[Message]) -> None:
        """Append several messages."""
        for m in messages:
            self.append(m)

    def replace(self, messages: Iterable[Message]) -> None:
        """Replace the whole transcript (after compaction)."""
        self._messages, self._sizes, self.nbytes = [], [], 0
        self.extend(messages)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages, oldest first."""
        return tuple(self._messages)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Per-message byte sizes, aligned with ``messages``."""
        return tuple(self._sizes)

    def __len__(self) -> int:
        return len(self._messages)


def bounded_response(response: ModelResponse) -> ModelResponse:
    """``response`` with every tool call whose arguments are too deep or too large refused
    (``bound_arguments``). Applied to live model output before it is journaled (``llm_effect``), never
    to a recorded response, so runs recorded before a limit changed replay as they were recorded."""
    calls = response.message.tool_calls
    fixed = []
    for call in calls:
        arguments, raw = bound_arguments(call.arguments, call.raw_arguments)
        fixed.append(
            call
            if raw is call.raw_arguments
            else call.model_copy(update={"arguments": arguments, "raw_arguments": raw})
        )
    if all(a is b for a, b in zip(fixed, calls, strict=True)):
        return response
    message = response.message.model_copy(update={"tool_calls": tuple(fixed)})
    return response.model_copy(update={"message": message})
