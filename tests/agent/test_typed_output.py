"""Typed output (``docs/design.md``, section 6.15): ``Agent(output_type=...)`` validates the final answer
with pydantic, through a ``final_result`` tool or the wire's native structured output; a failed
answer goes back to the model, a bounded number of times, every attempt journaled."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

import loom_nb as loom
from loom_nb.agent import rebuild_requests
from loom_nb.agent.output import FINAL_RESULT_TOOL, OutputSpec, type_name
from loom_nb.errors import OutputValidationError, UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime


class City(BaseModel):
    """A city."""

    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Pair(TypedDict):
    left: str
    right: int


def answer(arguments: Any, *, also: tuple[str, dict[str, Any]] | None = None) -> ModelResponse:
    calls = [(FINAL_RESULT_TOOL, arguments)]
    if also is not None:
        calls.insert(0, also)
    return ModelResponse.tool_calls(calls)


def agent(script: Any, output_type: Any = City, **options: Any) -> loom.Agent[Any]:
    model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
    return loom.Agent(model, output_type=output_type, name="typed", **options)


async def start(a: loom.Agent[Any], text: str = "Which city?") -> tuple[Any, loom.Run[Any]]:
    rt = make_runtime()
    run = a.start(text, runtime=rt, view=False)
    await run.wait()
    return rt, run


def node_inputs(rt: Any, eid: str) -> dict[str, Any]:
    return {
        e.step_id: e.data["input"]
        for e in rt.journal.read(eid)
        if e.kind == EventKind.STEP_STARTED and e.step_id.startswith("#turn:") and e.data.get("attempt", 1) == 1
    }


# -- the answer is typed -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (City, {"name": "Oslo", "population": 709000}, City(name="Oslo", population=709000)),
        (Point, {"x": 1.5, "y": -2}, Point(1.5, -2.0)),
        (Pair, {"left": "a", "right": 2}, {"left": "a", "right": 2}),
        (list[City], {"response": [{"name": "Rome", "population": 1}]}, [City(name="Rome", population=1)]),
        (int, {"response": 42}, 42),
    ],
    ids=["pydantic", "dataclass", "typeddict", "list", "int"],
)
async def test_a_final_result_call_is_validated_into_the_output_type(
    output_type: Any, arguments: dict[str, Any], expected: Any
) -> None:
    model = ScriptedModel([answer(arguments)])
    rt, run = await start(agent(model, output_type))
    result = await run
    assert result.output == expected and type(result.output) is type(expected)
    assert result.stop_reason == "end_turn" and result.turns == 1
    (request,) = model.history
    assert request.output is None  # tool mode: no native schema
    assert [t.name for t in request.tools] == [FINAL_RESULT_TOOL]
    assert request.tools[0].parameters == OutputSpec(output_type).wire_schema
    first = node_inputs(rt, run.id)["#turn:0"]
    assert first["output"] == {"type": type_name(output_type), "mode": "tool"}
    assert first["tools"][-1]["parameters"] == OutputSpec(output_type).wire_schema  # the schema, once
    # The journal holds the answer's JSON; a run attached later reads it back typed.
    done = rt.journal.read(run.id)[-1]
    assert done.kind == EventKind.EXECUTION_COMPLETED
    assert done.data["output"]["output"] == OutputSpec(output_type).dump(expected)
    again = agent(ScriptedModel([]), output_type).attach(run.id, runtime=rt)
    assert again.result is not None and again.result.output == expected


async def test_native_mode_sends_the_schema_and_reads_the_text() -> None:
    model = ScriptedModel([ModelResponse.text('{"name": "Oslo", "population": 709000}')], native_output=True)
    rt, run = await start(agent(model))  # auto: the provider says it has native output
    assert (await run).output == City(name="Oslo", population=709000)
    (request,) = model.history
    assert request.tools == ()
    assert request.output is not None and request.output.name == "City" and request.output.strict
    assert request.output.json_schema["additionalProperties"] is False
    assert request.output.json_schema["required"] == ["name", "population"]
    recorded = node_inputs(rt, run.id)["#turn:0"]["output"]
    assert recorded == {
        "type": "tests.agent.test_typed_output:City",
        "mode": "native",
        "schema": request.output.json_schema,
    }


async def test_a_text_agent_journals_exactly_what_it_did_before() -> None:
    model = ScriptedModel([ModelResponse.text("Oslo")])
    rt, run = await start(agent(model, str))
    assert (await run).output == "Oslo"
    (request,) = model.history
    assert request.output is None and request.tools == ()
    assert "output" not in request.model_dump(mode="json")
    assert set(node_inputs(rt, run.id)["#turn:0"]) == {"prev", "add", "tools"}


# -- retries ---------------------------------------------------------------------------------------
async def test_a_failed_answer_goes_back_as_the_calls_error_result_and_every_attempt_is_journaled() -> None:
    model = ScriptedModel(
        [
            answer({"name": "Oslo", "population": "many"}),
            answer({"name": "Oslo"}),
            answer({"name": "Oslo", "population": 709000}),
        ]
    )
    rt, run = await start(agent(model))
    result = await run
    assert result.output == City(name="Oslo", population=709000) and result.turns == 3
    second = model.history[1].messages
    assert second[-1].role == "tool" and second[-1].is_error
    assert second[-1].tool_call_id == "call_0"
    assert "population: Input should be a valid integer" in second[-1].text
    assert "population: Field required" in model.history[2].messages[-1].text
    inputs = node_inputs(rt, run.id)
    assert list(inputs) == ["#turn:0", "#turn:1", "#turn:2"]
    # Each failed attempt is a model step of its own and its error is journaled in the next delta.
    # (event format 2 implies the reference to the previous node's answer: the delta starts with the error)
    assert inputs["#turn:1"]["add"][0]["msg"]["is_error"] is True
    rebuilt = rebuild_requests(rt.journal.read(run.id))
    assert [rebuilt[s].messages for s in inputs] == [r.messages for r in model.history]
    assert (await rt.replay(run.id)).reproduced


async def test_native_mode_sends_a_failed_answer_back_as_a_user_message() -> None:
    model = ScriptedModel(
        [ModelResponse.text("Oslo!"), ModelResponse.text('{"name": "Oslo", "population": 1}')], native_output=True
    )
    _, run = await start(agent(model))
    assert (await run).output == City(name="Oslo", population=1)
    retry = model.history[1].messages[-1]
    assert retry.role == "user" and retry.text.startswith("The answer is not valid JSON")


async def test_a_text_answer_in_tool_mode_is_asked_again_through_final_result() -> None:
    model = ScriptedModel([ModelResponse.text("Oslo"), answer({"name": "Oslo", "population": 1})])
    _, run = await start(agent(model))
    assert (await run).turns == 2
    assert model.history[1].messages[-1].text.startswith(f"Give the final answer by calling the {FINAL_RESULT_TOOL}")


async def test_retries_are_bounded_and_exhaustion_fails_the_run_with_a_journaled_error() -> None:
    model = ScriptedModel([answer({"name": "Oslo"})] * 3)
    rt, run = await start(agent(model, output_retries=1))
    assert run.status == "failed"
    error = run.exception()
    assert isinstance(error, OutputValidationError)
    assert "failed tests.agent.test_typed_output:City 2 times (steps #turn:0, #turn:1; output_retries=1)" in str(error)
    assert len(model.history) == 2
    # Rebuilt from the journal (a restarted kernel sees the same error).
    attached = loom.Run.attach(rt, run.id)
    assert isinstance(attached.exception(), OutputValidationError)
    assert str(attached.exception()) == str(error)


async def test_a_tool_called_beside_a_failing_final_result_is_not_run() -> None:
    ran: list[int] = []

    @loom.tool
    def lookup(n: int) -> str:
        """Look n up."""
        ran.append(n)
        return f"found {n}"

    model = ScriptedModel(
        [
            answer({"name": "X"}, also=("lookup", {"n": 1})),
            ModelResponse.tool_calls([("lookup", {"n": 2})]),
            answer({"name": "X", "population": 3}),
        ]
    )
    _, run = await start(agent(model, tools=[lookup]))
    assert (await run).output == City(name="X", population=3)
    assert ran == [2]
    not_run = model.history[1].messages[-2]
    assert not_run.is_error and "not run" in not_run.text


async def test_a_refusal_or_max_turns_fails_a_typed_run() -> None:
    refusal = ModelResponse(message=loom.Message(role="assistant", refusal="I can't."), finish_reason="refusal")
    _, run = await start(agent(ScriptedModel([refusal], native_output=True)))
    assert isinstance(run.exception(), OutputValidationError)
    assert "the model refused" in str(run.exception())

    looping = ScriptedModel(lambda r: ModelResponse.tool_calls([("lookup", {"n": 1})]))

    @loom.tool
    def lookup(n: int) -> str:
        """Look n up."""
        return "x"

    _, run = await start(agent(looping, tools=[lookup], max_turns=2))
    assert isinstance(run.exception(), OutputValidationError)
    assert "max_turns=2" in str(run.exception())


# -- replay and configuration ------------------------------------------------------------------------
async def test_a_changed_output_type_is_reported_on_replay() -> None:
    model = ScriptedModel([answer({"name": "Oslo", "population": 1})])
    rt, run = await start(agent(model))
    assert (await rt.replay(run.id)).reproduced
    agent(ScriptedModel([]), Point).register(rt)
    report = await rt.replay(run.id)
    assert not report.reproduced
    assert "step '#turn:0': its input digest" in str(report.message)


class Address(BaseModel):
    street: str
    zip: str | None = None


class Person(BaseModel):
    name: str
    tags: list[str] = []
    address: Address
    friends: list[Address] = []
    kind: Literal["a", "b"] = "a"
    score: float | None = None


@pytest.mark.parametrize("model", [City, Address, Person])
def test_strict_schema_matches_the_openai_sdks(model: type[BaseModel]) -> None:
    """The official SDK's strict form of a pydantic model is the oracle for ours."""
    from openai.lib._pydantic import to_strict_json_schema

    assert OutputSpec(model).wire_schema == to_strict_json_schema(model)


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="output_mode must be 'auto', 'native' or 'tool', got 'json'"):
        loom.Agent(ScriptedModel([]), output_type=City, output_mode="json")  # type: ignore[call-overload]
    with pytest.raises(UsageError, match="output_retries must be 0 or more"):
        loom.Agent(ScriptedModel([]), output_type=City, output_retries=-1)

    @loom.tool
    def final_result() -> str:
        """Clash."""
        return ""

    with pytest.raises(UsageError, match="a tool is named 'final_result'"):
        loom.Agent(ScriptedModel([]), output_type=City, tools=[final_result])


