"""Journals for the analysis tests, made by running real agents (``ScriptedModel``) on a fake clock.

Import as ``from tests.analysis.support import ...``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import loom_nb as loom
from loom_nb.effects.retry import RetryPolicy
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest
from loom_nb.testing import FakeClock, SequentialIds
from tests import stores
from tests.agent.support import tidy_tools

JOURNALS = ("memory", "duckdb", "postgres")


def make_runtime(kind: str = "memory", *, tick: float = 0.5) -> loom.Runtime:
    """A deterministic runtime: an ``InMemoryJournal``, a DuckDB ``:memory:`` journal or a PostgreSQL one
    (a fresh schema), a fake clock
    (``tick`` seconds per reading), sequential ids and a private flow registry."""
    options: dict[str, Any] = {"clock": FakeClock(tick=tick), "ids": SequentialIds(), "flows": FlowRegistry()}
    if kind == "memory":
        return loom.Runtime(InMemoryJournal(), **options)
    if kind == "postgres":
        return loom.Runtime.open(stores.new_schema(), **options)
    return loom.Runtime.open(":memory:", **options)


DELETED: list[str] = []
search, delete_file = tidy_tools(DELETED)


@loom.tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise ValueError(f"boom: {reason}")


def usage(n: int) -> loom.Usage:
    """The usage the scripted models report for their ``n``-th answer."""
    return loom.Usage(input_tokens=100 * (n + 1), output_tokens=10 + n, cost=0.001 * (n + 1))


def _assistants(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def tidy_model() -> loom.ScriptedModel:
    """Search, then delete two files (both gated), then answer."""

    def respond(request: ModelRequest) -> loom.ModelResponse:
        n = _assistants(request)
        if n == 0:
            calls = [("search", {"query": "stale"})]
            return loom.ModelResponse.tool_calls(calls, text="Let me look.", usage=usage(0))
        if n == 1:
            calls = [("delete_file", {"path": "/tmp/x/stale.log"}), ("delete_file", {"path": "/tmp/x/b"})]
            return loom.ModelResponse.tool_calls(calls, text="Deleting them.", usage=usage(1))
        return loom.ModelResponse.text("Done. I removed the stale file.", usage=usage(2))

    return loom.ScriptedModel(respond)


def tidy_agent(model: loom.ScriptedModel | None = None) -> loom.Agent:
    """The tidy agent of the smoke test (search + gated delete)."""
    return loom.Agent(model=model or tidy_model(), tools=[search, delete_file], system="You tidy folders.")


async def tidy_run(rt: loom.Runtime, *, wait: float = 60.0, agent: loom.Agent | None = None) -> str:
    """Run the tidy agent: approve the first delete, refuse the second ("keep b"), each after
    ``wait`` fake seconds. Returns the execution id."""
    clock: Any = rt.clock
    run = (agent or tidy_agent()).start("Remove the stale files in /tmp/x", runtime=rt)
    await run.wait(until="paused")
    clock.advance(wait)
    run.gates[0].approve()
    await asyncio.sleep(0)
    await run.wait(until="paused")
    clock.advance(wait)
    run.gates[0].refuse("keep b")
    await run
    return run.id


#: The arguments ``edited_run`` approves instead of the model's ``{"path": "/tmp/x/stale.log"}``.
EDITED = {"path": "/tmp/x/renamed.log"}


async def edited_run(rt: loom.Runtime) -> str:
    """Run the tidy agent: approve the first delete with edited arguments (``EDITED``), refuse the
    second. Returns the execution id."""
    run = tidy_agent().start("Remove the stale files in /tmp/x", runtime=rt)
    await run.wait(until="paused")
    run.gates[0].approve("that one", arguments=dict(EDITED))
    await asyncio.sleep(0)
    await run.wait(until="paused")
    run.gates[0].refuse("keep b")
    await run
    return run.id


def messy_model() -> loom.ScriptedModel:
    """Calls an unknown tool and a failing one, then answers."""

    def respond(request: ModelRequest) -> loom.ModelResponse:
        n = _assistants(request)
        if n == 0:
            calls: list[tuple[str, dict[str, Any]]] = [
                ("no_such_tool", {"x": 1}),
                ("explode", {"reason": "testing"}),
                ("search", {"query": "q"}),
            ]
            return loom.ModelResponse.tool_calls(calls, text="Trying things.", usage=usage(0))
        return loom.ModelResponse.text("Some tools failed.", usage=usage(1))

    return loom.ScriptedModel(respond)


async def messy_run(rt: loom.Runtime) -> str:
    """An agent whose tool calls go wrong in two ways (unknown tool, a tool that raises)."""
    agent = loom.Agent(model=messy_model(), tools=[search, explode], name="messy")
    run = agent.start("Try", runtime=rt)
    await run
    return run.id


def routed_probabilities(turn: int) -> list[float]:
    """The routing policy's probabilities of (small, large) at ``turn``."""
    return [0.8, 0.2] if turn % 2 == 0 else [0.4, 0.6]


def routed_agent(turns: int = 3, *, respond: Any = None) -> tuple[loom.Agent, loom.ScriptedModel]:
    """An agent that routes every turn between two models with logged probabilities (the models
    answer with ``respond(request)`` when given: a changed model, e.g. for a fork)."""

    def scripted(request: ModelRequest) -> loom.ModelResponse:
        n = _assistants(request)
        if n < turns - 1:
            calls = [("search", {"query": f"q{n}"})]
            return loom.ModelResponse.tool_calls(calls, text=f"Turn {n}.", usage=usage(n))
        return loom.ModelResponse.text("Routed answer.", usage=usage(n))

    def policy(models: Sequence[str], request: ModelRequest, turn: int) -> loom.Decision:
        return loom.Decision(choice=models[turn % 2], probabilities=routed_probabilities(turn))

    model = loom.ScriptedModel(respond if respond is not None else scripted)
    agent = loom.Agent(
        tools=[search],
        name="routed",
        routes=loom.Routes(models=["model.small", "model.large"], policy=policy, name="router"),
        models={"model.small": model, "model.large": model},
    )
    return agent, model


async def routed_run(rt: loom.Runtime, turns: int = 3) -> str:
    """Run the routed agent to its answer."""
    agent, _ = routed_agent(turns)
    run = agent.start("Route me", runtime=rt)
    await run
    return run.id


async def retried_run(rt: loom.Runtime) -> str:
    """An agent whose tool fails twice (retried, fake seconds apart) and then answers."""
    seen: list[str] = []

    @loom.tool(retry=RetryPolicy(attempts=3, initial=1.0, jitter=0, retryable=lambda e: True))
    def flaky(query: str) -> str:
        """Fails twice, then answers.

        Args:
            query: What to look for.
        """
        seen.append(query)
        if len(seen) < 3:
            raise ConnectionError("try again")
        return "found"

    script = [loom.ModelResponse.tool_calls([("flaky", {"query": "q"})]), loom.ModelResponse.text("ok")]
    run = loom.Agent(model=loom.ScriptedModel(script), tools=[flaky], name="retrying").start("go", runtime=rt)
    await run
    return run.id
