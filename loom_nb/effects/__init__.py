"""The effect ring: the registry with its interceptors (authorization, quota, retry, guard,
timeout, claim-check), and the ``@tool`` decorator."""

from loom_nb.effects.authz import Authorization
from loom_nb.effects.claimcheck import (
    ClaimCheck,
    ClaimCheckInterceptor,
    ContentStore,
    JournalContentStore,
    contains_envelope,
    is_envelope,
    resolve,
)
from loom_nb.effects.guard import PromptGuard, fence, guard_request
from loom_nb.effects.quota import Metering, Quota, UsageTotals, usage_of
from loom_nb.effects.retry import Retry, RetryPolicy
from loom_nb.effects.ring import EffectRing
from loom_nb.effects.timeout import Timeout
from loom_nb.effects.tool import Tool, tool
from loom_nb.kernel.effect_registry import EffectContext, EffectResult, Principal

__all__ = [
    "Authorization",
    "ClaimCheck",
    "ClaimCheckInterceptor",
    "ContentStore",
    "EffectContext",
    "EffectResult",
    "EffectRing",
    "JournalContentStore",
    "Metering",
    "Principal",
    "PromptGuard",
    "Quota",
    "Retry",
    "RetryPolicy",
    "Timeout",
    "Tool",
    "UsageTotals",
    "contains_envelope",
    "fence",
    "guard_request",
    "is_envelope",
    "resolve",
    "tool",
    "usage_of",
]
