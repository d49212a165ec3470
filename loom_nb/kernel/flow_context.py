"""``FlowContext``: exactly what a flow body (and ``agent_loop`` / ``agent_step``) may use.

``ExecutionContext`` is the kernel's implementation; it also has engine-facing methods (``stage``,
``commit``...) that a body must not call. Annotate bodies with ``FlowContext``:

    @loom.flow
    async def tidy(ctx: loom.FlowContext, input: Any) -> Any:
        rows = await ctx.execute("fetch_rows", input)
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from loom_nb.kernel.decisions import Policy
from loom_nb.kernel.effect_registry import Principal
from loom_nb.kernel.gates import GateRequest

if TYPE_CHECKING:  # kept ring (tests/test_meta.py): a body's ``ctx.runtime`` is the Engine itself
    from loom_nb.kernel.engine import Engine

#: What ``FlowContext.runtime`` is: the engine running the execution (named here so the kernel's
#: lower modules spell that type without importing the engine).
FlowRuntime: TypeAlias = "Engine"


class FlowContext(Protocol):
    """The handle a flow body gets: durable steps, gates, decisions, recorded values, streams.

    Everything that is not pure goes through it, so a body re-run from the top on resume, recovery
    or replay is served the recorded outcomes and runs live only past them. ``ExecutionContext``
    implements it.
    """

    @property
    def execution_id(self) -> str:
        """The execution this body runs."""
        ...

    @property
    def principal(self) -> Principal:
        """Who the execution acts for."""
        ...

    @property
    def event_format(self) -> int:
        """The execution's event format (``journal.event_format``): what its journaled shapes are."""
        ...

    @property
    def replaying(self) -> bool:
        """True while the body is still being served recorded outcomes."""
        ...

    @property
    def runtime(self) -> FlowRuntime:
        """The engine running this execution (to register an effect a body needs on first use)."""
        ...

    def recorded(self, ident: str) -> bool:
        """True when the journal holds a step, gate, decision or value with id ``ident``."""
        ...

    def recorded_input(self, step_id: str) -> Any:
        """The journaled input of step ``step_id`` (its ``record=``), or None when not recorded."""
        ...

    def next_step_id(self) -> str:
        """The counter id the next ``execute`` without ``step_id`` gets."""
        ...

    async def execute(
        self,
        effect_id: str,
        input: Any = None,
        *,
        step_id: str | None = None,
        record: Any = ...,
        returns: Any = None,
        on_delta: Callable[[str], None] | None = None,
        input_ref: Sequence[Any] | None = None,
        defer_deltas: bool = False,
        owner: str | None = None,
    ) -> Any:
        """Run an effect as one durable step, or serve its recorded outcome on replay.

        See ``ExecutionContext.execute`` for the arguments and errors.
        """
        ...

    async def child(self, flow: Any, input: Any = None, *, step_id: str) -> Any:
        """Run ``flow`` as a child execution linked to this step and return its output."""
        ...

    async def gate(self, gate_id: str, kind: str, *, payload: Any = None, schema: Any = None) -> Any:
        """Open one gate and wait for it; on replay, return its recorded resume payload."""
        ...

    async def gates(self, requests: Sequence[GateRequest]) -> list[Any]:
        """Open several gates together; returns their resume payloads in the order of ``requests``."""
        ...

    async def decide(self, decision_id: str, options: Sequence[Any], policy: Policy) -> Any:
        """Run ``policy(options)`` once and record the choice; replay returns the recorded choice."""
        ...

    async def boundary(self) -> None:
        """Say that nothing of the body is in flight here: a stop asked for "after this turn"
        (``Engine.stop_at_boundary``) records the run ``cancelled`` at this point."""
        ...

    def patched(self, change: str) -> bool:
        """True when this run takes the new path of ``change``: new runs record a ``#patched:<change>``
        marker and get True; runs recorded before the change get False and replay the old path."""
        ...

    def now(self) -> float:
        """The current time (epoch seconds), recorded."""
        ...

    def uuid(self) -> str:
        """A fresh id, recorded."""
        ...

    def random(self) -> float:
        """A float in [0, 1), recorded."""
        ...

    def stream(self, text: str, channel: str = "assistant", *, step_id: str | None = None) -> None:
        """Append a durable stream chunk and show it to every observer (not while replaying);
        ``step_id`` names the step whose output will hold the text (``ExecutionContext.stream``)."""
        ...

    def warn(self, code: str, message: str, **data: Any) -> bool:
        """Record a ``warning`` event once per ``code``; returns True if recorded now."""
        ...

    def put_content(self, data: bytes, *, media_type: str = "application/json", tainted: bool = False) -> str:
        """Store bytes in the content store with the next commit; returns their tagged digest."""
        ...

    def get_content(self, digest: str) -> bytes:
        """Bytes stored under ``digest``."""
        ...
