"""Images as image content: the ring's link that reads, for a model call about to be sent, the bytes
of every image a tool gave (``Message.images``) from the content store.

The journal holds an image only as a reference (``ImageRef``: digest, media type, size); the
request the provider receives carries the bytes in ``ImageRef.data``, a field no dump includes, so
they go to the server and never back to the journal. A provider that takes images (``OpenAIChat``,
``OpenAIResponses``, ``AnthropicMessages``) sends them as image content; one that does not reads
the tool's text, which names each image by reference. An image the store no longer holds goes as
its reference, with a note that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from operator import attrgetter

from loom_nb.effects.claimcheck import ContentStore
from loom_nb.effects.prefix_scan import PrefixScan
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, EffectSpec, Next
from loom_nb.messages import ImageRef, Message, ModelRequest

_MODEL_KINDS = frozenset({"model", "summarizer"})
#: Whether any message of a request carries images (in time proportional to what is new).
_any_images = PrefixScan(attrgetter("images"))


class ImageContent:
    """The ring's image link (innermost, next to the effect).

    Args:
        store: Returns the content store images are read from (None: none set yet; the call goes
            on with references only).
    """

    def __init__(self, store: Callable[[], ContentStore | None]) -> None:
        self.store = store

    def acts_on(self, spec: EffectSpec) -> bool:
        """Only model and compaction calls send images."""
        return spec.kind in _MODEL_KINDS

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Fill in the bytes of the request's images (model and compaction calls only)."""
        if call.spec.kind not in _MODEL_KINDS:
            return await next(call)
        store = self.store()
        request = call.input
        if store is None or not isinstance(request, ModelRequest | dict):
            return await next(call)
        if isinstance(request, dict):
            if not any(isinstance(m, dict) and m.get("images") for m in request.get("messages") or ()):
                return await next(call)
            request = ModelRequest.model_validate(request)
        if not _any_images(request.messages):
            return await next(call)
        messages = tuple(_with_bytes(m, store) for m in request.messages)
        return await next(replace(call, input=request.model_copy(update={"messages": messages})))


def _with_bytes(message: Message, store: ContentStore) -> Message:
    if not message.images:
        return message
    images = tuple(_read(image, store) for image in message.images)
    return message.model_copy(update={"images": images})


def _read(image: ImageRef, store: ContentStore) -> ImageRef:
    if image.data is not None:
        return image
    return image.model_copy(update={"data": store.get(image.ref)})
