"""Retry: a policy with exponential backoff and jitter on the runtime's clock; every attempt journaled."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from loom_nb.errors import EffectTimeout, McpServerGone, OutcomeUnknownError, ProviderError, RetriesExhaustedError
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, EffectSpec, Next


def default_retryable(error: BaseException) -> bool:
    """Provider errors marked retryable (429, 5xx, timeouts), an MCP server that died mid-call, a
    call past its timeout (``EffectTimeout``), and timeouts / connection errors."""
    if isinstance(error, (ProviderError, McpServerGone, EffectTimeout)):
        return bool(error.retryable)
    return isinstance(error, (TimeoutError, ConnectionError))


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How an effect is retried.

    Attributes:
        attempts: Most attempts in all (1: no retry). Counted across recovery, not restarted.
        initial: Delay before the second attempt, seconds.
        multiplier: Each further delay is this many times the last.
        max_delay: Cap on one delay, seconds.
        jitter: Fraction of random spread around each delay (0.1: +/-10%).
        retryable: Which errors are worth another attempt.
        rng: Source of jitter in [0, 1).
    """

    attempts: int = 3
    initial: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.1
    retryable: Callable[[BaseException], bool] = default_retryable
    rng: Callable[[], float] = field(default=random.random, repr=False)

    def delay(self, attempt: int, error: BaseException) -> float:
        """The wait after failed attempt number ``attempt`` (honouring the error's ``retry_after``)."""
        base = min(self.max_delay, self.initial * self.multiplier ** (attempt - 1))
        if self.jitter:
            base *= 1 + self.jitter * (2 * self.rng() - 1)
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > base:
            base = float(retry_after)
        return max(0.0, base)


class Retry:
    """Retries a failing call per the effect's ``retry`` policy (or a default policy).

    An ``OutcomeUnknownError`` (a timeout, a server gone mid-call) of a non-idempotent effect is
    never retried here: the call may have taken effect, so the kernel parks it for a person.

    Args:
        default: The policy for effects registered without one (None: no retry).
    """

    def __init__(self, default: RetryPolicy | None = None) -> None:
        self._default = default

    @property
    def default(self) -> RetryPolicy | None:
        """The policy for effects registered without one (fixed: ``acts_on`` relies on it)."""
        return self._default

    def acts_on(self, spec: EffectSpec) -> bool:
        """Only an effect with a policy (its own or the default) is ever retried."""
        return isinstance(spec.retry, RetryPolicy) or self._default is not None

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Call ``next`` until it succeeds, the error is not retryable, or attempts run out."""
        policy = call.spec.retry if isinstance(call.spec.retry, RetryPolicy) else self._default
        if policy is None:
            return await next(call)
        while True:
            try:
                return await next(call)
            except Exception as error:
                attempt = call.context.attempt
                in_doubt = isinstance(error, OutcomeUnknownError) and not call.spec.idempotent
                if in_doubt or not policy.retryable(error):
                    raise
                if attempt >= policy.attempts:
                    raise RetriesExhaustedError(
                        f"effect {call.spec.effect_id!r} (step {call.context.step_id!r} of execution "
                        f"{call.context.execution_id!r}) failed {attempt} attempts; the last: "
                        f"{type(error).__name__}: {error}"
                    ) from error
                next_attempt = await call.on_retry(error, policy.delay(attempt, error))
                call = call.with_attempt(next_attempt)
