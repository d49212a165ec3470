"""Authorization: an effect's required scopes against the execution's principal."""

from __future__ import annotations

from loom_nb.errors import NotAuthorizedError
from loom_nb.kernel.effect_registry import EffectCall, EffectResult, EffectSpec, Next


class Authorization:
    """Refuses a call whose principal lacks a scope the effect requires; the effect never runs."""

    def acts_on(self, spec: EffectSpec) -> bool:
        """Only an effect that requires scopes has anything to check."""
        return bool(spec.scopes)

    async def __call__(self, call: EffectCall, next: Next) -> EffectResult:
        """Check scopes, then call ``next``."""
        required = call.spec.scopes
        if required:
            principal = call.context.principal
            missing = sorted(required - principal.scopes)
            if missing:
                held = ", ".join(sorted(principal.scopes)) or "none"
                raise NotAuthorizedError(
                    f"effect {call.spec.effect_id!r} requires scope {', '.join(repr(m) for m in missing)}, "
                    f"which principal {principal.name!r} does not hold (it holds: {held}). Start the "
                    f"execution with a principal that has it, e.g. Principal.of({principal.name!r}, "
                    f"scopes=[..., {missing[0]!r}])."
                )
        return await next(call)
