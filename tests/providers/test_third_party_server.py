"""``Agent`` against an OpenAI-compatible server this project did not write: ``@dwmkerr/mock-llm``
(npm, installed by ``make servers``), started on a free 127.0.0.1 port.

Covered here: a tool loop with two parallel tool calls (the server checks the shape of the request
that carries the results), streamed text, 429 and 500 answers retried by the ring (as HTTP statuses,
and as the in-stream error event mock-llm sends when the request streams), and the Responses wire
(non-streamed) through the same server. Not covered by this server: usage in a streamed answer
(mock-llm does not implement ``stream_options.include_usage``) and streamed tool calls (it streams
message text only); the local wire-format server (``tests/provider_server.py``) covers those.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.journal import EventKind
from loom_nb.messages import Message, ModelRequest, Usage
from loom_nb.testing import FakeClock, SequentialIds
from tests.providers.mock_llm import CHAT, RESPONSES, MockLLM, rule, running_mock_llm
from tests.providers.responses_oracle import SdkAnswer, SdkCall, answer_body

pytestmark = pytest.mark.slow

KEY = "sk-third-party-0123456789"


@pytest.fixture(scope="module")
def llm() -> Iterator[MockLLM]:
    with running_mock_llm() as s:
        yield s


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return {"Oslo": "Oslo 12C light rain", "Bergen": "Bergen 9C fog"}[city]


def completion(message: dict[str, Any], finish: str, usage: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """A chat.completion body."""
    pin, pout = usage
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-mock",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": pin, "completion_tokens": pout, "total_tokens": pin + pout},
    }


def call(call_id: str, city: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": city})}}


def error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "mock_error", "param": None, "code": status}}


def runtime() -> loom.Runtime:
    return loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())


def chat(llm: MockLLM, *, stream: bool) -> loom.OpenAIChat:
    return loom.OpenAIChat("gpt-mock", base_url=llm.url + "/v1", api_key=KEY, stream=stream)


# The second request must carry the assistant's two calls and both results, in order.
RESULTS_CAME_BACK = (
    "body.messages[-3].tool_calls[0].id == 'call_oslo' && body.messages[-3].tool_calls[1].id == 'call_bergen'"
    " && body.messages[-2].tool_call_id == 'call_oslo' && body.messages[-1].tool_call_id == 'call_bergen'"
    " && body.messages[-1].role == 'tool'"
)


async def test_a_tool_loop_with_parallel_calls(llm: MockLLM) -> None:
    calls = completion(
        {"content": None, "tool_calls": [call("call_oslo", "Oslo"), call("call_bergen", "Bergen")]},
        "tool_calls",
        (20, 7),
    )
    answer = completion(
        {"content": "{{jmes request body.messages[-2].content}} and {{jmes request body.messages[-1].content}}"},
        "stop",
        (41, 9),
    )
    llm.rules(rule(CHAT, calls, sequence=0), rule(CHAT, json.dumps(answer), sequence=1, match=RESULTS_CAME_BACK))
    rt = runtime()
    agent = loom.Agent(model=chat(llm, stream=False), tools=[weather], name="mock-llm-tools")
    result = await agent.run("Weather in Oslo and Bergen?", runtime=rt)
    assert result.output == "Oslo 12C light rain and Bergen 9C fog"
    assert (result.usage.input_tokens, result.usage.output_tokens) == (61, 16)
    rt.close()


async def test_streamed_text_arrives_in_deltas(llm: MockLLM) -> None:
    text = "It is 12C and raining in Oslo today."
    llm.rules(rule(CHAT, completion({"content": text}, "stop")), chunk_size=4)
    deltas: list[str] = []
    response = await chat(llm, stream=True).complete(
        ModelRequest(messages=(Message.user("Weather?"),)), on_delta=deltas.append
    )
    assert "".join(deltas) == response.message.text == text
    assert len(deltas) == 9 and response.finish_reason == "stop"
    assert response.usage == Usage()  # mock-llm sends no usage chunk when streaming


@pytest.mark.parametrize("stream", [False, True], ids=["http-status", "in-stream-error"])
@pytest.mark.parametrize("status", [429, 500])
async def test_a_failed_answer_is_retried_by_the_ring(llm: MockLLM, status: int, stream: bool) -> None:
    llm.rules(
        rule(CHAT, error(status, f"mock {status}"), status=status, sequence=0),
        rule(CHAT, completion({"content": "Recovered."}, "stop", (5, 2)), sequence=1),
    )
    rt = runtime()
    agent = loom.Agent(model=chat(llm, stream=stream), name=f"mock-llm-{status}-{stream}")
    run = agent.start("hi", runtime=rt)
    result = await run
    assert result.output == "Recovered."
    failed = [e for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].data["will_retry"] is True
    assert failed[0].data["error"]["attrs"]["status_code"] == status
    assert f"mock {status}" in failed[0].data["error"]["message"]
    rt.close()


async def test_a_non_retryable_answer_fails_the_run(llm: MockLLM) -> None:
    llm.rules(rule(CHAT, error(401, "Incorrect API key provided."), status=401))
    rt = runtime()
    run = loom.Agent(model=chat(llm, stream=False), name="mock-llm-401").start("hi", runtime=rt)
    with pytest.raises(loom.ProviderHTTPError, match="Incorrect API key") as info:
        await run
    assert info.value.status_code == 401 and KEY not in str(info.value)
    rt.close()


async def test_the_responses_wire_runs_a_tool_loop_through_the_server(llm: MockLLM) -> None:
    first = SdkAnswer(
        calls=[
            SdkCall("call_oslo", "weather", ['{"city": "Oslo"}']),
            SdkCall("call_bergen", "weather", ['{"city": "Bergen"}']),
        ],
        reasoning=["Two cities."],
        usage=(30, 8),
    )
    second = SdkAnswer(text=["Oslo is wetter."], usage=(50, 5), id="resp_0002")
    results_came_back = (
        "body.input[1].type == 'reasoning' && body.input[2].call_id == 'call_oslo'"
        " && body.input[4].type == 'function_call_output' && body.input[4].call_id == 'call_oslo'"
        " && body.input[5].output == 'Bergen 9C fog' && body.instructions == 'Be brief.'"
    )
    llm.rules(
        rule(RESPONSES, answer_body(first).decode(), sequence=0),
        rule(RESPONSES, answer_body(second).decode(), sequence=1, match=results_came_back),
    )
    rt = runtime()
    model = loom.OpenAIResponses("gpt-mock", base_url=llm.url + "/v1", api_key=KEY, stream=False)
    agent = loom.Agent(model=model, tools=[weather], system="Be brief.", name="mock-llm-responses")
    result = await agent.run("Weather in Oslo and Bergen?", runtime=rt)
    assert result.output == "Oslo is wetter."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (80, 13)
    rt.close()
