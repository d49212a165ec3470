"""The reasoning an OpenAI-compatible chat server puts on its assistant messages, in whichever
shape it uses, kept as one ``ReasoningBlock(type="chat_reasoning")`` and sent back as received.

Servers disagree on the field:

* ``reasoning_content``: text (DeepSeek, vLLM, LiteLLM's proxy);
* ``reasoning``: text (OpenRouter, Ollama, Groq, newer vLLM);
* ``reasoning_details``: OpenRouter's structured blocks (text, summaries, encrypted data, signed);
* ``thinking_blocks``: LiteLLM's proxy in front of Anthropic or Bedrock models, the model's signed
  ``thinking`` / ``redacted_thinking`` blocks. The model refuses the next turn of a tool loop
  whose assistant message lacks them (a 400 that no retry mends).

Whatever fields the server sent are journaled by name in the block's ``item`` and put back on the
same assistant message on every later request, so each server reads back exactly its own shape.
A streamed answer's fields are assembled from the deltas: text fields joined, block lists merged
by each block's ``index`` (or its position when it has none), a block's text pieces joined and its
last non-empty signature kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from loom_nb.messages import Message, ReasoningBlock

#: The assistant message's reasoning fields, as the servers name them.
TEXT_FIELDS: Final = ("reasoning_content", "reasoning")
BLOCK_FIELDS: Final = ("reasoning_details", "thinking_blocks")
FIELDS: Final = TEXT_FIELDS + BLOCK_FIELDS
#: A streamed block's keys whose pieces are joined (the rest: the first value given, but a signature
#: the last non-empty one).
_JOINED: Final = ("thinking", "text", "summary", "data")
_READABLE: Final = ("thinking", "text", "summary")


def _given(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def reasoning_block(message: Mapping[str, Any]) -> ReasoningBlock | None:
    """The reasoning on an assistant ``message`` (a response's ``choices[0].message``), or None."""
    fields = {name: message[name] for name in FIELDS if _given(message.get(name))}
    if not fields:
        return None
    return ReasoningBlock(type="chat_reasoning", text=readable(fields), item=fields)


def readable(fields: Mapping[str, Any]) -> str:
    """The reasoning a person can read: a text field, else the blocks' texts, one per line."""
    for name in TEXT_FIELDS:
        if isinstance(fields.get(name), str):
            return str(fields[name])
    for name in BLOCK_FIELDS:
        blocks = fields.get(name)
        if isinstance(blocks, list):
            texts = [_block_text(b) for b in blocks if isinstance(b, Mapping)]
            return "\n".join(t for t in texts if t)
    return ""


def _block_text(block: Mapping[str, Any]) -> str:
    for key in _READABLE:
        value = block.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def fields_sent_back(message: Message) -> dict[str, Any]:
    """The reasoning fields to put back on ``message`` in a request (empty when it has none from
    this wire: Anthropic's and the Responses API's blocks are theirs alone)."""
    out: dict[str, Any] = {}
    for block in message.reasoning:
        if block.type == "chat_reasoning" and block.item:
            out.update(block.item)
    return out


class ReasoningStream:
    """The reasoning fields of one streamed answer, assembled from its deltas."""

    __slots__ = ("blocks", "texts")

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}
        self.blocks: dict[str, dict[int, dict[str, Any]]] = {}

    def feed(self, delta: Mapping[str, Any]) -> None:
        """Keep the reasoning pieces in one chunk's ``delta``."""
        for name in TEXT_FIELDS:
            piece = delta.get(name)
            if isinstance(piece, str) and piece:
                self.texts.setdefault(name, []).append(piece)
        for name in BLOCK_FIELDS:
            pieces = delta.get(name)
            if isinstance(pieces, list) and pieces:
                self._merge(self.blocks.setdefault(name, {}), pieces)

    @staticmethod
    def _merge(blocks: dict[int, dict[str, Any]], pieces: Iterable[Any]) -> None:
        for position, piece in enumerate(pieces):
            if not isinstance(piece, Mapping):
                continue
            index, last = piece.get("index"), max(blocks, default=None)
            if isinstance(index, int):
                key = index
            elif position == 0 and last is not None:
                key = last  # a chunk's first piece without an index continues the block being streamed
            else:
                key = 0 if last is None else last + 1  # any further piece starts a block
            block = blocks.setdefault(key, {})
            for name, value in piece.items():
                if name in _JOINED and isinstance(value, str):
                    block[name] = block.get(name, "") + value
                elif name == "signature":
                    if value:
                        block[name] = value
                    else:
                        block.setdefault(name, value)
                else:
                    block.setdefault(name, value)

    def block(self) -> ReasoningBlock | None:
        """The assembled reasoning, or None when the stream carried none."""
        fields: dict[str, Any] = {name: "".join(parts) for name, parts in self.texts.items()}
        fields |= {name: [blocks[i] for i in sorted(blocks)] for name, blocks in self.blocks.items()}
        return reasoning_block(fields)
