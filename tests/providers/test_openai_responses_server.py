"""``OpenAIResponses`` over real sockets: the local wire-format server (``provider_server.py``)
renders its scenarios in the Responses format, so bytes split anywhere, CRLF line ends, cut
connections, malformed events, in-stream errors, error statuses and a silent server reach the client
as they would from a real one; an ``Agent`` runs a tool loop through it."""

from __future__ import annotations

import pytest

import loom_nb as loom
from loom_nb.errors import ProviderHTTPError, ProviderProtocolError, ProviderTimeout
from loom_nb.journal import EventKind
from loom_nb.messages import Message, ModelRequest, ToolSpec
from loom_nb.testing import FakeClock, SequentialIds
from tests.providers.provider_server import Call, Cut, Fail, Hang, Malformed, ProviderServer, Reply, StreamError
from tests.providers.responses_oracle import check_params

KEY = "sk-test-responses-server-0123456789"
ASK = ModelRequest(
    messages=(Message.system("Be brief."), Message.user("Weather in Oslo and Bergen?")),
    tools=(ToolSpec(name="weather", description="The weather in a city."),),
)
TWO_CALLS = Reply(
    text=["Checking ", "both ", "cities: ø, 雨 and 🌧."],
    calls=[Call("call_o", "weather", ['{"city"', ': "Oslo"}']), Call("call_b", "weather", ['{"city": "Ber', 'gen"}'])],
    usage=(40, 12),
    id="resp_two",
)


def model(server: ProviderServer, **options: object) -> loom.OpenAIResponses:
    return loom.OpenAIResponses("gpt-test", base_url=server.url + "/v1", api_key=KEY, **options)


@pytest.mark.parametrize(("chunk_size", "crlf"), [(None, False), (7, True), (1, False)])
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.slow
async def test_text_and_parallel_calls_arrive_whole(
    server: ProviderServer, stream: bool, chunk_size: int | None, crlf: bool
) -> None:
    reply = Reply(**{**TWO_CALLS.__dict__, "chunk_size": chunk_size, "crlf": crlf})
    server.push(reply)
    deltas: list[str] = []
    response = await model(server, stream=stream).complete(ASK, on_delta=deltas.append)
    assert response.message.text == "Checking both cities: ø, 雨 and 🌧." == "".join(deltas)
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("call_o", "weather", {"city": "Oslo"}),
        ("call_b", "weather", {"city": "Bergen"}),
    ]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 12)
    assert (response.finish_reason, response.response_id) == ("tool_calls", "resp_two")
    (request,) = server.requests
    assert request.path == "/v1/responses" and request.headers["authorization"] == f"Bearer {KEY}"
    check_params(request.body)
    assert request.body.get("stream") is (True if stream else None)


async def test_an_incomplete_answer_says_length(server: ProviderServer) -> None:
    server.push(Reply(text=["Once upon"], finish="length"))
    response = await model(server).complete(ASK)
    assert (response.message.text, response.finish_reason) == ("Once upon", "length")


async def test_a_cut_chunked_stream_is_a_retryable_timeout(server: ProviderServer) -> None:
    server.push(Cut(TWO_CALLS, after=4, chunked=True))
    with pytest.raises(ProviderTimeout, match="cut off") as info:
        await model(server).complete(ASK)
    assert info.value.retryable


async def test_a_stream_closed_before_its_terminal_event_is_a_protocol_error(server: ProviderServer) -> None:
    server.push(Cut(TWO_CALLS, after=6, chunked=False))
    with pytest.raises(ProviderProtocolError, match=r"ended before response\.completed"):
        await model(server).complete(ASK)


async def test_a_malformed_event_is_a_protocol_error(server: ProviderServer) -> None:
    server.push(Malformed(TWO_CALLS, at=3))
    with pytest.raises(ProviderProtocolError, match="malformed JSON in event"):
        await model(server).complete(ASK)


async def test_an_in_stream_error_is_typed_by_its_code(server: ProviderServer) -> None:
    server.push(StreamError(TWO_CALLS, after=4, error_type="rate_limit_exceeded", message="slow down"))
    with pytest.raises(ProviderHTTPError, match="rate_limit_exceeded: slow down") as info:
        await model(server).complete(ASK)
    assert info.value.status_code == 429 and info.value.retryable


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (503, True), (400, False)])
async def test_an_error_status_is_typed_with_retry_after(server: ProviderServer, status: int, retryable: bool) -> None:
    server.push(Fail(status, "no thanks", headers={"retry-after": "2"}))
    with pytest.raises(ProviderHTTPError, match="no thanks") as info:
        await model(server).complete(ASK)
    assert (info.value.status_code, info.value.retryable, info.value.retry_after) == (status, retryable, 2.0)


async def test_a_silent_server_times_out(server: ProviderServer) -> None:
    server.push(Hang(5.0))
    with pytest.raises(ProviderTimeout, match="timed out"):
        await model(server, timeout=0.2).complete(ASK)


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"{city}: 12C"


async def test_an_agent_streams_retries_and_calls_tools_through_the_server(server: ProviderServer) -> None:
    server.push(
        Fail(429, "slow down", headers={"retry-after": "0"}),
        TWO_CALLS,
        Reply(text=["Both ", "are 12C."], usage=(70, 5), id="resp_final"),
    )
    rt = loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())
    agent = loom.Agent(model=model(server), tools=[weather], system="Be brief.", name="responses-server")
    run = agent.start("Weather in Oslo and Bergen?", runtime=rt)
    result = await run
    assert result.output == "Both are 12C."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (110, 17)
    failed = [e for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].data["error"]["attrs"]["status_code"] == 429
    last = server.requests[-1].body
    check_params(last)
    assert [i["type"] for i in last["input"]][-4:] == [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert [i.get("output") for i in last["input"][-2:]] == ["Oslo: 12C", "Bergen: 12C"]
    rt.close()
