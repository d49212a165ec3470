"""The official ``openai`` SDK as the oracle for the chat-completions wire (a dev dependency only).

Requests: every body loom sends, over a representative set of transcripts and options, fits the
SDK's ``CompletionCreateParams`` TypedDicts with no unknown key at any depth (``typed_dict_check``),
and the checker is shown to catch an unknown nested key. Responses: the same byte streams, built
from the SDK's own chunk models, go through loom and through the SDK's accumulator
(``ChatCompletionStreamState``); the text, refusal, tool calls, finish reason, usage and id must
agree, except where loom differs on purpose (listed in ``docs/providers.md``, and applied here by
``expected_finish``). Hypothesis draws the streams.
"""

from __future__ import annotations

import ast
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk, completion_create_params
from openai.types.chat.chat_completion_chunk import (
    Choice,
    ChoiceDelta,
    ChoiceDeltaFunctionCall,
    ChoiceDeltaToolCall,
    ChoiceDeltaToolCallFunction,
)

import loom_nb
from loom_nb.agent.output import strict_schema
from loom_nb.messages import Message, ModelRequest, ModelResponse, OutputFormat, ToolCall, ToolSpec
from loom_nb.providers.openai import OpenAIChat
from tests.providers.typed_dict_check import violations

KEY = "sk-test-oracle-0123456789abcdef"
#: A schema with nesting, an enum and a default: the strict check must not look inside ``parameters``.
FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1, "default": 1},
        "units": {"enum": ["metric", "imperial"]},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "additionalProperties": False},
    },
    "required": ["city"],
}
WEATHER = ToolSpec(name="weather", description="The forecast for a city.", parameters=FORECAST_SCHEMA)
GOOD = ToolCall(id="call_a", name="weather", arguments={"city": "Paris"})
BAD = ToolCall(id="call_b", name="weather", raw_arguments='{"city": "Os')
OK_BODY = {"id": "chatcmpl-x", "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]}
OK_STREAM = b'data: {"id": "chatcmpl-x", "choices": [{"index": 0, "delta": {"content": "ok"}}]}\n\ndata: [DONE]\n\n'

# -- requests ----------------------------------------------------------------------------------------

TRANSCRIPTS: dict[str, ModelRequest] = {
    "system and user": ModelRequest(messages=(Message.system("Be brief."), Message.user("Hi"))),
    "tool round trip": ModelRequest(
        messages=(  # one exchange a line
            *[Message.system("Be brief."), Message.user("Hello"), Message.assistant("Hi! What can I do?")],
            *[Message.user("Weather in Paris and Oslo?"), Message.system("Use metric units.")],
            *[Message.assistant("Checking both.", [GOOD, BAD]), Message.tool(GOOD, "Paris:\n18 C, dry")],
            *[Message.tool(BAD, "the arguments did not parse", is_error=True), Message.user("And tomorrow?")],
        ),
        tools=(WEATHER, ToolSpec(name="now")),
    ),
    "request cap and temperature": ModelRequest(messages=(Message.user("Hi"),), max_tokens=100, temperature=0.2),
    "calls without text": ModelRequest(
        messages=(Message.user("Weather?"), Message.assistant("", [GOOD]), Message.tool(GOOD, "18 C")),
        tools=(WEATHER,),
    ),
    "refusal in history": ModelRequest(
        messages=(
            Message.user("Do the bad thing."),
            Message.assistant(refusal="I can't help with that."),
            Message.user("Then the weather, please."),
        ),
        model="gpt-other",
    ),
    "unicode and empty text": ModelRequest(messages=(Message.user("Grüße, 東京? 🌧"), Message.assistant(""))),
    "typed answer (native structured output)": ModelRequest(
        messages=(Message.user("Forecast for Paris?"),),
        output=OutputFormat(name="Forecast", json_schema=strict_schema(FORECAST_SCHEMA)),
    ),
}
OPTIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "max tokens": {"max_tokens": 256},
    "legacy max_tokens field": {"max_tokens": 256, "max_tokens_field": "max_tokens"},
}


