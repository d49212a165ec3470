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

    ``complete`` is always called with the step's ``idempotency_key`` (``<execution_id>:<step_id>``,
    the same on every retry and after recovery). A provider whose wire supports one sends it (HTTP
    providers: the ``Idempotency-Key`` header) so the server can answer a repeated call once; a
    provider without such a wire (a local or scripted model) accepts it and ignores it.
    """

    name: str

    async def complete(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        """Answer ``request`` with the model's response; stream text deltas to ``on_delta`` as they
        come; send ``idempotency_key`` (the step's stable key) where the wire supports one, else
        ignore it."""
        ...
