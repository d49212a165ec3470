"""Helpers for the effect-ring tests (import as ``from tests.effects.support import ...``); the
``rt`` fixture built on ``make`` lives in ``conftest.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from loom_nb.agent.agent import Agent
from loom_nb.effects.tool import Tool
from loom_nb.journal import Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse, Usage
from loom_nb.providers.scripted import ScriptedModel
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


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_script_over_http(script: Path, *args: str, what: str) -> Iterator[int]:
    """Run ``python script *args --http <port>`` on a free port of 127.0.0.1, wait until it accepts
    connections, yield the port, and stop it afterwards (``what`` names it if it never starts)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(script), *args[:1], "--http", str(port), *args[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{what} did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def mcp_runtime() -> Runtime:
    """A ``loom.Runtime`` on an in-memory DuckDB journal with a private flow registry (MCP tools
    need the effect ring and its content store)."""
    return Runtime.open(":memory:", flows=FlowRegistry())


def scripted_agent(tools: list[Tool], *responses: ModelResponse) -> tuple[Agent, ScriptedModel]:
    """An agent with ``tools`` whose model answers ``responses`` and then ``done``; and the model."""
    model = ScriptedModel([*responses, ModelResponse.text("done")])
    return Agent(model=model, tools=tools), model


def calls(*pairs: tuple[str, dict[str, Any]]) -> ModelResponse:
    """A model response calling each ``(tool, arguments)`` pair."""
    return ModelResponse.tool_calls(list(pairs))


def tool_texts(model: ScriptedModel) -> list[str]:
    """The tool messages of the last request the model was sent."""
    return [m.text for m in model.history[-1].messages if m.role == "tool"]
