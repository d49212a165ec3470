"""Per-turn choices through ``ctx.decide`` (``docs/design.md``, section 6.5): skills, memory recall
and routing are recorded decisions that replay SERVES, so a re-run rebuilds the prompt the recorded
answer came from. A drifting selector proves it, and the same selector called outside the seam
shows why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig, AgentResult, Routes, Skill, TieredMemory, agent_loop, rebuild_requests
from loom_nb.effects import Quota
from loom_nb.errors import NonDeterminismError, NotAuthorizedError, QuotaExceededError
from loom_nb.journal.events import EventKind
from loom_nb.kernel import Decision, ExecutionContext
from loom_nb.messages import Message, ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests.agent.support import (
    MODEL,
    Counter,
    assert_rebuilt_matches,
    calls,
    decisions,
    events,
    first_started,
    install,
    make_runtime,
    prefix_journal,
    register_model,
    run_agent,
    step_ids,
    turn_of,
)

SKILLS = [
    Skill(name="careful", instructions="Double-check every path before deleting."),
    Skill(name="reckless", instructions="Delete without looking."),
]
CAREFUL = Message.system("Skill careful: Double-check every path before deleting.")
RECKLESS = Message.system("Skill reckless: Delete without looking.")


def gated(log: list[str]) -> loom.Tool:
    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        log.append(path)
        return f"deleted {path}"

    return delete_file


def delete_then_answer(request: ModelRequest) -> ModelResponse:
    if turn_of(request) == 0:
        return calls(("delete_file", {"path": "/tmp/a"}))
    return ModelResponse.text("done")


# -- skills ----------------------------------------------------------------------------------------------
async def test_a_drifting_skill_selector_is_asked_once_and_replay_serves_the_recorded_set() -> None:
    selector = Counter([["careful"], ["reckless"]])  # a different answer on its second call
    model = ScriptedModel([ModelResponse.text("answer")])
    config = AgentConfig(model=MODEL, system="You tidy files.", skills=SKILLS, skill_selector=selector)
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    assert len(selector.calls) == 1 and selector.calls[0] == (["careful", "reckless"],)
    assert model.history[0].messages == (Message.system("You tidy files."), CAREFUL, Message.user("hello"))
    record = decisions(rt, eid)["#turn:0:skills"]
    assert (record["options"], record["choice"]) == (["careful", "reckless"], ["careful"])
    report = await rt.replay(eid)
    assert report.reproduced, report.message
    assert len(selector.calls) == 1  # served, not asked again
    assert rebuild_requests(rt.journal.read(eid))["#turn:0"].messages == model.history[0].messages


async def test_a_recovered_run_resends_the_prompt_with_the_recorded_skill_set() -> None:
    selector = Counter([["careful"], ["reckless"]])
    config = AgentConfig(model=MODEL, skills=SKILLS, skill_selector=selector)
    first = ScriptedModel([ModelResponse.text("answer")])
    rt, result = await run_agent(config, first)
    eid = result.execution_id
    # A crash while the model call was in flight: the log ends at its step_started.
    cut = first_started(rt, eid, "#turn:0").seq
    again = ScriptedModel([ModelResponse.text("answer")])
    rt2 = make_runtime(prefix_journal(rt.journal, eid, cut))
    register_model(rt2, again)
    install(rt2, config)
    (recovered,) = await rt2.recover()

    assert recovered.status == "completed"
    assert len(selector.calls) == 1
    assert again.history[0].messages == first.history[0].messages  # the careful prompt, not reckless
    assert CAREFUL in again.history[0].messages


async def test_across_a_resume_each_turn_decides_once_and_turn_zero_keeps_its_skills() -> None:
    log: list[str] = []
    selector = Counter([["careful"], ["reckless"]])
    model = ScriptedModel(delete_then_answer)
    config = AgentConfig(model=MODEL, tools=[gated(log)], skills=SKILLS, skill_selector=selector)
    rt, result = await run_agent(config, model)
    eid = result.execution_id
    assert result.status == "suspended" and len(selector.calls) == 1

    done = await rt.resume(eid, "#turn:0:tool:0:approval", {"approved": True})
    assert done.status == "completed"
    assert len(selector.calls) == 2  # turn 0 served on resume; turn 1 asked once
    assert CAREFUL in model.history[0].messages and RECKLESS not in model.history[0].messages
    assert RECKLESS in model.history[1].messages and CAREFUL not in model.history[1].messages
    assert {k: v["choice"] for k, v in decisions(rt, eid).items()} == {
        "#turn:0:skills": ["careful"],
        "#turn:1:skills": ["reckless"],
    }
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced
    assert len(selector.calls) == 2


async def test_contrast_a_selector_called_outside_ctx_decide_drifts_and_the_rerun_diverges() -> None:
    """Without the seam the re-run builds a different prompt than the one whose answer is recorded."""
    log: list[str] = []
    selector = Counter([["careful"], ["reckless"]])
    delete_file = gated(log)
    model = ScriptedModel(delete_then_answer)
    rt = make_runtime()
    register_model(rt, model)
    delete_file.register(rt.effects)

    async def inline(ctx: ExecutionContext, input: Any) -> Any:
        chosen = selector([s.name for s in SKILLS])  # NOT recorded: asked again on every re-run
        system = "You tidy files. " + " ".join(s.instructions for s in SKILLS if s.name in chosen)
        return await agent_loop(ctx, AgentConfig(model=MODEL, tools=[delete_file], system=system), input)

    rt.flows.register(inline, "inline")
    result = await rt.start("inline", "tidy")
    assert result.status == "suspended"
    assert "Double-check" in (model.history[0].system or "")

    report = await rt.replay(result.execution_id)
    assert not report.reproduced
    assert "step '#turn:0'" in report.message and "input digest" in report.message
    with pytest.raises(NonDeterminismError, match=r"step '#turn:0': its input digest"):
        await rt.resume(result.execution_id, "#turn:0:tool:0:approval", {"approved": True})
    assert log == []  # the diverged re-run never reached the tool
    assert len(selector.calls) == 3


# -- memory recall ----------------------------------------------------------------------------------------
MEMORIES = [
    "the deploy key lives in the vault",
    "a deploy happens on fridays",
    "every deploy needs approval from ops",
    "lunch is at noon",
]


async def test_memory_recall_is_a_decision_bounded_by_recall_limit() -> None:
    memory = TieredMemory(MEMORIES)
    model = ScriptedModel([ModelResponse.text("Fridays, with approval from ops.")])
    config = AgentConfig(model=MODEL, memory=memory, recall_limit=2)
    rt, result = await run_agent(config, model, "Is a deploy on fridays, and does a deploy need approval from ops?")
    eid = result.execution_id

    record = decisions(rt, eid)["#turn:0:recall"]
    assert record["options"] == MEMORIES
    assert record["choice"] == ["a deploy happens on fridays", "every deploy needs approval from ops"]
    assert record["policy"] == "TieredMemory.recall_by_overlap"
    recalled = model.history[0].messages[0]
    assert recalled == Message.system(
        "Relevant memory:\n- a deploy happens on fridays\n- every deploy needs approval from ops"
    )
    assert "lunch" not in recalled.text
    assert_rebuilt_matches(rt, eid, model)


async def test_recall_stays_bounded_even_when_a_policy_returns_everything_and_replay_serves_it() -> None:
    class Greedy:
        items = MEMORIES
        asked = 0

        def policy(self, query: str, limit: int) -> Any:
            def everything(options: Sequence[Any]) -> Decision:
                Greedy.asked += 1
                return Decision(choice=list(options), propensity=1.0)

            return everything

    model = ScriptedModel([calls(("noop", {})), ModelResponse.text("ok")])

    @loom.tool
    def noop() -> str:
        """Nothing."""
        return "nothing"

    config = AgentConfig(model=MODEL, tools=[noop], memory=Greedy(), recall_limit=3)
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    for request in model.history:
        (memo,) = [m for m in request.messages if m.text.startswith("Relevant memory:")]
        assert memo.text.count("\n- ") == 3
    assert sorted(decisions(rt, eid)) == ["#turn:0:recall", "#turn:1:recall"]
    assert Greedy.asked == 2
    assert (await rt.replay(eid)).reproduced
    assert Greedy.asked == 2


def test_tiered_memory_folds_old_items_into_summaries_that_recall_can_choose() -> None:
    memory = TieredMemory(summarizer=lambda old: "summary of " + ", ".join(old), summarize_after=3)
    for item in ["a1", "a2", "a3", "a4"]:
        memory.add(item)
    assert memory.summaries == ["summary of a1, a2"]
    assert memory.recent == ["a3", "a4"]
    assert memory.items == ["summary of a1, a2", "a3", "a4"]
    chosen = memory.policy("what about a2", 5)(memory.items)
    assert chosen.choice == ["summary of a1, a2"]


async def test_control_a_loop_with_neither_skills_nor_memory_records_no_decisions() -> None:
    model = ScriptedModel([calls(("noop", {})), ModelResponse.text("ok")])

    @loom.tool
    def noop() -> str:
        """Nothing."""
        return "nothing"

    config = AgentConfig(model=MODEL, tools=[noop], system="sys")
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    assert events(rt, eid, EventKind.DECISION_RECORDED) == []
    assert [m.role for m in model.history[0].messages] == ["system", "user"]
    assert all(
        "extra" not in e.data["input"] for e in events(rt, eid, EventKind.STEP_STARTED) if e.step_id == "#turn:0"
    )


# -- routing ---------------------------------------------------------------------------------------------
def routed_runtime(**models: ScriptedModel) -> tuple[Any, dict[str, ScriptedModel]]:
    rt = make_runtime()
    for name, model in models.items():
        register_model(rt, model, f"model.{name}")
    return rt, models


async def test_routing_records_each_turns_route_with_probabilities_and_propensity() -> None:
    seen: list[tuple[list[str], int, int]] = []

    def cost_first(models: list[str], request: ModelRequest, turn: int) -> Decision:
        seen.append((models, turn, len(request.messages)))
        return Decision(choice="model.cheap", probabilities=[0.8, 0.2])

    @loom.tool
    def noop() -> str:
        """Nothing."""
        return "nothing"

    cheap = ScriptedModel([calls(("noop", {})), ModelResponse.text("cheap answer")])
    rt, _ = routed_runtime(cheap=cheap, strong=ScriptedModel([]))
    routes = Routes(models=["model.cheap", "model.strong"], policy=cost_first, name="cost-first")
    config = AgentConfig(routes=routes, tools=[noop])
    _, result = await run_agent(config, None, rt=rt)
    eid = result.execution_id

    assert AgentResult.model_validate(result.output).output == "cheap answer"
    assert seen == [(["model.cheap", "model.strong"], 0, 1), (["model.cheap", "model.strong"], 1, 3)]
    for turn in (0, 1):
        assert decisions(rt, eid)[f"#turn:{turn}:route"] == {
            "options": ["model.cheap", "model.strong"],
            "choice": "model.cheap",
            "probabilities": [0.8, 0.2],
            "propensity": 0.8,
            "policy": "cost-first",
        }
        assert first_started(rt, eid, f"#turn:{turn}").data["effect"] == "model.cheap"
    assert_rebuilt_matches(rt, eid, cheap)
    report = await rt.replay(eid)
    assert report.reproduced, report.message
    assert len(seen) == 2  # the replay was served the routes: the policy was not asked again


async def test_a_routed_model_call_passes_the_whole_ring_authorization() -> None:
    strong = ScriptedModel([ModelResponse.text("never")])
    rt = make_runtime()
    register_model(rt, ScriptedModel([]), "model.cheap")
    register_model(rt, strong, "model.strong", scopes={"models.strong"})
    routes = Routes(models=["model.cheap", "model.strong"], policy=lambda models, request, turn: "model.strong")
    _, result = await run_agent(AgentConfig(routes=routes), None, rt=rt)

    assert result.status == "failed"
    error = result.exception()
    assert isinstance(error, NotAuthorizedError) and "models.strong" in str(error)
    assert strong.history == []
    (failed,) = events(rt, result.execution_id, EventKind.STEP_FAILED)
    assert (failed.step_id, failed.data["effect"]) == ("#turn:0", "model.strong")


async def test_a_routed_model_call_passes_the_whole_ring_quota() -> None:
    @loom.tool
    def noop() -> str:
        """Nothing."""
        return "nothing"

    cheap = ScriptedModel([calls(("noop", {})), ModelResponse.text("second")])
    rt = make_runtime()
    register_model(rt, cheap, "model.cheap", quota=Quota(calls=1))
    register_model(rt, ScriptedModel([]), "model.strong")
    routes = Routes(models=["model.cheap", "model.strong"], policy=lambda models, request, turn: "model.cheap")
    _, result = await run_agent(AgentConfig(routes=routes, tools=[noop]), None, rt=rt)

    assert result.status == "failed"
    assert isinstance(result.exception(), QuotaExceededError)
    assert "quota calls of effect 'model.cheap'" in str(result.exception())
    assert len(cheap.history) == 1


async def test_elevation_is_a_recorded_decision_and_its_own_step() -> None:
    @loom.tool
    def noop() -> str:
        """Nothing."""
        return "nothing"

    cheap = ScriptedModel(lambda r: ModelResponse.text("unsure" if turn_of(r) == 0 else "final from cheap"))
    mid = ScriptedModel([ModelResponse.text("unsure")])
    strong = ScriptedModel([calls(("noop", {}), text="I will check.")])
    rt, _ = routed_runtime(cheap=cheap, mid=mid, strong=strong)
    policy = Counter(["model.cheap"])
    routes = Routes(
        models=["model.cheap", "model.mid", "model.strong"],
        policy=policy,
        elevate=lambda response, turn: response.message.text == "unsure",
    )
    _, result = await run_agent(AgentConfig(routes=routes, tools=[noop]), None, rt=rt)
    eid = result.execution_id

    assert AgentResult.model_validate(result.output).output == "final from cheap"
    made = decisions(rt, eid)
    assert made["#turn:0:route:elevate:1"]["options"] == ["model.mid", "model.strong"]
    assert made["#turn:0:route:elevate:1"]["choice"] == "model.mid"
    assert made["#turn:0:route:elevate:2"]["options"] == ["model.strong"]
    assert made["#turn:0:route:elevate:2"]["propensity"] == 1.0
    assert step_ids(rt, eid) == [
        "#turn:0",
        "#turn:0:elevated:1",
        "#turn:0:elevated:2",
        "#turn:0:tool:0",
        "#turn:1",
    ]
    effects = {sid: first_started(rt, eid, sid).data["effect"] for sid in step_ids(rt, eid)}
    assert effects["#turn:0:elevated:1"] == "model.mid" and effects["#turn:0:elevated:2"] == "model.strong"
    # Every model of the turn was sent the same request; the strongest answer is the one kept.
    assert cheap.history[0].messages == mid.history[0].messages == strong.history[0].messages
    assert cheap.history[1].messages[1].text == "I will check."
    report = await rt.replay(eid)
    assert report.reproduced, report.message
    assert len(policy.calls) == 2 and (len(cheap.history), len(mid.history), len(strong.history)) == (2, 1, 1)


async def test_the_agent_facade_registers_routed_models(rt: Runtime) -> None:
    routes = Routes(models=["model.a", "model.b"], policy=lambda models, request, turn: "model.b")
    b = ScriptedModel([ModelResponse.text("from b")])
    agent = loom.Agent(routes=routes, models={"model.a": ScriptedModel([]), "model.b": b}, name="routed")
    result = await agent.run("hi", runtime=rt)
    assert result.output == "from b" and len(b.history) == 1