async def test_agent_step_returns_the_typed_answer_too() -> None:
    from loom_nb.agent import AgentConfig
    from loom_nb.agent.step import agent_step
    from tests.agent.support import MODEL, register_model

    rt = make_runtime()
    register_model(rt, ScriptedModel([answer({"name": "Oslo", "population": 1})]))
    step = agent_step(AgentConfig(model=MODEL, output_type=City), name="typed-step")

    async def body(ctx: Any, input: Any) -> Any:
        result = await step(ctx, input)
        assert result.output == City(name="Oslo", population=1)
        return result.output.name

    rt.flows.register(body, "typed-step-flow")
    assert (await rt.start("typed-step-flow", "Which city?")).output == "Oslo"


async def test_a_typed_run_compacts_and_rebuilds_its_requests_from_the_journal() -> None:
    """Retries and compaction together: the failed answers' error results fold like any tool result."""
    from loom_nb.agent import Compaction

    script = [
        answer({"name": "Oslo"}),
        answer({"name": "Oslo", "population": "x"}),
        answer({"name": "Oslo", "population": 1}),
    ]
    model = ScriptedModel(script)
    summarizer = ScriptedModel(lambda r: ModelResponse.text("summary"))
    compaction = Compaction(effect_id="model.summarizer", after_messages=2, keep_recent=1)
    rt, run = await start(agent(model, summarizer=summarizer, compaction=compaction))
    assert (await run).output == City(name="Oslo", population=1)
    sids = list(node_inputs(rt, run.id))
    assert "#turn:2:compact" in sids
    rebuilt = rebuild_requests(rt.journal.read(run.id))
    assert [rebuilt[s].messages for s in sids if not s.endswith(":compact")] == [r.messages for r in model.history]
    assert model.history[2].messages[0].text.startswith("[Summary")
    assert (await rt.replay(run.id)).reproduced


