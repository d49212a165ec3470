"""An MCP tool call's result as the step records it and the model reads it (``recorded_output``).

Text only: the text (blocks joined by newlines); with structured content and text only: the
structured JSON; anything else: ``{"content": [...], "structured": ...}`` where each image, audio
or binary resource is ``{"type", "mime_type", "ref", "size"}``, its bytes in the content store
(never base64 in the journal).

A result larger than ``max_result_bytes`` (``DEFAULT_MAX_RESULT_BYTES`` unless set; its text, or
its JSON) is never recorded whole: its bytes go to the content store, and the step records (and the
model reads) its first ``max_result_bytes`` bytes followed by a note that says so and names the
stored content. Every string is scrubbed of the server's secrets first.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loom_nb.effects.claimcheck import ContentStore
from loom_nb.errors import McpToolError
from loom_nb.journal.canonical import canonical_json

if TYPE_CHECKING:
    from mcp.types import CallToolResult

#: The size above which a result is cut for the model and kept whole in the content store only.
DEFAULT_MAX_RESULT_BYTES = 1_000_000


def recorded_output(
    result: CallToolResult,
    store: ContentStore,
    *,
    tool: str,
    server: str,
    tainted: bool,
    max_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
    redact: Callable[[Any], Any] = lambda value: value,
) -> Any:
    """A call's result as the step records it (and the model reads it); see the module docstring.

    Args:
        result: The SDK's result.
        store: Where images, audio, blobs and results past ``max_bytes`` go.
        tool: The tool's name on the server (named in errors and notes).
        server: The server's label.
        tainted: Whether the bytes stored are tainted (untrusted).
        max_bytes: The size above which the result is cut (None: never).
        redact: Scrubs a JSON value of the server's secrets.

    Raises:
        McpToolError: the result is an error (``isError``); its text is the message.
    """
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in result.content:
        dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True)
        if block.type == "text":
            texts.append(block.text)
        elif block.type in ("image", "audio"):
            dumped = _stored(block.type, dumped["data"], dumped["mimeType"], store, tainted=tainted)
        elif block.type == "resource" and "blob" in dumped["resource"]:
            resource = dumped["resource"]
            stored = _stored(
                "blob",
                resource.pop("blob"),
                resource.get("mimeType", "application/octet-stream"),
                store,
                tainted=tainted,
            )
            dumped["resource"] = {**resource, **stored}
        blocks.append(dumped)
    if result.is_error:
        text = "\n".join(texts) or "(no message)"
        text = _bounded(redact(text), max_bytes, store, tool=tool, server=server, tainted=tainted)
        raise McpToolError(f"the MCP tool {tool!r} (server {server}) reported an error: {text}")
    output: Any
    if len(texts) == len(blocks):
        output = result.structured_content if result.structured_content is not None else "\n".join(texts)
    else:
        output = {"content": blocks}
        if result.structured_content is not None:
            output["structured"] = result.structured_content
    return _bounded(redact(output), max_bytes, store, tool=tool, server=server, tainted=tainted)


def _bounded(output: Any, max_bytes: int | None, store: ContentStore, *, tool: str, server: str, tainted: bool) -> Any:
    """``output``, or the first ``max_bytes`` bytes of its text (or JSON) and a note when it is
    larger (the whole then in ``store``)."""
    if max_bytes is None:
        return output
    text = output if isinstance(output, str) else canonical_json(output)
    if len(text) <= max_bytes // 4:  # no UTF-8 character is longer than 4 bytes
        return output
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return output
    ref = store.put(data, media_type="text/plain" if isinstance(output, str) else "application/json", tainted=tainted)
    head = data[:max_bytes].decode("utf-8", "ignore")  # a character cut in two is dropped
    return f"{head}\n{_note(tool, server, len(data), max_bytes, ref)}"


def _note(tool: str, server: str, size: int, max_bytes: int, ref: str) -> str:
    return (
        f"[loom: the MCP tool {tool!r} answered {size:,} bytes, more than max_result_bytes={max_bytes:,}: "
        f"only the first {max_bytes:,} are shown. The whole answer is stored as {ref} (server {server}).]"
    )


def _stored(kind: str, data: str, media_type: str, store: ContentStore, *, tainted: bool) -> dict[str, Any]:
    raw = base64.b64decode(data)
    ref = store.put(raw, media_type=media_type, tainted=tainted)
    return {"type": kind, "mime_type": media_type, "ref": ref, "size": len(raw)}
