"""Timeout: one attempt of an effect that runs past its ``timeout`` is abandoned as an ``EffectTimeout``.

The link sits inside the retry link, so each attempt has the whole timeout and a timed-out attempt
is journaled like any failed one (``step_failed``, then a retry when the policy allows). The timeout
is real (monotonic) time, ``asyncio.timeout``, not the runtime's clock: it bounds how long a person
or a run waits for a call that may never return, and the injected clock (a ``FakeClock`` in tests)
does not pass while a call blocks. Nothing about it is replayed: a replay reads the recorded failure.

A timed-out call is abandoned, not stopped (an async one is cancelled; a synchronous tool's worker
thread runs on until it returns). ``EffectTimeout`` is an ``OutcomeUnknownError``: a non-idempotent
step parks on an ``InDoubt`` gate for a person (it may have taken effect), never retried by itself.
"""

from __future__ import annotations

import asyncio

from loom_nb.errors import EffectTimeout
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, EffectSpec, Next


def timeout_error(call: EffectCall, seconds: float) -> EffectTimeout:
    """The ``EffectTimeout`` for ``call`` abandoned after ``seconds``: the tool, the step, the
    timeout, what may have happened and the fix."""
    spec, context = call.spec, call.context
    tool = spec.meta.get("tool")
    what = f"tool {tool!r} (effect {spec.effect_id!r})" if tool else f"effect {spec.effect_id!r}"
    outcome = (
        "It is idempotent, so it is retried when its retry policy allows."
        if spec.idempotent
        else "It is not idempotent and may still run or have taken effect, so the step waits on an InDoubt "
        "gate: check whether it happened, then answer happened / run again / fail."
    )
    return EffectTimeout(
        f"{what} did not finish within its timeout of {seconds:g} s (step {context.step_id!r} of execution "
        f"{context.execution_id!r}, attempt {context.attempt}) and was abandoned. {outcome} If it needs longer, "
        "raise the timeout (@loom.tool(timeout=...) or Agent(tool_timeout=...)); if it hangs, make it fail fast."
    )


class Timeout:
    """Abandons an attempt that runs past its effect's ``timeout`` (``EffectSpec.timeout``) with an
    ``EffectTimeout``; an effect without one runs as long as it takes."""

    def acts_on(self, spec: EffectSpec) -> bool:
        """Only an effect with a timeout is timed."""
        return spec.timeout is not None

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Await ``next(call)`` for at most the effect's timeout."""
        seconds = call.spec.timeout
        if seconds is None:
            return await next(call)
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await next(call)
        except TimeoutError:
            if scope.expired():  # ours, not a TimeoutError the effect raised itself
                raise timeout_error(call, seconds) from None
            raise
