"""MCP tools (``loom_nb/effects/mcp.py``) against real MCP servers: the SDK server in
``mcp_server.py`` over stdio and over streamable HTTP on 127.0.0.1, and the published
``mcp-server-time`` from PyPI, each driven by a real ``loom.Agent`` with a ``ScriptedModel``."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.effects.mcp import McpTool, defaults
from loom_nb.errors import ToolArgumentsError
from loom_nb.journal.events import EventKind
from loom_nb.kernel import FlowRegistry
from tests.effects import mcp_crash_flow as crash_flow
from tests.effects.support import calls, mcp_runtime, scripted_agent, serve_script_over_http, tool_texts

SERVER = Path(__file__).with_name("mcp_server.py")
CRASH_FLOW = Path(crash_flow.__file__)
TIME_SERVER = Path(sys.executable).with_name("mcp-server-time")
#: What ``mcp_server.py``'s ``snapshot`` returns.
PNG = b"\x89PNG\r\n\x1a\nloom-test-image"


def stdio(state: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), str(state)])


def completed(rt: loom.Runtime, run: loom.Run) -> dict[str, Any]:
    """Each step's last recorded outcome, by step id (an output, or the error's message)."""
    out: dict[str, Any] = {}
    for event in rt.journal.read(run.id):
        if event.kind == EventKind.STEP_COMPLETED:
            out[event.step_id] = event.data["output"]
        elif event.kind == EventKind.STEP_FAILED:
            out[event.step_id] = event.data["error"]["message"]
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def server_pids(state: Path) -> list[int]:
    return [int(p.name) for p in (state / "pids").iterdir()]


@pytest.fixture(scope="module")
def notes_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("notes")


@pytest.fixture(scope="module")
def notes(notes_state: Path) -> list[loom.Tool]:
    """The test server's tools, listed once for the module (each test's runtime starts its own session)."""
    return loom.mcp_tools(stdio(notes_state))


def by_name(tools: list[loom.Tool]) -> dict[str, loom.Tool]:
    return {t.name: t for t in tools}


def test_annotations_set_the_defaults_with_mcps_own_defaults_for_absent_hints() -> None:
    assert defaults(None) == {"needs_approval": True, "idempotent": False, "retry": None}
    read_only = defaults({"readOnlyHint": True, "destructiveHint": True})
    assert read_only["needs_approval"] is False and read_only["idempotent"] is True
    assert read_only["retry"] == loom.RetryPolicy(attempts=3)
    additive = defaults({"destructiveHint": False})
    assert additive == {"needs_approval": False, "idempotent": False, "retry": None}
    assert defaults({"idempotentHint": True})["needs_approval"] is True  # destructive by default


@pytest.mark.slow
def test_the_model_sees_the_servers_name_description_and_schema(notes: list[loom.Tool]) -> None:
    tools = by_name(notes)
    assert sorted(tools) == [
        "crash",
        "delete_note",
        "fail",
        "flaky",
        "kill_client",
        "kill_client_read_only",
        "nap",
        "put_note",
        "read_note",
        "snapshot",
        "stats",
    ]
    spec = tools["read_note"].spec
    assert spec.description == "Read a note."
    # Exactly the server's schema (loom's own @tool drops pydantic's titles; this keeps them).
    assert spec.parameters == {
        "type": "object",
        "properties": {"key": {"title": "Key", "type": "string"}},
        "required": ["key"],
        "title": "read_noteArguments",
    }
    assert [tools[n].needs_approval for n in ("read_note", "put_note", "delete_note", "crash")] == [
        False,
        False,
        True,
        True,
    ]
    assert [tools[n].idempotent for n in ("read_note", "put_note", "delete_note")] == [True, True, False]
    assert all(not t.trusted for t in notes)
    with pytest.raises(ToolArgumentsError, match=r"invalid arguments for tool 'read_note': key: 3 is not of type"):
        tools["read_note"].validate({"key": 3})


@pytest.mark.slow
def test_a_destructive_tool_waits_for_approval_a_read_only_one_runs_at_once(
    notes: list[loom.Tool], notes_state: Path
) -> None:
    (notes_state / "notes").mkdir(exist_ok=True)
    (notes_state / "notes" / "a").write_text("alpha")
    rt = mcp_runtime()
    bot, model = scripted_agent(notes, calls(("read_note", {"key": "a"}), ("delete_note", {"key": "a"})))
    run = bot.start("tidy", runtime=rt)
    assert run.status == "suspended"
    (gate,) = run.gates
    assert gate.tool == "delete_note" and gate.arguments == {"key": "a"}
    assert (notes_state / "notes" / "a").exists()  # parked before the destructive call
    gate.approve()
    assert run.status == "completed"
    assert not (notes_state / "notes" / "a").exists()
    assert completed(rt, run)["#turn:0:tool:1"] == {"result": "deleted a"}
    # Untrusted by default: the model gets the output fenced.
    assert tool_texts(model)[0] == '<<<untrusted-content>>>\n{"result":"alpha"}\n<<<end-untrusted-content>>>'
    steps = loom.frames(rt).steps(run.id)
    tool_steps = steps[steps["effect"].str.startswith("tools.")]
    assert list(tool_steps["effect"]) == ["tools.read_note", "tools.delete_note"]
    assert set(tool_steps["status"]) == {"completed"}
    session = by_name(notes)["read_note"]
    assert isinstance(session, McpTool)
    live = session.server.sessions[rt.effects]
    assert live.starts == 1  # one session for the whole run, across the approval
    pids = server_pids(notes_state)
    rt.close()
    assert live.closed and live.thread is None
    assert not any(alive(pid) for pid in pids)  # no server left behind


@pytest.mark.slow
def test_results_text_json_image_and_an_error_the_model_reads(notes: list[loom.Tool]) -> None:
    rt = mcp_runtime()
    bot, model = scripted_agent(notes, calls(("stats", {}), ("snapshot", {}), ("fail", {"reason": "no disk"})))
    run = bot.start("look", runtime=rt)
    assert run.status == "completed"
    outputs = completed(rt, run)
    assert set(outputs["#turn:0:tool:0"]) == {"count", "chars"}  # structured JSON as the output
    (image,) = outputs["#turn:0:tool:1"]["content"]
    assert image["type"] == "image" and image["mime_type"] == "image/png" and image["size"] == len(PNG)
    assert rt.journal.get_content(image["ref"]) == PNG
    journal_text = repr([e.data for e in rt.journal.read(run.id)])
    assert base64.b64encode(PNG).decode() not in journal_text  # no base64 inline
    assert outputs["#turn:0:tool:2"].startswith("the MCP tool 'fail' (server python")
    texts = tool_texts(model)
    assert "Error: the tool 'fail' failed: McpToolError:" in texts[2] and "cannot: no disk" in texts[2]
    assert all(t.startswith("<<<untrusted-content>>>") for t in texts)  # untrusted by default: fenced
    again, _ = scripted_agent(notes, calls(("stats", {})))
    assert again.start("again", runtime=rt).status == "completed"
    session = by_name(notes)["stats"].server.sessions[rt.effects]  # type: ignore[attr-defined]
    assert session.starts == 1  # one session for both runs on this runtime
    rt.close()


@pytest.mark.slow
def test_a_server_killed_mid_call_is_retried_on_a_new_process(notes: list[loom.Tool], notes_state: Path) -> None:
    rt = mcp_runtime()
    bot, _ = scripted_agent(notes, calls(("flaky", {"key": "k1"})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    events = [e for e in rt.journal.read(run.id) if e.step_id == "#turn:0:tool:0"]
    failed = [e for e in events if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].data["will_retry"] is True
    assert failed[0].data["error"]["type"] == "loom_nb.errors:McpServerGone"
    assert completed(rt, run)["#turn:0:tool:0"] == {"result": "survived k1"}
    killed = int((notes_state / "flaky-k1").read_text())
    assert not alive(killed)
    assert by_name(notes)["flaky"].server.sessions[rt.effects].starts == 2  # type: ignore[attr-defined]
    rt.close()


@pytest.mark.slow
def test_a_non_idempotent_call_cut_by_a_dying_server_parks_in_doubt(notes: list[loom.Tool]) -> None:
    """The server died mid-call: whether the call took effect is unknown, so a person decides (as after
    a crash of loom's own process); it is neither retried nor handed to the model as a failure."""
    rt = mcp_runtime()
    crash = by_name(notes)["crash"]
    crash.needs_approval = False
    try:
        bot, model = scripted_agent(notes, calls(("crash", {"key": "c1"})))
        run = bot.start("go", runtime=rt)
        assert run.status == "suspended"
        (gate,) = run.gates
        assert (gate.gate_id, gate.kind) == ("#turn:0:tool:0:in_doubt", "InDoubt")
        assert len(model.history) == 1  # the model was not told anything yet
        in_doubt = [e for e in rt.journal.read(run.id) if e.kind == EventKind.STEP_IN_DOUBT]
        assert [e.step_id for e in in_doubt] == ["#turn:0:tool:0"]
        gate.run_again()  # the person checked: it did not happen; the server restarts and it runs
        assert run.status == "completed"
    finally:
        crash.needs_approval = True
    assert "McpServerGone" not in " ".join(tool_texts(model))
    rt.close()


@pytest.mark.slow
def test_a_server_that_does_not_answer_within_read_timeout_is_stopped_and_the_call_fails(tmp_path: Path) -> None:
    tools = loom.mcp_tools(
        stdio(tmp_path), include=["nap"], read_timeout=0.5, overrides={"nap": {"retry": loom.RetryPolicy(attempts=2)}}
    )
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("nap", {"seconds": 30})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    (text,) = tool_texts(model)
    assert "RetriesExhaustedError" in text and "did not answer the call of 'nap' within read_timeout=0.5 s" in text
    assert by_name(tools)["nap"].server.sessions[rt.effects].starts == 2  # type: ignore[attr-defined]
    pids = server_pids(tmp_path)
    assert len(pids) == 3 and not any(alive(pid) for pid in pids)  # listing + two attempts, each stopped
    rt.close()


@pytest.mark.slow
def test_a_tool_list_that_changed_since_mcp_tools_is_reported(tmp_path: Path) -> None:
    tools = loom.mcp_tools(stdio(tmp_path), include=["read_note"])
    (tmp_path / "changed").touch()  # the next server process describes read_note differently
    rt = mcp_runtime()
    bot, model = scripted_agent(tools, calls(("read_note", {"key": "a"})))
    run = bot.start("go", runtime=rt)
    assert run.status == "completed"
    (text,) = tool_texts(model)
    assert "McpToolsChangedError" in text and "changed the tool 'read_note' (description)" in text
    assert "Call loom.mcp_tools(...) again" in text
    rt.close()


@pytest.mark.slow
def test_prefix_include_and_overrides(tmp_path: Path) -> None:
    tools = loom.mcp_tools(
        stdio(tmp_path),
        prefix="n_",
        include=["delete_note", "read_note"],
        overrides={"delete_note": {"needs_approval": False}, "read_note": {"trusted": True}},
    )
    assert [(t.name, t.effect_id, t.needs_approval, t.trusted) for t in tools] == [
        ("n_delete_note", "tools.n_delete_note", False, False),
        ("n_read_note", "tools.n_read_note", False, True),
    ]
    with pytest.raises(loom.UsageError, match=r"include names \['nope'\].*it lists \['crash'"):
        loom.mcp_tools(stdio(tmp_path), include=["nope"])
    with pytest.raises(loom.UsageError, match=r"overrides\['read_note'\] sets \['approval'\]"):
        loom.mcp_tools(stdio(tmp_path), overrides={"read_note": {"approval": False}})


def test_a_server_that_does_not_start_is_a_clear_error(tmp_path: Path) -> None:
    missing = StdioServerParameters(command=str(tmp_path / "no-such-server"))
    with pytest.raises(loom.McpError, match=r"could not list the tools of the MCP server no-such-server"):
        loom.mcp_tools(missing)


@pytest.mark.slow
def test_without_the_sdk_import_works_and_mcp_tools_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "import sys; sys.modules['mcp'] = None; import loom_nb; print(loom_nb.mcp_tools.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "mcp_tools"
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(loom.UsageError, match=r"pip install 'loom_nb\[mcp\]'"):
        loom.mcp_tools("http://127.0.0.1:9/mcp")


@pytest.mark.slow
def test_mcp_tools_loads_the_argument_validator_so_the_first_call_does_not(tmp_path: Path) -> None:
    code = (
        "import sys; import loom_nb as loom; from mcp import StdioServerParameters\n"
        f"server = StdioServerParameters(command=sys.executable, args=[{str(SERVER)!r}, {str(tmp_path)!r}])\n"
        "tools = loom.mcp_tools(server)\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.slow
def test_the_published_time_server_over_stdio() -> None:
    tools = loom.mcp_tools(StdioServerParameters(command=str(TIME_SERVER), args=["--local-timezone", "UTC"]))
    time_tool = by_name(tools)["get_current_time"]
    assert time_tool.needs_approval is False and time_tool.idempotent is True  # its annotations: read-only
    rt = mcp_runtime()
    bot, _ = scripted_agent(tools, calls(("get_current_time", {"timezone": "UTC"})))
    run = bot.start("what time is it?", runtime=rt)
    assert run.status == "completed"
    output = completed(rt, run)["#turn:0:tool:0"]
    assert output["timezone"] == "UTC" and output["datetime"].endswith("+00:00")
    direct = time_tool(timezone="UTC")  # calling the tool object calls the server, outside any run
    assert direct.structured_content["timezone"] == "UTC"
    rt.close()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    for port in serve_script_over_http(SERVER, str(tmp_path), what="the streamable-HTTP test server"):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.slow
def test_a_streamable_http_server(http_server: str) -> None:
    tools = loom.mcp_tools(http_server, prefix="web_", include=["put_note", "read_note", "delete_note"])
    rt = mcp_runtime()
    bot, _ = scripted_agent(
        tools,
        calls(("web_put_note", {"key": "h", "text": "over http"})),
        calls(("web_read_note", {"key": "h"}), ("web_delete_note", {"key": "h"})),
    )
    run = bot.start("go", runtime=rt)
    assert run.status == "suspended" and [g.tool for g in run.gates] == ["web_delete_note"]
    run.gates[0].refuse("keep it")
    assert run.status == "completed"
    outputs = completed(rt, run)
    assert outputs["#turn:0:tool:0"] == {"result": "saved h"}
    assert outputs["#turn:1:tool:0"] == {"result": "over http"}
    assert "#turn:1:tool:1" not in outputs  # refused: never called
    rt.close()


def crash_then_recover(tmp_path: Path, tool: str) -> tuple[loom.Runtime, loom.Agent, int]:
    """Run ``mcp_crash_flow.py`` until its MCP call kills it; open its journal and re-register the agent."""
    journal = tmp_path / "journal.duckdb"
    done = subprocess.run(
        [sys.executable, str(CRASH_FLOW), str(journal), str(tmp_path), tool], capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    rt = loom.Runtime.open(journal, flows=FlowRegistry())
    bot = crash_flow.agent(tmp_path, tool)
    bot.register(rt)
    in_flight = [e for e in rt.journal.read(crash_flow.EXECUTION_ID) if e.step_id == "#turn:0:tool:0"]
    assert [e.kind for e in in_flight] == [EventKind.STEP_STARTED]  # cut mid-call
    return rt, bot, int((tmp_path / "client-k").read_text())


@pytest.mark.slow
def test_loom_killed_during_a_non_idempotent_mcp_call_parks_it_in_doubt(tmp_path: Path) -> None:
    rt, bot, killed = crash_then_recover(tmp_path, "kill_client")
    (result,) = rt.recover_sync()
    assert result.status == "suspended"
    run = loom.Run.attach(rt, crash_flow.EXECUTION_ID, agent=bot)
    (gate,) = run.gates
    assert gate.gate_id == "#turn:0:tool:0:in_doubt"
    run.gates[0].run_again()
    assert run.status == "completed"
    assert completed(rt, run)["#turn:0:tool:0"] == {"result": "called again k"}
    rt.close()
    assert not alive(killed)


@pytest.mark.slow
def test_loom_killed_during_a_read_only_mcp_call_re_invokes_it_on_recovery(tmp_path: Path) -> None:
    rt, bot, _ = crash_then_recover(tmp_path, "kill_client_read_only")
    (result,) = rt.recover_sync()
    assert result.status == "completed"
    run = loom.Run.attach(rt, crash_flow.EXECUTION_ID, agent=bot)
    assert completed(rt, run)["#turn:0:tool:0"] == {"result": "called again k"}
    rt.close()