async def test_check_sees_a_typed_run_as_it_was_and_names_a_changed_output_type() -> None:
    @loom.tool(needs_approval=True)
    def confirm(city: str) -> str:
        """Confirm a city (asks first)."""
        return city

    script = [ModelResponse.tool_calls([("confirm", {"city": "Oslo"})]), answer({"name": "Oslo", "population": 1})]
    rt = make_runtime()
    run = agent(ScriptedModel(script), tools=[confirm]).start("Which city?", runtime=rt, view=False)
    await run.wait(until="paused")
    assert run.status == "suspended"
    assert (await rt.check()).ok  # the final_result tool and the output record match the code

    agent(ScriptedModel(script), Point, tools=[confirm]).register(rt)
    (parked,) = (await rt.check()).diverging
    reasons = " | ".join(f.reason for f in parked.findings)
    assert "the output type changed since the run started (tests.agent.test_typed_output:City -> " in reasons
    assert "tests.agent.test_typed_output:Point)" in reasons
    assert "'final_result' has another schema or description" in reasons
    assert any("agent.patch('<change>', output_type=...)" in f.fix for f in parked.findings)


async def test_a_typed_sessions_next_run_reads_the_accepted_answer() -> None:
    """The final_result call a typed run ended with is carried with an 'accepted' result, never as an
    unanswered call (a provider refuses a call without a result)."""
    model = ScriptedModel([answer({"name": "Oslo", "population": 1}), answer({"name": "Bergen", "population": 2})])
    rt = make_runtime()
    session = agent(model).session("t", runtime=rt)
    first = await session.run("Which city?")
    second = await session.run("And another?")
    assert (first.output, second.output) == (City(name="Oslo", population=1), City(name="Bergen", population=2))
    sent = model.history[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2].text == "The final answer was accepted." and not sent[2].is_error
    assert sent[2].tool_call_id == sent[1].tool_calls[0].id
