"""Helpers for the effect-ring tests (import as ``from tests.effects.support import ...``); the
``rt`` fixture built on ``make`` lives in ``conftest.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loom_nb.journal import Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse, Usage
from loom_nb.runtime import Runtime
from loom_nb.testing import FakeClock, SequentialIds

Flow = Callable[[Any, Any], Any]


def make(
    journal: JournalStore | None = None,
    *,
    flows: FlowRegistry | None = None,
    clock: FakeClock | None = None,
    **kwargs: Any,
) -> Runtime:
    """The assembled runtime on a fake clock, sequential ids and a private flow registry."""
    return Runtime(
        journal if journal is not None else InMemoryJournal(),
        clock=clock or FakeClock(),
        ids=SequentialIds(),
        flows=flows if flows is not None else FlowRegistry(),
        **kwargs,
    )


def step_events(rt: Runtime, execution_id: str, step_id: str) -> list[Event]:
    """The events of one step, in order."""
    return [e for e in rt.journal.read(execution_id) if e.step_id == step_id]


def of_kind(rt: Runtime, execution_id: str, kind: str) -> list[Event]:
    """The events of one kind, in order."""
    return [e for e in rt.journal.read(execution_id) if e.kind == kind]


def error_type(data: dict[str, Any]) -> str:
    """The class name of a journaled error."""
    return str(data["error"]["type"]).rpartition(":")[2]


def counting(log: list[Any], output: Any = "ok") -> Callable[..., Any]:
    """A sync effect that appends its input to ``log`` and returns ``output``."""

    def effect(value: Any) -> Any:
        log.append(value)
        return output

    return effect


def one_step(effect_id: str, value: Any = None) -> Flow:
    """A flow that executes ``effect_id`` once and returns its output."""

    async def flow(ctx: Any, _: Any) -> Any:
        return await ctx.execute(effect_id, value)

    return flow


def model_response(text: str = "done", *, inp: int = 60, out: int = 30, cost: float | None = None) -> ModelResponse:
    return ModelResponse.text(text, usage=Usage(input_tokens=inp, output_tokens=out, cost=cost))
