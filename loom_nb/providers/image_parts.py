"""A tool message's images as each wire's image content (``Message.images``, their bytes read by
the ring's image link, ``effects/images.py``): base64 for Anthropic, a data URL for OpenAI's two
wires. An image whose bytes are missing is named in a text part instead."""

from __future__ import annotations

import base64
from typing import Any

from loom_nb.messages import ImageRef


def missing_note(image: ImageRef) -> str:
    """The text sent in place of an image whose bytes the content store no longer holds."""
    return f"[loom: image {image.ref} ({image.mime_type}, {image.size:,} bytes) is not in the content store]"


def data_url(image: ImageRef) -> str:
    """``data:<mime>;base64,...`` of an image whose bytes are present."""
    assert image.data is not None
    return f"data:{image.mime_type};base64,{base64.b64encode(image.data).decode('ascii')}"


def anthropic_part(image: ImageRef) -> dict[str, Any]:
    """An Anthropic ``image`` block (or a text block when the bytes are missing)."""
    if image.data is None:
        return {"type": "text", "text": missing_note(image)}
    data = base64.b64encode(image.data).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": data}}


def chat_part(image: ImageRef) -> dict[str, Any]:
    """A chat completions ``image_url`` content part (or a text part when the bytes are missing)."""
    if image.data is None:
        return {"type": "text", "text": missing_note(image)}
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def responses_part(image: ImageRef) -> dict[str, Any]:
    """A Responses API ``input_image`` part (or an ``input_text`` part when the bytes are missing)."""
    if image.data is None:
        return {"type": "input_text", "text": missing_note(image)}
    return {"type": "input_image", "image_url": data_url(image)}