async def sent_body(request: ModelRequest, *, stream: bool, **options: Any) -> dict[str, Any]:
    bodies: list[dict[str, Any]] = []

    def handler(r: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(r.content))
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=OK_STREAM)
        return httpx.Response(200, json=OK_BODY)

    model = OpenAIChat("gpt-test", api_key=KEY, transport=httpx.MockTransport(handler), stream=stream, **options)
    await model.complete(request)
    return bodies[0]


def params_type(body: dict[str, Any]) -> Any:
    if body.get("stream"):
        return completion_create_params.CompletionCreateParamsStreaming
    return completion_create_params.CompletionCreateParamsNonStreaming


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "body"])
@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
@pytest.mark.parametrize("request_", TRANSCRIPTS.values(), ids=TRANSCRIPTS.keys())
async def test_every_request_body_fits_the_sdks_params_strictly(
    request_: ModelRequest, options: dict[str, Any], stream: bool
) -> None:
    body = await sent_body(request_, stream=stream, **options)
    assert violations(body, params_type(body)) == []
    if stream:
        assert body["stream_options"] == {"include_usage": True}


async def test_the_strict_check_rejects_unknown_keys_at_any_depth_and_wrong_types() -> None:
    body = await sent_body(TRANSCRIPTS["tool round trip"], stream=True)
    params = params_type(body)
    assert violations(body, params) == []

    def broken(change: Any) -> list[str]:
        copy = json.loads(json.dumps(body))
        change(copy)
        return violations(copy, params)

    def nested_key(b: dict[str, Any]) -> None:
        b["messages"][5]["tool_calls"][0]["function"]["is_error"] = True

    found = broken(nested_key)
    assert any(v.startswith("$.messages[5].tool_calls[0].function: unknown key 'is_error' for Function") for v in found)
    assert any(
        "unknown key 'strictness'" in v for v in broken(lambda b: b["tools"][0]["function"].update(strictness=1))
    )
    assert any("unknown key 'usage'" in v for v in broken(lambda b: b["stream_options"].update(usage=True)))
    assert any(
        v.startswith("$: unknown key 'max_output_tokens' for CompletionCreateParamsStreaming")
        for v in broken(lambda b: b.update(max_output_tokens=5))
    )
    assert any(
        "missing required key 'tool_call_id'" in v for v in broken(lambda b: b["messages"][6].pop("tool_call_id"))
    )
    assert any("7 is not a str" in v for v in broken(lambda b: b["messages"][6].update(content=7)))
    with pytest.raises(TypeError, match="does not know the annotation"):
        violations(1, complex)


async def test_a_typed_answer_is_asked_for_as_a_strict_json_schema_response_format() -> None:
    body = await sent_body(TRANSCRIPTS["typed answer (native structured output)"], stream=False)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Forecast", "schema": strict_schema(FORECAST_SCHEMA), "strict": True},
    }
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and schema["required"] == ["city", "days", "units", "where"]


def test_loom_nb_never_imports_the_sdks() -> None:
    """The SDKs are dev dependencies (test oracles): no module of the package may import them."""
    package = Path(loom_nb.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.relative_to(package)}: {n}" for n in names if n.split(".")[0] in ("openai", "anthropic")]
    assert found == []


# -- responses ---------------------------------------------------------------------------------------


@dataclass
class Stream:
    """A drawn stream: the SDK chunks and what went into them."""

    chunks: list[ChatCompletionChunk] = field(default_factory=list)
    #: Name or id fragments that repeat the whole value so far (loom reads them as a resend).
    resends: bool = False


def _chunk(delta: ChoiceDelta | None = None, finish: Any = None, usage: CompletionUsage | None = None) -> Any:
    choices = (
        []
        if delta is None and finish is None
        else [Choice(index=0, delta=delta or ChoiceDelta(), finish_reason=finish)]
    )
    return ChatCompletionChunk(
        id="chatcmpl-oracle", created=1, model="gpt-test", object="chat.completion.chunk", choices=choices, usage=usage
    )


