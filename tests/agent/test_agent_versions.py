"""Versioned agents: ``agent.patch`` keeps recorded runs on the configuration they started with, and
``runtime.check()`` names a system prompt or tool change made without a patch, with the fix."""

from __future__ import annotations

from typing import Any

import pytest

import loom_nb as loom
from loom_nb.errors import UsageError
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import BatchJournal, calls, make_runtime, prefix_journal, tidy_tools


def _model(seen: list[str | None]) -> ScriptedModel:
    def respond(request: ModelRequest) -> ModelResponse:
        system = next((m.text for m in request.messages if m.role == "system"), None)
        seen.append(system)
        if not any(m.role == "tool" for m in request.messages):
            return calls(("delete_file", {"path": "/tmp/x/a.log"}))
        return ModelResponse.text("done")

    return ScriptedModel(respond)


def _agent(seen: list[str | None], deleted: list[str]) -> loom.Agent:
    search, delete_file = tidy_tools(deleted)
    return loom.Agent(model=_model(seen), tools=[search, delete_file], name="versioned", system="Be careful.")


async def _parked(agent: loom.Agent, rt: Any, eid: str) -> loom.Run:
    run = agent.start("tidy /tmp/x", runtime=rt, execution_id=eid, view=False)
    await run.wait(until="paused")
    assert run.status == "suspended"
    return run


async def test_a_patched_prompt_keeps_the_parked_run_on_the_old_prompt_and_new_runs_on_the_new() -> None:
    seen: list[str | None] = []
    deleted: list[str] = []
    rt = make_runtime()
    agent = _agent(seen, deleted)
    old = await _parked(agent, rt, "old")
    agent.patch("terse", system="Be terse.")
    assert agent.config.system == "Be terse."
    assert (await rt.check()).ok
    new = await _parked(agent, rt, "new")
    assert rt.history("new").values == {"#patched:terse": "terse"}
    assert "#patched:terse" not in rt.history("old").values
    for run in (old, new):
        run.gates[0].approve()
        assert (await run).output == "done"
    assert seen == ["Be careful.", "Be terse.", "Be careful.", "Be terse."]
    for eid in ("old", "new"):
        assert (await rt.replay(eid)).reproduced, eid


async def test_check_names_a_prompt_or_tool_change_made_without_a_patch() -> None:
    seen: list[str | None] = []
    deleted: list[str] = []
    rt = make_runtime()
    await _parked(_agent(seen, deleted), rt, "parked")
    search, delete_file = tidy_tools(deleted)

    @loom.tool
    def archive(path: str) -> str:
        """Archive a file.

        Args:
            path: The file.
        """
        return path

    edited = loom.Agent(model=_model(seen), tools=[search, delete_file, archive], name="versioned", system="Be terse.")
    edited.register(rt)
    report = await rt.check()
    (parked,) = report.diverging
    assert parked.step == "#turn:0"
    reasons = " | ".join(f.reason for f in parked.findings)
    assert "system prompt changed" in reasons and "'Be careful.'" in reasons and "'Be terse.'" in reasons
    assert "'archive' added" in reasons
    assert any("agent.patch('<change>', system=...)" in f.fix for f in parked.findings)
    assert "would diverge" in str(report)


def test_a_patch_name_is_used_once() -> None:
    agent = _agent([], [])
    agent.patch("a", max_turns=3)
    with pytest.raises(UsageError, match="already has the patch 'a'"):
        agent.patch("a", max_turns=4)
    with pytest.raises(UsageError, match="change name"):
        agent.patch("")


@loom.tool(idempotent=True)
def search(query: str) -> list[str]:
    """Search the files (idempotent: a call cut by a crash runs again).

    Args:
        query: What to look for.
    """
    return [f"/tmp/x/{query}.log"]


def _searching_agent(seen: list[str | None], *, patched: bool) -> loom.Agent:

    def respond(request: ModelRequest) -> ModelResponse:
        seen.append(request.messages[0].text)
        if request.messages[-1].role == "user":
            return calls(("search", {"query": "stale"}))
        return ModelResponse.text(f"done ({request.messages[0].text})")

    agent = loom.Agent(model=ScriptedModel(respond), tools=[search], name="versioned", system="Be careful.")
    return agent.patch("terse", system="Be terse.") if patched else agent


@pytest.mark.parametrize("recorded_by", ["old", "patched"])
async def test_kill_matrix_a_recovered_run_keeps_the_version_it_started_with(recorded_by: str) -> None:
    """Killed after every commit of a run recorded by the old agent (or by the patched one), then
    recovered by a process running the patched agent: the same output as uninterrupted, completed
    model calls never made again, and the marker only in the run that started on the new path."""
    journal = BatchJournal()
    rt = make_runtime(journal)
    seen: list[str | None] = []
    whole = await _searching_agent(seen, patched=recorded_by == "patched").run("tidy", runtime=rt, execution_id="r")
    boundaries = list(journal.boundaries)
    # The fresh run's first start; the model's answer with the search's start (the idempotent search
    # itself rides the next model commit); the last answer with execution_completed.
    assert len(boundaries) >= 3
    for cut in boundaries:
        prefix = prefix_journal(journal, "r", cut)
        steps = [e for e in prefix.read("r") if e.kind == "step_started"]
        done = {e.step_id for e in prefix.read("r") if e.kind == "step_completed"}
        rt2 = make_runtime(prefix)
        seen2: list[str | None] = []
        agent = _searching_agent(seen2, patched=True)
        agent.register(rt2)
        await rt2.recover()  # nothing to recover after the last commit (the run completed)
        result = rt2.result("r")
        assert result.status == "completed", (cut, result)
        started_new = recorded_by == "patched" or not steps  # nothing recorded yet: the new path
        output = result.output["output"]
        assert output == ("done (Be terse.)" if started_new else whole.output), cut
        markers = [e for e in prefix.read("r") if e.step_id == "#patched:terse"]
        assert bool(markers) == started_new, cut
        assert len(seen2) == sum(1 for n in ("#turn:0", "#turn:1") if n not in done), cut
        assert (await rt2.replay("r")).reproduced, cut


async def test_a_patch_may_add_a_tool_and_replace_one_of_the_same_name() -> None:
    rt = make_runtime()

    @loom.tool(name="search", idempotent=True)
    def search_v2(query: str) -> list[str]:
        """Search the files, better.

        Args:
            query: What to look for.
        """
        return [f"/v2/{query}.log"]

    @loom.tool
    def archive(path: str) -> str:
        """Archive a file.

        Args:
            path: The file.
        """
        return f"archived {path}"

    def respond(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "user":
            return calls(("search", {"query": "stale"}))
        return ModelResponse.text(request.messages[-1].text)

    agent = loom.Agent(model=ScriptedModel(respond), tools=[search], name="searcher")
    old = await agent.run("go", runtime=rt)
    agent.patch("v2", tools=[search_v2, archive])
    new = await agent.run("go", runtime=rt)
    assert (old.output, new.output) == ('["/tmp/x/stale.log"]', '["/v2/stale.log"]')
    # The new tool is the new version's own: the shared registry (and the version before) has none.
    assert rt.effects.spec("tools.archive", agent.config.owner).meta["tool"] == "archive"
    assert "tools.archive" not in rt.effects
