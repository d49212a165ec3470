"""``Agent[Deps, Out]``: ``start(..., deps=...)`` hands the run's tools a live object
(``EffectContext.deps``) that is never journaled; a sub-agent shares its caller's; after a restart
``attach(id, deps=...)`` gives them again."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.kernel import EffectContext
from loom_nb.messages import ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import calls, make_runtime


@dataclasses.dataclass
class Db:
    """A stand-in for a live resource (a connection): not JSON, never journaled."""

    name: str
    queries: list[str] = dataclasses.field(default_factory=list)


def lookup_tool(seen: list[Any], *, needs_approval: bool = False) -> Any:
    @loom.tool(needs_approval=needs_approval)
    def lookup(key: str, ctx: EffectContext) -> str:
        """Look a key up in the run's database.

        Args:
            key: The key.
        """
        seen.append(ctx.deps)
        if isinstance(ctx.deps, Db):
            ctx.deps.queries.append(key)
            return f"{ctx.deps.name}:{key}"
        return f"no db:{key}"

    return lookup


def script() -> list[ModelResponse]:
    return [calls(("lookup", {"key": "k1"})), ModelResponse.text("found")]


async def test_the_tools_get_the_runs_deps_which_are_never_journaled() -> None:
    rt = make_runtime()
    seen: list[Any] = []
    agent = loom.Agent(ScriptedModel(script()), tools=[lookup_tool(seen)], deps_type=Db, name="dbq")
    db = Db("main")
    result = await agent.run("go", runtime=rt, execution_id="d-1", deps=db)
    assert result.output == "found" and seen == [db] and db.queries == ["k1"]
    assert "d-1" not in rt.deps  # dropped once the run settled
    assert all("deps" not in str(e.data) and "Db(" not in str(e.data) for e in rt.journal.read("d-1"))
    assert (await rt.replay("d-1")).reproduced and db.queries == ["k1"]  # a replay runs no tool


async def test_a_sub_agent_shares_its_callers_deps() -> None:
    rt = make_runtime()
    seen: list[Any] = []
    helper = loom.Agent(ScriptedModel(script()), tools=[lookup_tool(seen)], name="helper")
    lead = loom.Agent(
        ScriptedModel([calls(("helper", {"input": "look k1 up"})), ModelResponse.text("done")]),
        tools=[helper.as_tool(description="Looks things up.")],
        deps_type=Db,
        name="lead-deps",
    )
    db = Db("shared")
    assert (await lead.run("go", runtime=rt, execution_id="l-1", deps=db)).output == "done"
    assert seen == [db] and rt.result("l-1/#turn:0:tool:0").status == "completed"
    assert rt.deps == {}


async def test_after_a_restart_attach_gives_the_deps_again() -> None:
    rt = make_runtime()
    seen: list[Any] = []
    agent = loom.Agent(ScriptedModel(script()), tools=[lookup_tool(seen, needs_approval=True)], name="deps2")
    run = agent.start("go", runtime=rt, execution_id="d-2", deps=Db("before"))
    await run.wait(until="paused")
    assert run.status == "suspended" and seen == []
    # A new process on the same journal: the deps given to start are gone with the old one.
    rt2 = make_runtime(rt.journal)
    agent2 = loom.Agent(ScriptedModel(script()[1:]), tools=[lookup_tool(seen, needs_approval=True)], name="deps2")
    again = agent2.attach("d-2", runtime=rt2, deps=Db("after"))
    await again.gates[0].approve()
    assert again.result is not None and again.result.output == "found"
    assert [d.name for d in seen] == ["after"] and rt2.deps == {}


async def test_without_deps_a_tool_sees_none() -> None:
    seen: list[Any] = []
    agent = loom.Agent(ScriptedModel(script()), tools=[lookup_tool(seen)], name="deps3")
    assert (await agent.run("go", runtime=make_runtime())).output == "found"
    assert seen == [None]


async def test_a_session_run_gets_its_deps() -> None:
    seen: list[Any] = []
    agent = loom.Agent(ScriptedModel(script() + script()), tools=[lookup_tool(seen)], name="deps4")
    rt = make_runtime()
    db = Db("chat")
    assert (await agent.session("t", runtime=rt).run("first", deps=db)).output == "found"
    assert (await agent.run("second", runtime=rt, session="t", deps=db)).output == "found"
    assert seen == [db, db] and db.queries == ["k1", "k1"]


async def test_map_hands_every_item_the_deps() -> None:
    seen: list[Any] = []

    def respond(request: Any) -> ModelResponse:
        if request.messages[-1].role == "user":
            return calls(("lookup", {"key": request.messages[-1].text}))
        return ModelResponse.text("found")

    agent = loom.Agent(ScriptedModel(respond), tools=[lookup_tool(seen)], name="deps5")
    rt = make_runtime()
    db = Db("batch")
    batch = agent.map(["a", "b"], runtime=rt, view=False, progress=False, deps=db)
    await batch.wait()
    assert sorted(db.queries) == ["a", "b"] and seen == [db, db] and rt.deps == {}
    with pytest.raises(loom.UsageError, match="workers cannot get them"):
        agent.map(["c"], runtime=rt, on="workers", deps=db)
