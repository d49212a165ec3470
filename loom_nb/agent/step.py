"""``agent_step``: the cheap opaque form, the whole loop as ONE journaled step.

No per-turn durability (a crash puts the whole loop in doubt; run again, it re-runs every turn), no
approval gates, decisions not served on replay, no durable stream (``docs/design.md``, section 6.1).
Choose it when none of that matters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from loom_nb.agent.config import AgentConfig, AgentResult
from loom_nb.agent.loop import agent_loop
from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import to_jsonable
from loom_nb.journal.event_format import CURRENT_FORMAT
from loom_nb.kernel.decisions import Decision
from loom_nb.kernel.effect_registry import EffectCall, EffectContext
from loom_nb.kernel.engine import Engine
from loom_nb.kernel.flow_context import FlowContext
from loom_nb.kernel.gates import GateRequest


class _OpaqueContext:
    """Just enough of ``FlowContext`` for ``agent_loop``, journaling nothing itself."""

    def __init__(self, runtime: Engine, outer: EffectContext) -> None:
        self._rt = runtime
        self._outer = outer
        self.execution_id = outer.execution_id
        self._warned: set[str] = set()

    async def boundary(self) -> None:
        """No stop inside one opaque step: the whole loop is one journaled step of the outer run."""

    async def execute(self, effect_id: str, input: Any = None, **options: Any) -> Any:
        # Only ``step_id`` and ``owner`` are used: nothing is journaled inside the opaque step (``record`` and
        # ``returns`` mean nothing here), and deltas go to the outer step's sink, not ``on_delta``.
        step_id: str | None = options.get("step_id")
        spec = self._rt.effects.spec(effect_id, options.get("owner"))
        outer = self._outer
        sub = f"{outer.step_id}/{step_id}"

        def emit(text: str) -> None:
            outer.emit_delta(text)

        context = EffectContext(
            execution_id=outer.execution_id,
            step_id=sub,
            effect_id=effect_id,
            attempt=1,
            idempotency_key=f"{outer.idempotency_key}/{step_id}",
            principal=outer.principal,
            emit_delta=emit,
        )
        attempt = 1

        async def on_retry(error: BaseException, delay: float) -> int:
            nonlocal attempt
            await self._rt.clock.sleep(delay)
            attempt += 1
            return attempt

        call = EffectCall(spec=spec, input=input, context=context, on_retry=on_retry, sleep=self._rt.clock.sleep)
        result = await self._rt.effects.invoke(call)
        return to_jsonable(result.output)

    @property
    def event_format(self) -> int:
        return CURRENT_FORMAT  # nothing inside the opaque step is journaled

    def recorded(self, ident: str) -> bool:
        return False  # nothing inside the opaque step is journaled: it re-runs whole

    def recorded_input(self, step_id: str) -> Any:
        return None  # nothing inside the opaque step is journaled

    async def gates(self, requests: Sequence[GateRequest]) -> list[Any]:
        raise UsageError(
            f"agent_step cannot wait at gates ({', '.join(r.gate_id for r in requests)}): a tool needs "
            "approval, which needs per-turn durability. Use agent_loop (or loom.Agent) instead."
        )

    async def child(self, flow: Any, input: Any = None, *, step_id: str) -> Any:
        raise UsageError(
            f"agent_step cannot run a sub-agent as a child execution (step {step_id!r}): that needs "
            "per-turn durability. Use agent_loop (or loom.Agent) instead."
        )

    async def decide(self, decision_id: str, options: Sequence[Any], policy: Any) -> Any:
        result = policy(options)
        if hasattr(result, "__await__"):
            result = await result
        return to_jsonable(result.choice if isinstance(result, Decision) else result)

    def stream(self, text: str, channel: str = "assistant", *, step_id: str | None = None) -> None:
        return None  # deltas already reach the cell through the outer step's delta sink

    def warn(self, code: str, message: str, **data: Any) -> bool:
        if code in self._warned:
            return False
        self._warned.add(code)
        return True


def agent_step(
    config: AgentConfig, *, name: str = "agent", step_id: str = "agent"
) -> Callable[[FlowContext, Any], Awaitable[AgentResult[Any]]]:
    """The whole agent loop as one step: ``result = await agent_step(config)(ctx, "question")``.

    The step's effect is ``agent_step.<name>`` (registered on first use; a persisted id).
    """
    effect_id = step_ids.agent_step_effect_id(name)

    async def run(ctx: FlowContext, input: Any) -> AgentResult[Any]:
        rt = ctx.runtime
        if effect_id not in rt.effects:

            async def whole_loop(loop_input: Any, effect_context: EffectContext) -> AgentResult[Any]:
                inner = _OpaqueContext(rt, effect_context)
                return await agent_loop(cast(FlowContext, inner), config, loop_input)

            rt.effects.register(effect_id, whole_loop, kind="agent")
        output = await ctx.execute(effect_id, input, step_id=step_id)
        result: AgentResult[Any] = AgentResult.model_validate(output)
        spec = config.output
        if spec is not None and result.stop_reason == "end_turn":
            result = result.model_copy(update={"output": spec.load(result.output)})  # typed, as recorded JSON
        return result

    return run