@st.composite
def pieces(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at random places (no empty piece)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6))) if len(text) > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True)
JSON_SCALARS = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8)
ARGUMENTS = st.dictionaries(st.text(min_size=1, max_size=6), JSON_SCALARS, max_size=3).map(json.dumps)
# Sometimes cut short: loom keeps such text as raw_arguments, the SDK as the arguments string.
ARGUMENTS_OR_BROKEN = ARGUMENTS | ARGUMENTS.filter(lambda a: len(a) > 2).map(lambda a: a[:-1])


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """Text split at random, then 0-3 parallel tool calls (names split across fragments, arguments one
    character per chunk), or a refusal, or a legacy ``function_call``; a finish chunk; a usage chunk."""
    out = Stream(chunks=[_chunk(ChoiceDelta(role="assistant", content=""))])
    kind = draw(st.sampled_from(["text", "tools", "refusal", "legacy"]))
    if kind == "refusal":
        for piece in draw(pieces(draw(st.text(min_size=1, max_size=40)))):
            out.chunks.append(_chunk(ChoiceDelta(refusal=piece)))
    else:
        for piece in draw(pieces(draw(st.text(max_size=40)))):
            out.chunks.append(_chunk(ChoiceDelta(content=piece)))
    if kind == "tools":
        for index in range(draw(st.integers(1, 3))):
            name_parts = draw(pieces(draw(NAMES)))
            out.resends |= any(part == "".join(name_parts[:i]) for i, part in enumerate(name_parts) if i)
            call_id = f"call_{index}_{draw(st.from_regex(r'[A-Za-z0-9]{4,10}', fullmatch=True))}"
            first = ChoiceDeltaToolCallFunction(name=name_parts[0], arguments="")
            out.chunks.append(
                _chunk(
                    ChoiceDelta(
                        tool_calls=[ChoiceDeltaToolCall(index=index, id=call_id, type="function", function=first)]
                    )
                )
            )
            for part in name_parts[1:]:
                fn = ChoiceDeltaToolCallFunction(name=part)
                out.chunks.append(_chunk(ChoiceDelta(tool_calls=[ChoiceDeltaToolCall(index=index, function=fn)])))
            for char in draw(ARGUMENTS_OR_BROKEN):
                fn = ChoiceDeltaToolCallFunction(arguments=char)
                out.chunks.append(_chunk(ChoiceDelta(tool_calls=[ChoiceDeltaToolCall(index=index, function=fn)])))
    if kind == "legacy":
        name_parts = draw(pieces(draw(NAMES)))
        out.resends |= any(part == "".join(name_parts[:i]) for i, part in enumerate(name_parts) if i)
        out.chunks.append(_chunk(ChoiceDelta(function_call=ChoiceDeltaFunctionCall(name=name_parts[0], arguments=""))))
        out.chunks += [_chunk(ChoiceDelta(function_call=ChoiceDeltaFunctionCall(name=p))) for p in name_parts[1:]]
        out.chunks += [
            _chunk(ChoiceDelta(function_call=ChoiceDeltaFunctionCall(arguments=c))) for c in draw(ARGUMENTS_OR_BROKEN)
        ]
    finish = {"tools": "tool_calls", "legacy": "function_call"}.get(kind, "stop")
    out.chunks.append(_chunk(ChoiceDelta(), finish))
    if draw(st.booleans()):
        prompt, completion = draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6))
        usage = CompletionUsage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)
        out.chunks.append(_chunk(usage=usage))
    return out


def wire_lines(stream: Stream) -> list[str]:
    """The chunks as the API sends them: only the fields each chunk sets (``exclude_unset``)."""
    return [c.model_dump_json(exclude_unset=True) for c in stream.chunks]


