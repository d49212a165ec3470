"""MCP tools against a hostile server (``mcp_hostile_server.py``, the SDK's low-level ``Server``) over
stdio and streamable HTTP on 127.0.0.1: credentials in the server's command line or URL, headers and
auth, JSON-RPC errors, edited arguments, huge and malformed results, and tool names no provider takes."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.effects.mcp import DEFAULT_MAX_RESULT_BYTES, DEFAULT_READ_TIMEOUT
from loom_nb.journal.events import EventKind
from tests.effects.support import calls, free_port, mcp_runtime, scripted_agent, serve_script_over_http, tool_texts
from tests.tracing.support import Recorder

pytestmark = pytest.mark.slow

SERVER = Path(__file__).with_name("mcp_hostile_server.py")
#: Secrets a command line or a URL may carry: none may reach the journal, a span or the model.
TOKEN = "sk-live-CMDLINE-7c6b5a4938271605"
PASSWORD = "pw-SECRET-d4e5f6a7"
URL_TOKEN = "tok-URL-QUERY-0a1b2c3d4e5f"
HEADER_TOKEN = "bearer-HEADER-99887766554433"
GOOG_KEY = "AIza-GOOG-KEY-1122334455667788"
#: How a label names the test server's program (its arguments are only counted).
PROGRAM = Path(sys.executable).name


def stdio(state: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), str(state), *extra])


def server_calls(state: Path) -> list[dict[str, Any]]:
    path = state / "calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def by_name(tools: list[loom.Tool]) -> dict[str, loom.Tool]:
    return {t.name: t for t in tools}


def everything_derived(rt: loom.Runtime, run: loom.Run, model: loom.ScriptedModel, recorder: Recorder) -> str:
    """The journal's events, every span (name, attributes, status, events) and every model input."""
    parts = [repr([(e.kind, e.step_id, e.data) for e in rt.journal.read(run.id)])]
    for span in recorder.spans():
        parts.append(repr((span.name, dict(span.attributes or {}), span.status.description)))
        parts += [repr((e.name, dict(e.attributes or {}))) for e in span.events]
    parts += [m.text for request in model.history for m in request.messages]
    return "\n".join(parts)


def serve_http(state: Path, *extra: str) -> Iterator[int]:
    yield from serve_script_over_http(SERVER, str(state), *extra, what="the hostile HTTP test server")


@pytest.fixture
def http_port(tmp_path: Path) -> Iterator[int]:
    yield from serve_http(tmp_path)


@pytest.fixture
def guarded_port(tmp_path: Path) -> Iterator[int]:
    """The server answering 401 to a request without ``Authorization: Bearer HEADER_TOKEN``."""
    yield from serve_http(tmp_path, "--require", "Authorization", f"Bearer {HEADER_TOKEN}")


# -- item 3: credentials in labels, headers and auth ------------------------------------------------


