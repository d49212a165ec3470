"""The ``ModelProvider`` protocol every model client implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from loom_nb.messages import ModelRequest, ModelResponse

#: A callback that receives each text delta as the model streams it.
DeltaSink = Callable[[str], None]


@runtime_checkable
class ModelProvider(Protocol):
    """A model client: one request in, one response out, text deltas streamed to ``on_delta``.

    Providers raise ``ProviderHTTPError`` / ``ProviderTimeout`` (retryable when ``.retryable``) and
    ``ProviderProtocolError`` (a malformed response); never raw transport errors.
    """

    name: str

    async def complete(self, request: ModelRequest, *, on_delta: DeltaSink | None = None) -> ModelResponse:
        """Send ``request`` and return the model's response."""
        ...
