"""``EffectRing``: the registry plus the interceptor ring every model and tool call passes.

Ring order (outermost first): authorization -> quota and metering -> retry -> guard -> timeout ->
images (a model call's image bytes read from the content store) -> claim-check (one link per
``ClaimCheck`` configuration) -> the effect. The idempotency key
(``<execution_id>:<step_id>``) is derived by the kernel and handed to the effect in its
``EffectContext``; it is stable across retries and recovery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from loom_nb.effects.authz import Authorization
from loom_nb.effects.claimcheck import ClaimCheck, ClaimCheckInterceptor, ContentStore
from loom_nb.effects.guard import PromptGuard
from loom_nb.effects.images import ImageContent
from loom_nb.effects.quota import Metering, Quota, UsageTotals
from loom_nb.effects.retry import Retry, RetryPolicy
from loom_nb.effects.timeout import Timeout
from loom_nb.kernel.effect_registry import EffectRegistry

log = logging.getLogger(__name__)


class EffectRing(EffectRegistry):
    """The effect registry with the protection ring installed.

    Args:
        per_execution: Quota for each execution.
        per_principal: Quota for each principal.
        default_retry: Retry policy for effects registered without one (None: no retry).
        load_usage: Returns an execution's recorded usage by effect id (set by the runtime that
            owns this; read once per execution, when a limit first needs it).
    """

    def __init__(
        self,
        *,
        per_execution: Quota | None = None,
        per_principal: Quota | None = None,
        default_retry: RetryPolicy | None = None,
        load_usage: Callable[[str], Mapping[str, UsageTotals]] | None = None,
    ) -> None:
        self.authorization = Authorization()
        self.metering = Metering(
            per_execution=per_execution,
            per_principal=per_principal,
            load=load_usage,
        )
        self.retry = Retry(default_retry)
        self.guard = PromptGuard()
        self.timeout = Timeout()
        self.images = ImageContent(lambda: self.content_store)
        super().__init__([self.authorization, self.metering, self.retry, self.guard, self.timeout, self.images])
        self._claim_checks: list[tuple[ClaimCheck, str | None]] = []
        self.content_store: ContentStore | None = None
        self._on_close: list[Callable[[], None]] = []

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` when the ring closes (``Runtime.close()``): how a resource its effects
        hold (an MCP server session) ends with the runtime. Callbacks run once, newest first."""
        self._on_close.append(callback)

    def close(self) -> None:
        """Run the close callbacks (once each); one that raises is logged and the rest still run."""
        while self._on_close:
            callback = self._on_close.pop()
            try:
                callback()
            except Exception:
                log.exception("a close callback of the effect ring failed: %r", callback)

    def add_claim_check(
        self, config: ClaimCheck, store: ContentStore | None = None, *, owner: str | None = None
    ) -> None:
        """Install a claim-check link (once per configuration and owner): ``owner`` limits it to the
        effects that owner registered (``EffectSpec.owner``; an agent's own tools)."""
        if (config, owner) in self._claim_checks:
            return
        target = config.store or store or self.content_store
        if target is None:
            from loom_nb.errors import UsageError

            raise UsageError("ClaimCheck needs a store: pass ClaimCheck(store=...) or use loom.Runtime")
        self._claim_checks.append((config, owner))
        self.use(ClaimCheckInterceptor(config, target, owner))