def test_a_command_lines_credentials_reach_no_journal_span_or_model_input(tmp_path: Path) -> None:
    tools = loom.mcp_tools(
        stdio(tmp_path, f"--token={TOKEN}", f"postgresql://app:{PASSWORD}@db.internal/x"),
        include=["server_error", "malformed"],
    )
    server = by_name(tools)["server_error"].server  # type: ignore[attr-defined]
    assert server.label == f"{PROGRAM} (+4 args)"
    assert TOKEN not in repr(server) and PASSWORD not in repr(server)
    rt = mcp_runtime()
    recorder = Recorder()
    loom.tracing.export(rt, recorder.provider)
    bot, model = scripted_agent(tools, calls(("server_error", {}), ("malformed", {})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    texts = tool_texts(model)
    assert f"the MCP server {PROGRAM} (+4 args)" in texts[0]  # the server is named, its arguments are not
    derived = everything_derived(rt, run, model, recorder)
    assert "execute_tool server_error" in derived  # the spans are there
    for secret in (TOKEN, PASSWORD, "--token"):
        assert secret not in derived
    rt.close()
    recorder.shutdown()


def test_a_urls_userinfo_and_query_reach_no_journal_span_or_model_input(http_port: int) -> None:
    url = f"http://app:{PASSWORD}@127.0.0.1:{http_port}/mcp?token={URL_TOKEN}&team=red"
    tools = loom.mcp_tools(url, include=["server_error"])
    server = tools[0].server  # type: ignore[attr-defined]
    assert server.label == f"http://127.0.0.1:{http_port}/mcp?token=…&team=…"
    rt = mcp_runtime()
    recorder = Recorder()
    loom.tracing.export(rt, recorder.provider)
    bot, model = scripted_agent(tools, calls(("server_error", {})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    derived = everything_derived(rt, run, model, recorder)
    assert f"the MCP server http://127.0.0.1:{http_port}/mcp?token=…" in derived
    for secret in (PASSWORD, URL_TOKEN, "app:"):
        assert secret not in derived
    rt.close()
    recorder.shutdown()


def test_a_server_that_cannot_be_listed_is_named_without_its_credentials() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(loom.McpError) as info:
        loom.mcp_tools(f"http://app:{PASSWORD}@127.0.0.1:{port}/mcp?token={URL_TOKEN}", read_timeout=5)
    assert f"http://127.0.0.1:{port}/mcp?token=…" in str(info.value)
    assert PASSWORD not in str(info.value) and URL_TOKEN not in str(info.value)


def test_headers_reach_the_server_and_an_echoed_credential_header_is_redacted(
    guarded_port: int, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{guarded_port}/mcp"
    with pytest.raises(loom.McpError, match=r"Server returned an error response. .*its credentials"):
        loom.mcp_tools(url)  # the server refuses a request without the header
    headers = {"Authorization": f"Bearer {HEADER_TOKEN}", "x-goog-api-key": GOOG_KEY}
    tools = loom.mcp_tools(url, headers=headers, include=["echo_header"])
    assert HEADER_TOKEN not in repr(tools[0]) + repr(tools[0].server)  # type: ignore[attr-defined]
    rt = mcp_runtime()
    bot, model = scripted_agent(
        tools, calls(("echo_header", {"name": "x-goog-api-key"}), ("echo_header", {"name": "Authorization"}))
    )
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    assert [c["name"] for c in server_calls(tmp_path)] == ["echo_header", "echo_header"]
    texts = tool_texts(model)
    assert "x-goog-api-key: <redacted>" in texts[0] and "authorization: <redacted>" in texts[1].lower()
    journal = repr([e.data for e in rt.journal.read(run.id)])
    assert GOOG_KEY not in journal and HEADER_TOKEN not in journal
    rt.close()


def test_auth_is_the_sdks_httpx_auth_hook(guarded_port: int, tmp_path: Path) -> None:
    class Bearer(httpx2.Auth):
        def __init__(self) -> None:
            self.used = 0

        def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
            self.used += 1
            request.headers["Authorization"] = f"Bearer {HEADER_TOKEN}"
            yield request

    auth = Bearer()
    tools = loom.mcp_tools(f"http://127.0.0.1:{guarded_port}/mcp", auth=auth, include=["move"])
    assert auth.used > 0
    assert tools[0].name == "move"
    with pytest.raises(loom.UsageError, match=r"headers= and auth= are for a streamable-HTTP server"):
        loom.mcp_tools(stdio(tmp_path), headers={"x": "y"})


# -- item 10: a JSON-RPC error is the server's answer --------------------------------------------


def test_a_json_rpc_server_error_is_a_tool_error_not_a_dead_server(tmp_path: Path) -> None:
    tools = loom.mcp_tools(
        stdio(tmp_path),
        include=["server_error", "charge", "closed_lookalike"],
        overrides={"charge": {"needs_approval": False}},
    )
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("server_error", {}), ("charge", {"amount": 5}), ("closed_lookalike", {})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"  # not parked in doubt: the server answered
    texts = tool_texts(model)
    assert "McpError" in texts[0] and "database is locked" in texts[0] and "-32000" in texts[0]
    assert "card declined" in texts[1] and "McpServerGone" not in " ".join(texts)
    assert "Connection closed" in texts[2]
    # Each call reached the server once: no retry, no restart.
    assert [c["name"] for c in server_calls(tmp_path)] == ["server_error", "charge", "closed_lookalike"]
    assert by_name(tools)["server_error"].server.sessions[rt.effects].starts == 1  # type: ignore[attr-defined]
    events = rt.journal.read(run.id)
    assert not [e for e in events if e.kind == EventKind.STEP_IN_DOUBT]
    assert not [e for e in events if e.kind == EventKind.STEP_FAILED and e.data.get("will_retry")]
    rt.close()


def test_an_http_server_killed_mid_call_is_a_lost_transport(http_port: int, tmp_path: Path) -> None:
    tools = loom.mcp_tools(f"http://127.0.0.1:{http_port}/mcp", include=["sleep"], overrides={"sleep": {"retry": None}})
    (pid,) = [int(p.name) for p in (tmp_path / "pids").iterdir()]

    def kill_once_called() -> None:
        deadline = time.monotonic() + 60
        while not server_calls(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_once_called)
    killer.start()
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("sleep", {"seconds": 30})))
    run = bot.start("go", runtime=rt)
    killer.join()
    assert run.status == "completed"
    failed = [e for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_FAILED]
    assert [e.data["error"]["type"] for e in failed] == ["loom_nb.errors:McpServerGone"]
    assert "died or closed the connection during a call of 'sleep'" in tool_texts(model)[0]
    rt.close()


# -- item 9: edited arguments are validated --------------------------------------------------------


@pytest.mark.parametrize("edited", [{"path": 42}, {"path": ""}, {}])
def test_edited_arguments_are_validated_against_the_input_schema_before_the_call(
    tmp_path: Path, edited: dict[str, Any]
) -> None:
    tools = loom.mcp_tools(stdio(tmp_path), include=["move"])
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("move", {"path": "a.txt"})))
    run = bot.start("go", runtime=rt)
    (gate,) = run.gates
    gate.resolve({"approved": True, "arguments": edited})  # a raw answer, past Gate.approve's check
    assert run.status == "completed"
    assert server_calls(tmp_path) == []  # never reached the server
    (text,) = tool_texts(model)
    assert "ToolArgumentsError: invalid arguments for tool 'move'" in text
    rt.close()


def test_the_note_that_a_person_edited_the_call_is_outside_the_untrusted_fence(tmp_path: Path) -> None:
    tools = loom.mcp_tools(stdio(tmp_path), include=["move"])
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("move", {"path": "a.txt"})))
    run = bot.start("go", runtime=rt)
    run.gates[0].approve(arguments={"path": "b.txt"})
    assert run.status == "completed"
    assert server_calls(tmp_path) == [{"name": "move", "arguments": {"path": "b.txt"}}]
    (text,) = tool_texts(model)
    note = 'Note: a person edited this call before approving it; it ran with the arguments {"path":"b.txt"}.\n'
    assert text == f"{note}<<<untrusted-content>>>\nmoved 'b.txt'\n<<<end-untrusted-content>>>"
    rt.close()