def sdk_final(lines: list[str]) -> ChatCompletion:
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for line in lines:
        state.handle_chunk(ChatCompletionChunk.model_validate_json(line))
    return state.get_final_completion()


async def loom_response(content: bytes, *, stream: bool) -> tuple[ModelResponse, list[str]]:
    ctype = "text/event-stream" if stream else "application/json"
    transport = httpx.MockTransport(lambda _r: httpx.Response(200, headers={"content-type": ctype}, content=content))
    deltas: list[str] = []
    model = OpenAIChat("gpt-test", api_key=KEY, transport=transport, stream=stream)
    return await model.complete(ModelRequest(messages=(Message.user("hi"),)), on_delta=deltas.append), deltas


def expected_finish(sdk_reason: str | None, refusal: str | None) -> str | None:
    """Loom's finish reason for the SDK's: a refusal is ``refusal``; ``function_call`` is ``tool_calls``."""
    if refusal:
        return "refusal"
    return {"function_call": "tool_calls"}.get(sdk_reason or "", sdk_reason)


def assert_agrees(resp: ModelResponse, final: ChatCompletion) -> None:
    choice = final.choices[0]
    message = choice.message
    assert resp.message.text == (message.content or "")
    assert resp.message.refusal == (message.refusal or None)
    sdk_calls = [
        (c.id, c.function.name, c.function.arguments) for c in message.tool_calls or () if c.type == "function"
    ]
    if message.function_call is not None:  # legacy: loom reads it as tool call 0
        sdk_calls = [("call_0", message.function_call.name, message.function_call.arguments)]
    assert [(c.id, c.name) for c in resp.message.tool_calls] == [(i, n) for i, n, _ in sdk_calls]
    for call, (_id, _name, arguments) in zip(resp.message.tool_calls, sdk_calls, strict=True):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            assert (call.arguments, call.raw_arguments) == (parsed, None)
        else:
            assert (call.arguments, call.raw_arguments) == ({}, arguments)
    assert resp.finish_reason == expected_finish(choice.finish_reason, message.refusal)
    usage = final.usage
    expected_usage = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == expected_usage
    assert resp.response_id == final.id


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams())
@pytest.mark.slow
async def test_loom_and_the_sdk_accumulator_agree_on_the_same_stream(stream: Stream) -> None:
    assume(not stream.resends)  # a fragment repeating the whole name so far: loom differs on purpose
    lines = wire_lines(stream)
    final = sdk_final(lines)
    content = "".join(f"data: {line}\n\n" for line in lines).encode() + b"data: [DONE]\n\n"
    resp, deltas = await loom_response(content, stream=True)
    assert_agrees(resp, final)
    assert "".join(deltas) == resp.message.text  # deltas are answer text only, never the refusal
    # The SDK's assembled completion, read back as one body, gives loom the same response.
    whole, _ = await loom_response(final.model_dump_json().encode(), stream=False)
    assert whole == resp


async def test_a_resent_whole_name_is_where_loom_and_the_sdk_part() -> None:
    """The one stream shape where the SDK's accumulator and loom differ on purpose (see docs)."""
    first = ChoiceDeltaToolCall(
        index=0, id="call_1", type="function", function=ChoiceDeltaToolCallFunction(name="read_file", arguments="")
    )
    again = ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(name="read_file", arguments="{}"))
    stream = Stream(
        chunks=[
            _chunk(ChoiceDelta(tool_calls=[first])),
            _chunk(ChoiceDelta(tool_calls=[again])),
            _chunk(ChoiceDelta(), "tool_calls"),
        ]
    )
    lines = wire_lines(stream)
    final = sdk_final(lines)
    content = "".join(f"data: {line}\n\n" for line in lines).encode() + b"data: [DONE]\n\n"
    resp, _ = await loom_response(content, stream=True)
    calls = final.choices[0].message.tool_calls or []
    assert calls[0].type == "function" and calls[0].function.name == "read_fileread_file"
    assert resp.message.tool_calls == (ToolCall(id="call_1", name="read_file"),)
