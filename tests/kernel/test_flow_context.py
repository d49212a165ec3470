"""``FlowContext``: the protocol flow bodies are typed against, and ``ExecutionContext`` implements."""

from __future__ import annotations

import inspect
from typing import Any

import loom_nb
from loom_nb.kernel import ExecutionContext, FlowContext, FlowRegistry
from tests.kernel.support import make_runtime

#: What a flow body may use; nothing engine-facing (``stage``, ``commit``, ``unserved``...).
BODY_SURFACE = {
    "boundary",
    "decide",
    "execute",
    "execution_id",
    "gate",
    "gates",
    "get_content",
    "event_format",
    "next_step_id",
    "now",
    "patched",
    "principal",
    "child",
    "put_content",
    "random",
    "recorded",
    "recorded_input",
    "replaying",
    "runtime",
    "stream",
    "uuid",
    "warn",
}


def _members(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")}


def test_the_protocol_lists_exactly_the_body_surface() -> None:
    assert _members(FlowContext) == BODY_SURFACE
    assert loom_nb.FlowContext is FlowContext


def test_the_execution_context_implements_every_member_with_the_same_parameters() -> None:
    for name in BODY_SURFACE - {"execution_id", "principal"}:  # plain attributes set per execution
        ours, theirs = getattr(FlowContext, name), getattr(ExecutionContext, name)
        if isinstance(ours, property):
            assert isinstance(theirs, property), name
        else:
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name


async def test_a_body_typed_against_the_protocol_runs() -> None:
    flows = FlowRegistry()
    rt = make_runtime(flows=flows)
    rt.effects.register("double", lambda x: 2 * x)

    async def body(ctx: FlowContext, input: Any) -> Any:
        first = await ctx.execute("double", input)
        return {"value": first, "next": ctx.next_step_id(), "who": ctx.principal.name, "id": ctx.execution_id}

    result = await rt.start(body, 21, execution_id="e1")
    assert result.output == {"value": 42, "next": "#2", "who": "anonymous", "id": "e1"}
