"""The API key never reaches an exception, a response, a streamed delta or the journal file.

Every path a provider's text can take is tried with the key planted in the server's answer: an
in-stream error event, a 200 body that is an error, a 200 body of the wrong shape, a malformed stream
event (quoted in ``ProviderProtocolError``), a stream cut before its end, a non-2xx body, a transport
error, model text (split across deltas) and tool arguments. Then a Hypothesis test plants the key at
random places in random bodies and streams, and an agent run on a DuckDB file is checked byte by byte.
"""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom_nb as loom
from loom_nb.errors import ProviderError, ProviderHTTPError, ProviderProtocolError, ProviderTimeout
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.messages import Message, ModelRequest
from loom_nb.providers.anthropic import AnthropicMessages
from loom_nb.providers.http import HTTPProvider
from loom_nb.providers.openai import OpenAIChat
from loom_nb.providers.redaction import MASK, Redactor, credentials_in
from loom_nb.providers.responses import OpenAIResponses

KEY = "sk-live-PLANTED-9f8e7d6c5b4a39281706"
ASK = ModelRequest(messages=(Message.user("hi"),))
WIRES = ["openai", "anthropic"]


def provider(wire: str, handler: Callable[[httpx.Request], httpx.Response], **kw: Any) -> HTTPProvider:
    cls = OpenAIChat if wire == "openai" else AnthropicMessages
    return cls("m", api_key=KEY, transport=httpx.MockTransport(handler), **kw)


def answer(
    status: int, body: str | bytes, ctype: str = "application/json"
) -> Callable[[httpx.Request], httpx.Response]:
    content = body.encode() if isinstance(body, str) else body
    return lambda request: httpx.Response(status, headers={"content-type": ctype}, content=content)


def sse(events: list[dict[str, Any] | str]) -> str:
    """Server-sent events: dicts as JSON data (Anthropic events also get their ``event:`` line)."""
    out = []
    for e in events:
        if isinstance(e, str):
            out.append(f"data: {e}\n\n")
        elif "type" in e:
            out.append(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n")
        else:
            out.append(f"data: {json.dumps(e)}\n\n")
    return "".join(out)


def openai_text_stream(pieces: list[str], *, done: bool = True) -> str:
    events: list[dict[str, Any] | str] = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    events.append({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if done:
        events.append("[DONE]")
    return sse(events)


def anthropic_text_stream(pieces: list[str], *, done: bool = True) -> str:
    events: list[dict[str, Any] | str] = [
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 1, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in pieces]
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    ]
    if done:
        events.append({"type": "message_stop"})
    return sse(events)


def text_stream(wire: str, pieces: list[str], *, done: bool = True) -> str:
    return (openai_text_stream if wire == "openai" else anthropic_text_stream)(pieces, done=done)


def assert_no_key_in_error(exc: BaseException) -> None:
    """Nowhere a person or the journal could read it: str, repr, pickle, the journaled form."""
    assert KEY not in str(exc)
    assert KEY not in repr(exc)
    assert KEY.encode() not in pickle.dumps(exc)
    assert KEY not in json.dumps(error_to_data(exc))
    context = exc.__context__
    while context is not None:
        assert KEY not in str(context) and KEY not in repr(context)
        context = context.__context__


async def fails(model: HTTPProvider, expected: type[BaseException] = ProviderError) -> BaseException:
    deltas: list[str] = []
    with pytest.raises(expected) as info:
        await model.complete(ASK, on_delta=deltas.append)
    assert KEY not in "".join(deltas)
    assert_no_key_in_error(info.value)
    return info.value


# -- every failure path ---------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_an_in_stream_error_event_is_redacted(wire: str) -> None:
    if wire == "openai":
        body = sse([{"error": {"message": f"upstream rejected key {KEY}", "type": "invalid_request_error"}}])
    else:
        body = sse([{"type": "error", "error": {"type": "authentication_error", "message": f"bad key {KEY}"}}])
    err = await fails(provider(wire, answer(200, body, "text/event-stream")), ProviderHTTPError)
    assert MASK in str(err) and MASK in err.body  # type: ignore[attr-defined]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_200_body_that_is_an_error_is_redacted(wire: str) -> None:
    if wire == "openai":
        doc: dict[str, Any] = {"error": {"message": f"upstream rejected key {KEY}", "code": "invalid_api_key"}}
    else:
        doc = {"type": "error", "error": {"type": "authentication_error", "message": f"bad key {KEY}"}}
    err = await fails(provider(wire, answer(200, json.dumps(doc)), stream=False), ProviderHTTPError)
    assert MASK in str(err)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_200_body_of_the_wrong_shape_is_redacted(wire: str) -> None:
    doc = {"choices": f"not a list {KEY}"} if wire == "openai" else {"content": f"not a list {KEY}"}
    err = await fails(provider(wire, answer(200, json.dumps(doc)), stream=False), ProviderProtocolError)
    assert MASK in str(err)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_body_that_is_not_json_is_redacted(wire: str) -> None:
    err = await fails(provider(wire, answer(200, f"<html>{KEY}</html>", "text/html"), stream=False))
    assert MASK in str(err)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_malformed_stream_event_quoted_in_the_error_is_redacted(wire: str) -> None:
    body = sse([f'{{"broken": "{KEY}"'])
    err = await fails(provider(wire, answer(200, body, "text/event-stream")), ProviderProtocolError)
    assert MASK in str(err)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_cut_stream_quoting_its_last_event_is_redacted(wire: str) -> None:
    body = text_stream(wire, ["hello ", f"the key is {KEY}"], done=False)
    await fails(provider(wire, answer(200, body, "text/event-stream")))


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", [401, 500])
async def test_a_non_2xx_body_is_redacted(wire: str, status: int) -> None:
    err = await fails(provider(wire, answer(status, f"proxy says: key {KEY} refused")), ProviderHTTPError)
    assert MASK in err.body  # type: ignore[attr-defined]


@pytest.mark.parametrize("wire", WIRES)
async def test_a_transport_error_naming_the_key_is_redacted(wire: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"proxy refused {request.headers.get('authorization') or KEY}")

    err = await fails(provider(wire, handler), ProviderTimeout)
    assert MASK in str(err)


async def test_a_bearer_header_value_and_extra_credential_headers_are_secrets_too() -> None:
    extra = "proxy-credential-0123456789"
    found = credentials_in({"Authorization": f"Bearer {KEY}", "X-Api-Key": extra, "accept": "text/plain"})
    assert found == [f"Bearer {KEY}", KEY, extra]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, content=f"header was {extra}".encode())

    model = OpenAIChat("m", api_key=KEY, transport=httpx.MockTransport(handler), extra_headers={"x-api-key": extra})
    with pytest.raises(ProviderHTTPError) as info:
        await model.complete(ASK)
    assert extra not in str(info.value) and MASK in str(info.value)


def test_credential_headers_are_found_by_pattern_plus_the_configured_names() -> None:
    headers = {
        "x-goog-api-key": "goog-0123456789",
        "X-Auth-Token": "auth-token-0123456789",
        "Cookie": "sid=cookie-0123456789",
        "client-secret": "secret-0123456789",
        "X-Apikey": "apikey-0123456789",
        "X-Tenant": "tenant-0123456789",
        "Accept": "application/json",
    }
    assert credentials_in(headers) == [v for k, v in headers.items() if k not in ("X-Tenant", "Accept")]
    assert "tenant-0123456789" in credentials_in(headers, ["x-tenant"])


@pytest.mark.parametrize("wire", WIRES)
async def test_an_echoed_x_goog_api_key_and_a_configured_secret_header_are_redacted(wire: str) -> None:
    goog, tenant = "AIza-GOOG-KEY-1122334455667788", "tenant-credential-99887766"

    def echo(request: httpx.Request) -> httpx.Response:
        said = f"you sent {request.headers['x-goog-api-key']} and {request.headers['x-tenant']}"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=text_stream(wire, [said]))

    headers = {"x-goog-api-key": goog, "x-tenant": tenant}
    model = provider(wire, echo, extra_headers=headers, secret_headers=["X-Tenant"])
    response = await model.complete(ASK)
    assert response.message.text == f"you sent {MASK} and {MASK}"


