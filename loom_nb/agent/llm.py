"""Plug a ``ModelProvider`` into the effect ring: ``llm_effect`` and ``summarizer_effect``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from loom_nb.kernel.effect_registry import EffectContext
from loom_nb.messages import Message, ModelRequest, bounded_response
from loom_nb.providers.base import ModelProvider

ModelEffect = Callable[[Any, EffectContext], Awaitable[dict[str, Any]]]


def llm_effect(provider: ModelProvider) -> ModelEffect:
    """An effect function that sends a ``ModelRequest`` to ``provider``, streaming its deltas.

    Register it with ``kind="model"``: ``runtime.effects.register("model.main", llm_effect(p),
    kind="model", idempotent=True, retry=RetryPolicy())`` (``loom.Agent`` does this for you).
    The step's idempotency key is always passed; the provider sends it where its wire supports one.
    """

    async def model_call(request: Any, effect_context: EffectContext) -> dict[str, Any]:
        req = request if isinstance(request, ModelRequest) else ModelRequest.model_validate(request)
        response = await provider.complete(
            req, on_delta=effect_context.emit_delta, idempotency_key=effect_context.idempotency_key
        )
        # Journaled without the fields left at their defaults (empty tool calls, null ids...):
        # ModelResponse.model_validate gives the same response back, and the log stays small.
        return bounded_response(response).model_dump(mode="json", exclude_defaults=True)

    model_call.__qualname__ = f"llm_effect({getattr(provider, 'name', type(provider).__name__)})"
    return model_call


def summarizer_effect(provider: ModelProvider, *, instructions: str | None = None) -> ModelEffect:
    """An effect function for ``Compaction(effect_id=...)``: summarises the messages it is sent.

    Register it with ``kind="summarizer"``. ``instructions`` replaces the loop's default
    summarising instruction (the first system message of the request).
    """
    inner = llm_effect(provider)

    async def summarize(request: Any, effect_context: EffectContext) -> dict[str, Any]:
        req = request if isinstance(request, ModelRequest) else ModelRequest.model_validate(request)
        if instructions is not None:
            rest = tuple(m for m in req.messages if m.role != "system")
            req = req.model_copy(update={"messages": (Message.system(instructions), *rest), "tools": ()})
        return await inner(req, effect_context)

    summarize.__qualname__ = f"summarizer_effect({getattr(provider, 'name', type(provider).__name__)})"
    return summarize
