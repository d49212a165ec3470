"""Flows: ``async def body(ctx, input)`` functions, found by name so a restarted kernel finds them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from loom_nb.errors import FlowNotFoundError, UsageError, registered
from loom_nb.journal import step_ids
from loom_nb.kernel.flow_context import FlowContext

#: A flow body: ``async def body(ctx: FlowContext, input) -> output``.
FlowFn = Callable[[FlowContext, Any], Awaitable[Any]]
F = TypeVar("F", bound=FlowFn)


class FlowRegistry:
    """Flow bodies by name. Registering a name again replaces it (a re-run notebook cell)."""

    def __init__(self) -> None:
        self._flows: dict[str, FlowFn] = {}

    def register(self, fn: FlowFn, name: str | None = None) -> str:
        """Register ``fn`` under ``name`` (default: its ``__name__``); returns the name."""
        if not callable(fn):
            raise UsageError(f"a flow must be an async function body(ctx, input), got {fn!r}")
        flow_name = name or getattr(fn, "__loom_flow__", None) or fn.__name__
        self._flows[flow_name] = fn
        return flow_name

    def name_of(self, flow: FlowFn | str) -> str:
        """The registered name of ``flow``, registering a function on first use."""
        if isinstance(flow, str):
            self.get(flow)
            return flow
        name = getattr(flow, "__loom_flow__", None) or flow.__name__
        if self._flows.get(name) is not flow:
            self.register(flow, name)
        return str(name)

    def get(self, name: str) -> FlowFn:
        """The flow registered as ``name``."""
        agent = step_ids.agent_name(name)
        fix = (
            "defines it"
            if agent is None
            else f"builds loom.Agent(name={agent!r}, ...) (or call agent.register(runtime))"
        )
        return registered(self._flows, name, FlowNotFoundError, f"flow named {name!r}", fix)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._flows)


#: The process-wide registry the ``@flow`` decorator fills. Global because ``@flow`` runs at import
#: (or cell) time, before any runtime exists, and a restarted kernel finds bodies here by the flow
#: name its executions record.
FLOWS = FlowRegistry()


@overload
def flow(fn: F, /) -> F: ...
@overload
def flow(*, name: str | None = None) -> Callable[[F], F]: ...
def flow(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """Register a flow body (``async def body(ctx, input)``) in the process-wide registry.

    Use as ``@flow`` or ``@flow(name="tidy")``. The name is a persisted contract: executions
    record it, and a restarted kernel finds the body by it.
    """

    def wrap(f: F) -> F:
        flow_name = FLOWS.register(f, name)
        f.__loom_flow__ = flow_name  # type: ignore[attr-defined]
        return f

    return wrap(fn) if fn is not None else wrap
