"""Fast paths of the loop's JSON work give exactly what the slow ones give: a message's byte size
(``message_bytes``) whatever its text, tool-call arguments and reasoning hold (floats, surrogates,
control characters, number keys, big integers)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.journal.canonical import canonical_json
from loom_nb.messages import Message, ReasoningBlock, ToolCall, message_bytes

TEXT = st.text(st.characters(exclude_categories=()), max_size=8)  # lone surrogates, controls included
ASCII = st.text(st.characters(max_codepoint=127), max_size=8)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    ASCII,
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(TEXT, ASCII), inner, max_size=3),
        st.dictionaries(st.integers(-20, 20), inner, max_size=3),
    ),
    max_leaves=10,
)
ARGUMENTS = st.dictionaries(st.one_of(TEXT, ASCII), VALUES, max_size=3)
CALLS = st.builds(ToolCall, id=ASCII, name=TEXT, arguments=ARGUMENTS, raw_arguments=st.one_of(st.none(), TEXT))
BLOCKS = st.builds(
    ReasoningBlock,
    type=st.sampled_from(["thinking", "redacted_thinking", "reasoning_item"]),
    text=TEXT,
    signature=ASCII,
    data=TEXT,
    item=st.one_of(st.none(), ARGUMENTS),
)
MESSAGES = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    text=st.one_of(TEXT, ASCII),
    tool_calls=st.lists(CALLS, max_size=2).map(tuple),
    tool_call_id=st.one_of(st.none(), ASCII),
    name=st.one_of(st.none(), TEXT),
    is_error=st.booleans(),
    tainted=st.booleans(),
    refusal=st.one_of(st.none(), TEXT),
    reasoning=st.lists(BLOCKS, max_size=2).map(tuple),
)


def _canonical_size(message: Message) -> int:
    """The definition: UTF-8 size of the canonical JSON of the message's dump (what the fast path
    must equal, error included)."""
    return len(canonical_json(message.model_dump(mode="json")).encode("utf-8"))


def _outcome(fn: Any, message: Message) -> Any:
    try:
        return fn(message)
    except Exception as exc:  # the same error type either way (e.g. a float the journal refuses)
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(message=MESSAGES)
def test_message_bytes_fast_path(message: Message) -> None:
    assert _outcome(message_bytes, message) == _outcome(_canonical_size, message)


def test_message_bytes_of_escapes_and_non_ascii() -> None:
    text = 'a"b\\c\n\r\t\b\f\x00\x1f\x7f\u2028é\U0001f600\ud83d\ude00\ud800'
    call = ToolCall(id="c", name="n", arguments={"k": [text, 1.5, 10**40, None, True, {"x": 1e-7}]})
    for message in (
        Message.user(text),
        Message.assistant(text, [call]),
        Message.assistant("plain", [ToolCall(id="c", name="n", arguments={"k": text, "n": 2})]),
        Message.tool(call, text, is_error=True, tainted=True),
        Message(role="assistant", text="t", reasoning=(ReasoningBlock(type="reasoning_item", item={"a": text}),)),
    ):
        assert message_bytes(message) == _canonical_size(message)
