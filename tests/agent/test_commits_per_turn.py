"""The agent's commits on the write path (``docs/design.md``, section 4): one commit per turn whose
tools are idempotent, two with a non-idempotent tool, and concurrent runs sharing commits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import Durability
from loom_nb.kernel.effect_registry import EffectRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.testing import JournalProxy
from tests.agent.support import MODEL, calls, install, make_runtime, register_model, turn_of

TURNS = 6


def test_agent_tools_ride_the_next_model_commit_when_idempotent() -> None:
    @loom.tool(idempotent=True)
    def look(q: str) -> str:
        """Look."""
        return q

    @loom.tool
    def pay(q: str) -> str:
        """Pay."""
        return q

    effects = EffectRegistry()
    assert look.register(effects).commit_rule is Durability.DEFERRED
    assert pay.register(effects).commit_rule is Durability.BEFORE


def agent_run(idempotent: bool, journal: Any) -> Any:
    @loom.tool(idempotent=idempotent)
    async def work(n: int) -> str:
        """Work."""
        return f"done {n}"

    def reply(request: ModelRequest) -> ModelResponse:
        turn = turn_of(request)
        return calls(("work", {"n": turn})) if turn < TURNS - 1 else ModelResponse.text("end")

    rt = make_runtime(journal)
    register_model(rt, ScriptedModel(reply))
    return rt, install(rt, AgentConfig(model=MODEL, tools=[work]))


@pytest.mark.parametrize(("idempotent", "per_turn"), [(True, 1), (False, 2)])
async def test_commits_per_agent_turn(idempotent: bool, per_turn: int) -> None:
    """Idempotent tools: one commit per turn (the model's outcome carries the tool before it); a
    non-idempotent tool: two (the model's outcome with the tool's start; the tool's outcome)."""
    proxy = JournalProxy(InMemoryJournal())
    rt, flow = agent_run(idempotent, proxy)
    result = await rt.start(flow, "go", execution_id="r")
    assert result.status == "completed"
    # The fresh run's first model step commits its start first; the last turn has no tool and
    # its outcome rides with execution_completed.
    assert proxy.appends == 1 + per_turn * (TURNS - 1) + 1
    assert (await rt.replay("r")).reproduced


async def test_concurrent_runs_share_commits() -> None:
    """64 agent runs on one runtime: far fewer commits than runs times their commits alone."""
    alone = JournalProxy(InMemoryJournal())
    rt, flow = agent_run(True, alone)
    await rt.start(flow, "go", execution_id="solo")
    proxy = JournalProxy(InMemoryJournal())
    rt, flow = agent_run(True, proxy)
    results = await asyncio.gather(*(rt.start(flow, "go", execution_id=f"r{i}") for i in range(64)))
    assert {r.status for r in results} == {"completed"}
    assert proxy.appends <= 2 * alone.appends  # 64 runs, about the commits of one
    for i in (0, 63):
        evs = proxy.read(f"r{i}")
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert (await rt.replay(f"r{i}")).reproduced
