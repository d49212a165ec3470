"""Quotas and metering: usage recorded on ``step_completed``; limits refuse a call before it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from loom_nb.errors import QuotaExceededError
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, Next, frozen_instance


@dataclass(frozen=True, kw_only=True)
class Quota:
    """Limits on effect calls. Any limit left None is not enforced.

    Attributes:
        calls: Most calls.
        input_tokens: Most prompt tokens.
        output_tokens: Most completion tokens.
        tokens: Most tokens, input and output together.
        cost: Most cost (in the provider's currency).
    """

    calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens: int | None = None
    cost: float | None = None


@dataclass
class UsageTotals:
    """Running usage totals.

    Attributes:
        calls: Calls made.
        input_tokens: Prompt tokens.
        output_tokens: Completion tokens.
        cost: Cost.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def add(self, usage: Mapping[str, Any]) -> None:
        """Add one call's usage."""
        self.calls += int(usage.get("calls", 1))
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        self.cost += float(usage.get("cost") or 0.0)

    def add_call(self) -> None:
        """Add one call that reported no usage: what ``add({"calls": 1})`` adds (no tokens, no cost)."""
        self.calls += 1

    def as_dict(self) -> dict[str, Any]:
        """The totals as a dict."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }


def usage_of(output: Any) -> dict[str, Any] | None:
    """Token usage carried by an effect's output (a ``ModelResponse`` or a dict with ``usage``)."""
    if type(output) in _PLAIN:  # no attributes of its own and no mapping: it carries none
        return None
    usage = getattr(output, "usage", None)
    if usage is None and isinstance(output, Mapping):
        usage = output.get("usage")
    if usage is None:
        return None
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump()
    if not isinstance(usage, Mapping):
        return None
    out: dict[str, Any] = {
        "calls": 1,
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
    }
    if usage.get("cost") is not None:
        out["cost"] = float(usage["cost"])
    return out


#: Exact types of plain outputs (a tool's text, a number): never a ``usage`` attribute or key.
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _check(scope: str, quota: Quota, used: UsageTotals) -> None:
    checks: list[tuple[str, float | None, float]] = [
        ("calls", quota.calls, used.calls),
        ("input_tokens", quota.input_tokens, used.input_tokens),
        ("output_tokens", quota.output_tokens, used.output_tokens),
        ("tokens", quota.tokens, used.input_tokens + used.output_tokens),
        ("cost", quota.cost, used.cost),
    ]
    for name, limit, value in checks:
        if limit is None:
            continue
        asked = 1 if name == "calls" else 0
        if value + asked > limit or (asked == 0 and value >= limit):
            raise QuotaExceededError(
                f"quota {name} of {scope} exceeded: limit {limit:g}, used {value:g}, asked "
                f"{'1 more call' if asked else 'another call'}. Raise the limit (Quota({name}=...)) "
                "or start a new execution."
            )


class Metering:
    """Meters every call (calls, tokens, cost) and enforces quotas per execution, per principal
    and per effect, refusing a call that would exceed one before it runs.

    An execution's recorded usage is read from the journal once, the first time one of its calls
    meets a limit (one read for every effect of it); calls with no limit to check read nothing.

    Args:
        per_execution: Limits for each execution.
        per_principal: Limits for each principal, across executions (totals of this process).
        load: Returns an execution's recorded usage by effect id (so limits hold across restarts).
    """

    def __init__(
        self,
        *,
        per_execution: Quota | None = None,
        per_principal: Quota | None = None,
        load: Callable[[str], Mapping[str, UsageTotals]] | None = None,
    ) -> None:
        self.per_execution = per_execution
        self.per_principal = per_principal
        self.load = load
        self._by_effect: dict[str, dict[str, UsageTotals]] = {}
        self._executions: dict[str, UsageTotals] = {}
        self._principals: dict[str, UsageTotals] = {}

    def _recorded(self, execution_id: str) -> dict[str, UsageTotals]:
        by_effect = self._by_effect.get(execution_id)
        if by_effect is None:
            by_effect = dict(self.load(execution_id)) if self.load else {}
            total = UsageTotals()
            for per_effect in by_effect.values():
                total.add(per_effect.as_dict())
            self._by_effect[execution_id], self._executions[execution_id] = by_effect, total
        return by_effect

    def totals(self, execution_id: str) -> UsageTotals:
        """This process's view of an execution's usage (all effects)."""
        self._recorded(execution_id)
        return self._executions[execution_id]

    def effect_totals(self, execution_id: str, effect_id: str) -> UsageTotals:
        """This process's view of one effect's usage in an execution."""
        return self._recorded(execution_id).setdefault(effect_id, UsageTotals())

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Check the limits, call ``next``, then add the call's usage to the totals."""
        ctx = call.context
        effect_quota = call.spec.quota if isinstance(call.spec.quota, Quota) else None
        principal = self._principals.get(ctx.principal.name)
        if principal is None:
            principal = self._principals[ctx.principal.name] = UsageTotals()
        if self.per_execution:
            _check(f"execution {ctx.execution_id!r}", self.per_execution, self.totals(ctx.execution_id))
        if self.per_principal:
            _check(f"principal {ctx.principal.name!r}", self.per_principal, principal)
        if effect_quota:
            scope = f"effect {call.spec.effect_id!r} in execution {ctx.execution_id!r}"
            _check(scope, effect_quota, self.effect_totals(ctx.execution_id, call.spec.effect_id))
        result = await next(call)
        # Usage the effect reported itself (``EffectResult.usage``) is what step_completed records
        # and what ``Runtime.usage`` reloads after a restart: meter the same figures live.
        usage = dict(result.usage) if result.usage else usage_of(result.output)
        recorded = ctx.execution_id in self._by_effect  # else the journal has it when a limit first asks
        if usage:
            principal.add(usage)
            if recorded:
                self.effect_totals(ctx.execution_id, call.spec.effect_id).add(usage)
                self._executions[ctx.execution_id].add(usage)
        else:
            principal.add_call()
            if recorded:
                self.effect_totals(ctx.execution_id, call.spec.effect_id).add_call()
                self._executions[ctx.execution_id].add_call()
        if usage and not result.usage:
            result = frozen_instance(EffectResult, output=result.output, usage=usage, tainted=result.tainted)
        return result
