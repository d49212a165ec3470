"""Bad model output never fails a run: tool arguments nested too deep (past what the journal or the
JSON parser takes), huge arguments, unknown tools and wrong types all go back to the model as an
invalid call it can correct, through a ``ScriptedModel`` and through the OpenAI wire parser."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import loom_nb as loom
from loom_nb.agent.config import AgentConfig
from loom_nb.journal.events import EventKind
from loom_nb.messages import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, ModelResponse
from loom_nb.providers.openai import OpenAIChat
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.testing import FakeClock, SequentialIds
from tests.agent.support import MODEL, calls, events, lookup_tool, run_agent, step_ids


def nested(levels: int) -> Any:
    """``{"a": {"a": ... 1}}`` with ``levels`` objects."""
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("deep", {"city": nested(300)}, "lookup", f"nested deeper than {MAX_ARGUMENT_DEPTH} levels"),
    ("deeper than recursion", {"city": nested(5000)}, "lookup", f"nested deeper than {MAX_ARGUMENT_DEPTH} levels"),
    ("huge", {"city": "x" * (MAX_ARGUMENT_CHARS + 10)}, "lookup", "more than 1,000,000"),
    ("wrong type", {"city": 5}, "lookup", "Input should be a valid string"),
    ("unknown tool", {"city": "Paris"}, "forecast", "there is no tool named 'forecast'"),
]


@pytest.mark.parametrize(("case", "arguments", "name", "told"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_call_goes_back_to_the_model_and_the_run_completes(
    case: str, arguments: dict[str, Any], name: str, told: str
) -> None:
    seen: list[Any] = []
    model = ScriptedModel([calls((name, arguments)), calls(("lookup", {"city": "Paris"})), ModelResponse.text("sunny")])
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)], warn_transcript_bytes=False)
    rt, result = await run_agent(config, model)
    eid = result.execution_id
    assert (result.status, result.output["output"]) == ("completed", "sunny")
    error = model.history[1].messages[-1]
    assert (error.role, error.is_error) == ("tool", True)
    assert error.text.startswith("Error: ") and told in error.text
    assert len(error.text) < 1000  # the model is told, not sent the arguments back whole
    assert step_ids(rt, eid) == ["#turn:0", "#turn:1", "#turn:1:tool:0", "#turn:2"]
    assert seen == ["Paris"]
    assert all(len(json.dumps(e.data)) < MAX_ARGUMENT_CHARS for e in events(rt, eid, EventKind.STEP_STARTED))
    assert (await rt.replay(eid)).reproduced


def _completion(arguments: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"id": "chatcmpl-d", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


async def test_deeply_nested_arguments_through_the_openai_wire_are_an_invalid_call() -> None:
    deep = '{"city": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}"
    answers = [_completion(deep), _completion('{"city": "Paris"}')]
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        doc = answers[len(bodies) - 1] if len(bodies) <= len(answers) else None
        if doc is None:
            doc = {"id": "x", "choices": [{"index": 0, "message": {"content": "sunny"}, "finish_reason": "stop"}]}
        return httpx.Response(200, json=doc)

    seen: list[Any] = []
    provider = OpenAIChat(
        "gpt-test", api_key="sk-test-0123456789", stream=False, transport=httpx.MockTransport(handler)
    )
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    agent = loom.Agent(model=provider, tools=[lookup_tool(seen)], name="deep-args")
    result = await agent.start("Weather in Paris?", runtime=rt)
    rt.close()
    assert (result.output, result.stop_reason, result.turns) == ("sunny", "end_turn", 3)
    told = bodies[1]["messages"][-1]
    assert told["role"] == "tool" and f"nested deeper than {MAX_ARGUMENT_DEPTH} levels" in told["content"]
    assert seen == ["Paris"]


def test_a_recorded_response_is_read_back_as_recorded() -> None:
    """The bound applies to live model output only: a response read from a journal (recorded before a
    limit changed) keeps its arguments, so its run replays as recorded."""
    recorded = calls(("lookup", {"city": nested(MAX_ARGUMENT_DEPTH + 5)})).model_dump(
        mode="json", exclude_defaults=True
    )
    (call,) = ModelResponse.model_validate(recorded).message.tool_calls
    assert call.raw_arguments is None and call.arguments == {"city": nested(MAX_ARGUMENT_DEPTH + 5)}
