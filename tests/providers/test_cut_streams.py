"""A stream that ends before its terminal event is a cut stream, retried like a reset connection.

A clean early end of the body (the server or a proxy closes a close-delimited response before
``message_stop`` / ``data: [DONE]``) raises ``ProviderStreamCut``: a ``ProviderProtocolError`` that
is retryable, so the agent's retry ring asks again, journaling every attempt. A reset connection
stays a ``ProviderTimeout``; malformed JSON stays a non-retryable ``ProviderProtocolError``.
"""

from __future__ import annotations

import pickle
import re

import pytest

import loom_nb as loom
from loom_nb.errors import ProviderProtocolError, ProviderStreamCut
from loom_nb.journal import EventKind
from loom_nb.kernel.errors_codec import error_from_data, error_to_data
from loom_nb.messages import Message, ModelRequest
from loom_nb.providers.http import HTTPProvider
from loom_nb.testing import FakeClock, SequentialIds
from tests.journal.support import attempts_of
from tests.providers.provider_server import Cut, Malformed, ProviderServer, Reply, anthropic_events, openai_events

KEY = "sk-test-CUT-5e6f7a8b9c0d"
ASK = ModelRequest(messages=(Message.user("hi"),))
WIRES = ["openai", "anthropic"]
TERMINAL = {"openai": "data: [DONE]", "anthropic": "message_stop"}


def make(wire: str, url: str) -> HTTPProvider:
    if wire == "openai":
        return loom.OpenAIChat("gpt-test", base_url=url + "/v1", api_key=KEY)
    return loom.AnthropicMessages("claude-test", base_url=url, api_key=KEY)


def n_events(wire: str, reply: Reply) -> int:
    """How many events the server sends for ``reply`` (both wires end with their terminal event)."""
    events = openai_events(reply, include_usage=True) if wire == "openai" else anthropic_events(reply)
    return len(events)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_clean_end_before_the_terminal_event_is_a_retryable_cut(wire: str, server: ProviderServer) -> None:
    server.push(Cut(Reply(text=["alpha ", "beta"]), after=3))
    with pytest.raises(ProviderStreamCut) as info:
        await make(wire, server.url).complete(ASK)
    err = info.value
    assert isinstance(err, ProviderProtocolError) and err.retryable
    message = str(err)
    assert f"ended before {TERMINAL[wire]} (after " in message
    assert message.endswith("the server closed it mid-answer; the call can be retried (the agent's retry ring does so)")
    assert KEY not in message


@pytest.mark.parametrize("wire", WIRES)
async def test_a_cut_just_before_the_terminal_event_is_still_a_cut(wire: str, server: ProviderServer) -> None:
    """Everything but the terminal event arrived (the stop reason and usage too): still incomplete."""
    reply = Reply(text=["all ", "of it"])
    server.push(Cut(reply, after=n_events(wire, reply) - 1))
    with pytest.raises(ProviderStreamCut, match="ended before " + re.escape(TERMINAL[wire])):
        await make(wire, server.url).complete(ASK)


@pytest.mark.parametrize("wire", WIRES)
async def test_malformed_json_is_not_retried(wire: str, server: ProviderServer) -> None:
    server.push(Malformed(Reply(text=["one ", "two"]), at=2))
    with pytest.raises(ProviderProtocolError) as info:
        await make(wire, server.url).complete(ASK)
    assert type(info.value) is ProviderProtocolError and not info.value.retryable


def test_a_cut_round_trips_through_pickle_and_the_journal_codec() -> None:
    err = ProviderStreamCut("the stream from http://x/v1/messages ended before message_stop")
    for again in (pickle.loads(pickle.dumps(err)), error_from_data(error_to_data(err))):
        assert type(again) is ProviderStreamCut and again.retryable and str(again) == str(err)


@pytest.mark.parametrize("wire", WIRES)
async def test_the_agent_retries_a_cut_stream_and_journals_every_attempt(wire: str, server: ProviderServer) -> None:
    server.push(
        Cut(Reply(text=["It is ", "cut ", "here"]), after=4),
        Reply(text=["It is ", "12C ", "in Oslo."], usage=(40, 7)),
    )
    clock = FakeClock(tick=0.01)
    rt = loom.Runtime.open(":memory:", clock=clock, ids=SequentialIds())
    agent = loom.Agent(model=make(wire, server.url), name=f"cut-{wire}")
    run = agent.start("Weather in Oslo?", runtime=rt)
    result = await run
    assert result.output == "It is 12C in Oslo."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (40, 7)

    steps = [e for e in rt.journal.read(run.id) if e.step_id == "#turn:0"]
    assert [(e.kind, a) for e, a in zip(steps, attempts_of(steps), strict=True)] == [
        (EventKind.STEP_STARTED, 1),
        (EventKind.STEP_FAILED, 1),
        (EventKind.STEP_STARTED, 2),
        (EventKind.STEP_COMPLETED, 2),
    ]
    failed = steps[1].data
    assert failed["will_retry"] is True and failed["delay"] > 0
    assert failed["error"]["type"] == "loom_nb.errors:ProviderStreamCut"
    assert f"ended before {TERMINAL[wire]}" in failed["error"]["message"]
    assert steps[3].data["output"]["message"]["text"] == "It is 12C in Oslo."
    assert clock.slept == [failed["delay"]]  # the ring's backoff, on the runtime's clock
    # Both attempts were sent, with the same idempotency key; the key never reached the journal.
    assert len(server.requests) == 2
    keys = {r.headers["idempotency-key"] for r in server.requests}
    assert keys == {f"{run.id}:#turn:0"}
    assert KEY not in repr(rt.journal.read(run.id))
    rt.close()


@pytest.mark.parametrize("wire", WIRES)
async def test_cuts_on_every_attempt_exhaust_the_retries(wire: str, server: ProviderServer) -> None:
    server.push(*(Cut(Reply(text=["a", "b"]), after=2) for _ in range(3)))
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    run = loom.Agent(model=make(wire, server.url), name=f"cuts-{wire}").start("hi", runtime=rt)
    with pytest.raises(loom.RetriesExhaustedError, match="failed 3 attempts; the last: ProviderStreamCut: "):
        await run
    failed = [e.data for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_FAILED]
    assert [(f["attempt"], f["will_retry"]) for f in failed] == [(1, True), (2, True), (3, False)]
    assert len(server.requests) == 3 and run.status == "failed"
    rt.close()