# -- item 12: result size and read timeout ---------------------------------------------------------


def test_a_result_above_max_result_bytes_is_cut_for_the_model_and_kept_whole_in_the_content_store(
    tmp_path: Path,
) -> None:
    assert DEFAULT_MAX_RESULT_BYTES == 1_000_000 and DEFAULT_READ_TIMEOUT == 60.0
    tools = loom.mcp_tools(stdio(tmp_path), include=["big"], max_result_bytes=20_000)
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("big", {"megabytes": 0.5})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    (text,) = tool_texts(model)
    assert len(text) < 21_000
    assert "[loom: the MCP tool 'big' answered 500,000 bytes, more than max_result_bytes=20,000" in text
    (ref,) = re.findall(r"sha256:[0-9a-f]{64}", text)
    assert rt.journal.get_content(ref) == b"y" * 500_000
    sizes = [len(json.dumps(e.data)) for e in rt.journal.read(run.id)]
    assert max(sizes) < 60_000  # no event holds the whole result
    rt.close()


def test_a_call_past_read_timeout_is_a_typed_error_naming_the_server_and_the_tool(tmp_path: Path) -> None:
    tools = loom.mcp_tools(
        stdio(tmp_path, f"--token={TOKEN}"), include=["sleep"], read_timeout=0.3, overrides={"sleep": {"retry": None}}
    )
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("sleep", {"seconds": 30})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    (text,) = tool_texts(model)
    assert (
        f"McpTimeout: the MCP server {PROGRAM} (+3 args) did not answer the call of 'sleep' within read_timeout=0.3"
        in text
    )
    assert TOKEN not in text
    rt.close()


# -- item 20: tool names and malformed results ------------------------------------------------------


def test_tool_names_no_provider_accepts_are_mapped_to_stable_distinct_valid_names(tmp_path: Path) -> None:
    odd = ["a b", "a/b", "é", "a_b", "x" * 300, ""]
    first = loom.mcp_tools(stdio(tmp_path), include=odd)
    again = loom.mcp_tools(stdio(tmp_path), include=odd, prefix="h_")
    names = [t.name for t in first]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", n) for n in names + [t.name for t in again])
    assert len(set(names)) == len(names)
    assert names[3] == "a_b" and names[0] != "a_b"  # a valid name is kept; a mapped one never takes it
    assert [t.remote_name for t in first] == odd  # type: ignore[attr-defined]
    assert [t.name for t in again] == [f"h_{n}" if n == "a_b" else t.name for n, t in zip(names, again, strict=True)]
    assert loom.mcp_tools(stdio(tmp_path), include=odd)[0].name == names[0]  # stable
    rt = mcp_runtime()
    bot, model = scripted_agent(first, calls((names[0], {}), (names[5], {})))
    assert bot.start("go", runtime=rt).status == "completed"
    assert [c["name"] for c in server_calls(tmp_path)] == ["a b", ""]  # called by its real name
    assert "I am 'a b'" in tool_texts(model)[0]
    rt.close()
    with pytest.raises(loom.UsageError, match=r"prefix='my tools/' .* \[A-Za-z0-9_-\]"):
        loom.mcp_tools(stdio(tmp_path), prefix="my tools/")


def test_a_malformed_result_is_a_clear_error_naming_the_server_and_the_tool(tmp_path: Path) -> None:
    tools = loom.mcp_tools(stdio(tmp_path), include=["malformed"])
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("malformed", {})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    (text,) = tool_texts(model)
    assert (
        f"McpError: the MCP server {PROGRAM} (+2 args) answered the call of 'malformed' with a malformed result" in text
    )
    assert "pydantic" not in text and "validation error for" not in text
    assert by_name(tools)["malformed"].server.sessions[rt.effects].starts == 1  # type: ignore[attr-defined]
    rt.close()