@pytest.mark.parametrize("cls", [OpenAIChat, AnthropicMessages, OpenAIResponses])
def test_a_providers_repr_shows_no_password_query_value_or_key(cls: type[HTTPProvider]) -> None:
    base = "https://ana:pw-SECRET-4455@llm.internal:8443/v1?key=sk-query-SECRET-0011&api-version=2024"
    model = cls("m", base_url=base, api_key=KEY)
    shown = repr(model) + str(model)
    assert "https://llm.internal:8443/v1?key=…&api-version=…" in shown
    for secret in ("pw-SECRET", "ana", "sk-query-SECRET", KEY, "2024"):
        assert secret not in shown


# -- what the model says ----------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_model_text_with_the_key_split_across_deltas_is_redacted(wire: str) -> None:
    half = len(KEY) // 2
    pieces = ["The key is ", KEY[:3], KEY[3:half], KEY[half:] + " and", " more text."]
    model = provider(wire, answer(200, text_stream(wire, pieces), "text/event-stream"))
    deltas: list[str] = []
    response = await model.complete(ASK, on_delta=deltas.append)
    assert response.message.text == f"The key is {MASK} and more text."
    assert "".join(deltas) == response.message.text


async def test_tool_arguments_and_ids_with_the_key_are_redacted() -> None:
    doc = {
        "id": f"resp-{KEY}",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "login", "arguments": json.dumps({"token": KEY})},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
    response = await provider("openai", answer(200, json.dumps(doc)), stream=False).complete(ASK)
    assert KEY not in response.model_dump_json()
    assert response.message.tool_calls[0].arguments == {"token": MASK}


def test_text_without_the_key_passes_unchanged_and_a_held_prefix_is_released() -> None:
    redactor = Redactor([KEY, "", "short"])
    assert redactor.secrets == (KEY,)
    out: list[str] = []
    stream = redactor.stream(out.append)
    stream("answer: sk-")  # could be the key's beginning: held back
    assert "".join(out) == "answer: "
    stream("lite is a word")  # it was not
    stream.flush()
    assert "".join(out) == "answer: sk-lite is a word"


