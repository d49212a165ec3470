"""Effects are owned: two agents, a lead and its sub-agent, and two versions of one agent may each say
``delete_file`` or ``search`` on one runtime, and every call runs the body of the agent (and version)
that made it, never the last one registered (``docs/design.md``, section 6.3, "Owned effects")."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.effects.claimcheck import is_envelope
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import calls, make_runtime


def _deleter(name: str, log: list[str]) -> loom.Agent:
    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        log.append(f"{name} deleted {path}")
        return f"deleted {path}"

    script = [calls(("delete_file", {"path": f"/{name}/a.log"})), ModelResponse.text("done")]
    return loom.Agent(ScriptedModel(script), tools=[delete_file], name=name)


async def test_approving_one_agents_gate_runs_its_own_tool_not_another_agents_of_the_same_name() -> None:
    log: list[str] = []
    rt = make_runtime()
    a, b = _deleter("alpha", log), _deleter("beta", log)
    run_a = a.start("tidy", runtime=rt, execution_id="a", view=False)
    await run_a.wait(until="paused")
    run_b = b.start("tidy", runtime=rt, execution_id="b", view=False)
    await run_b.wait(until="paused")
    run_b.gates[0].approve()
    await run_b
    run_a.gates[0].approve()
    assert (await run_a).output == "done"
    assert log == ["beta deleted /beta/a.log", "alpha deleted /alpha/a.log"]
    for eid in ("a", "b"):
        assert (await rt.replay(eid)).reproduced, eid


async def test_a_lead_and_its_sub_agent_each_run_their_own_search() -> None:
    log: list[str] = []

    def searcher(owner: str) -> loom.Tool:
        @loom.tool
        def search(query: str) -> str:
            """Search.

            Args:
                query: What to look for.
            """
            log.append(f"{owner}: {query}")
            return f"{owner} found {query}"

        return search

    researcher = loom.Agent(
        ScriptedModel([calls(("search", {"query": "private"})), ModelResponse.text("private answer")]),
        tools=[searcher("researcher")],
        name="researcher",
    )
    lead_script = [
        calls(("search", {"query": "public"}), ("research", {"input": "look inside"})),
        ModelResponse.text("both done"),
    ]
    lead = loom.Agent(
        ScriptedModel(lead_script),
        tools=[searcher("lead"), researcher.as_tool(name="research", description="Ask the researcher.")],
        name="lead",
        parallel_tools=False,
    )
    rt = make_runtime()
    # The sub-agent registered last (as a notebook that ran its cell again would): it must not win.
    researcher.register(rt)
    lead.register(rt)
    researcher.register(rt)
    assert (await lead.start("go", runtime=rt, execution_id="lead", view=False)).output == "both done"
    assert log == ["lead: public", "researcher: private"]


async def test_one_agents_claim_check_does_not_turn_another_agents_results_into_envelopes() -> None:
    def fetcher() -> loom.Tool:
        @loom.tool
        def fetch(url: str) -> str:
            """Fetch a page.

            Args:
                url: The page.
            """
            return f"<page {url}>"

        return fetch

    def model(name: str) -> ScriptedModel:
        def respond(request: ModelRequest) -> ModelResponse:
            if not any(m.role == "tool" for m in request.messages):
                return calls(("fetch", {"url": "https://a.test"}))
            return ModelResponse.text("done")

        return ScriptedModel(respond)

    checked = loom.Agent(
        model("checked"), tools=[fetcher()], name="checked", claim_check=loom.ClaimCheck(tool_ids=["fetch"])
    )
    plain = loom.Agent(model("plain"), tools=[fetcher()], name="plain")
    rt = make_runtime()
    await checked.start("go", runtime=rt, execution_id="checked", view=False)
    await plain.start("go", runtime=rt, execution_id="plain", view=False)
    checked_output = rt.history("checked").steps["#turn:0:tool:0"].output
    plain_output = rt.history("plain").steps["#turn:0:tool:0"].output
    assert is_envelope(checked_output)
    assert plain_output == "<page https://a.test>"


async def test_a_patch_of_a_tool_leaves_a_run_recorded_before_it_on_the_body_it_started_with() -> None:
    log: list[str] = []

    @loom.tool(needs_approval=True)
    def tidy(path: str) -> str:
        """Move a file to the bin (recoverable).

        Args:
            path: The file.
        """
        log.append(f"moved {path}")
        return f"moved {path}"

    @loom.tool(name="tidy", needs_approval=True)
    def tidy_v2(path: str) -> str:
        """Archive a file (shreds the original).

        Args:
            path: The file.
        """
        log.append(f"shredded {path}")
        return f"shredded {path}"

    def respond(request: ModelRequest) -> ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            return calls(("tidy", {"path": "/tmp/a.log"}))
        return ModelResponse.text("done")

    agent = loom.Agent(ScriptedModel(respond), tools=[tidy], name="versioned_tidy")
    rt = make_runtime()
    old = agent.start("go", runtime=rt, execution_id="old", view=False)
    await old.wait(until="paused")
    agent.patch("shred", tools=[tidy_v2])
    assert (await rt.check()).ok
    new = agent.start("go", runtime=rt, execution_id="new", view=False)
    await new.wait(until="paused")
    old.gates[0].approve()
    await old
    new.gates[0].approve()
    await new
    assert log == ["moved /tmp/a.log", "shredded /tmp/a.log"]