# -- random bodies and streams ----------------------------------------------------------------------

_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=40)


@st.composite
def planted(draw: st.DrawFn) -> str:
    """Random text with the key at a random place (sometimes twice)."""
    before, after = draw(_text), draw(_text)
    return before + KEY + after + (KEY if draw(st.booleans()) else "")


@st.composite
def split(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if text[a:b]]


@st.composite
def hostile_answer(draw: st.DrawFn, wire: str) -> tuple[int, str, str]:
    """(status, content-type, body): a stream (complete, cut, with an error, malformed) or a body."""
    text = draw(planted())
    shape = draw(st.sampled_from(["stream", "cut", "stream-error", "malformed", "json", "raw", "http-error"]))
    if shape in ("stream", "cut"):
        return 200, "text/event-stream", text_stream(wire, draw(split(text)), done=shape == "stream")
    if shape == "stream-error":
        error = {"message": text, "type": "api_error"}
        event = {"error": error} if wire == "openai" else {"type": "error", "error": error}
        return 200, "text/event-stream", text_stream(wire, draw(split(text)), done=False) + sse([event])
    if shape == "malformed":
        return 200, "text/event-stream", sse([json.dumps({"x": text})[: draw(st.integers(1, len(text)))] + text])
    if shape == "json":
        return (
            200,
            "application/json",
            json.dumps({"error": {"message": text}} if draw(st.booleans()) else {"id": text}),
        )
    if shape == "raw":
        return 200, "text/plain", text
    return draw(st.sampled_from([400, 401, 429, 500, 503])), "application/json", json.dumps({"error": text})


@pytest.mark.parametrize("wire", WIRES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
async def test_the_key_planted_anywhere_never_comes_out(wire: str, data: st.DataObject) -> None:
    status, ctype, body = data.draw(hostile_answer(wire))
    model = provider(wire, answer(status, body, ctype), stream=ctype == "text/event-stream")
    deltas: list[str] = []
    try:
        response = await model.complete(ASK, on_delta=deltas.append)
    except ProviderError as exc:
        assert_no_key_in_error(exc)
    else:
        assert KEY not in response.model_dump_json()
    assert KEY not in "".join(deltas)


# -- the journal file ---------------------------------------------------------------------------------


def _openai_turns(marker: str) -> Callable[[httpx.Request], httpx.Response]:
    """Turn 1: text with the key (and a marker) split across deltas, and a tool call whose arguments
    hold the key; turn 2: an in-stream error quoting the key (401: the run fails)."""
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        headers = {"content-type": "text/event-stream"}
        if calls["n"] == 1:
            text = f"{marker} the key is {KEY} ok. "
            chunks: list[dict[str, Any] | str] = [
                {"id": "c1", "choices": [{"index": 0, "delta": {"content": text[i : i + 5]}}]}
                for i in range(0, len(text), 5)
            ]
            args = json.dumps({"note": f"{marker} {KEY}"})
            chunks.append(
                {
                    "id": "c1",
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {"index": 0, "id": "call_1", "function": {"name": "remember", "arguments": args}}
                                ]
                            },
                            "finish_reason": "tool_calls",
                        }
                    ],
                }
            )
            chunks.append("[DONE]")
            return httpx.Response(200, headers=headers, content=sse(chunks).encode())
        error = {"error": {"message": f"{marker} upstream rejected key {KEY}", "type": "invalid_request_error"}}
        return httpx.Response(200, headers=headers, content=sse([error]).encode())

    return handler


async def test_an_agent_run_leaves_no_key_in_the_journal_file(tmp_path: Path) -> None:
    marker = "VISIBLE-MARKER-7c1d"

    @loom.tool(idempotent=True)
    def remember(note: str) -> str:
        """Remember a note.

        Args:
            note: The note.
        """
        return f"remembered {note}"

    model = OpenAIChat("m", api_key=KEY, transport=httpx.MockTransport(_openai_turns(marker)))
    agent = loom.Agent(model=model, tools=[remember], name="redaction", chunk_min_chars=1)
    path = tmp_path / "journal.duckdb"
    runtime = loom.Runtime.open(path)
    try:
        run = agent.start("go", runtime=runtime, view=False)
        with pytest.raises(loom.LoomError) as info:  # retried, then RetriesExhaustedError
            await run
        assert_no_key_in_error(info.value)
        # What the journal holds, read back through SQL: the marker is there, the key is not.
        con = runtime.journal.connection  # type: ignore[attr-defined]
        text = "\n".join(
            str(row)
            for table in ("events", "executions", "content")
            for row in con.execute(f"SELECT * FROM {table}").fetchall()
        )
        assert marker in text and MASK in text
        assert KEY not in text
        live_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    finally:
        runtime.close()
    closed_bytes = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for raw in (live_bytes, closed_bytes):
        assert KEY.encode() not in raw
    # The byte check can see what is written: the marker planted beside the key is in the files.
    assert marker.encode() in live_bytes + closed_bytes
