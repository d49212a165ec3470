"""An MCP server whose tool has a local tool's name never substitutes for it: each agent on one
runtime calls its own ``read_note`` (the SDK test server's tool, and a local one of the same name)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.mark.slow
def test_an_mcp_tool_and_another_agents_local_tool_of_the_same_name_each_run_their_own_body(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "k").write_text("from the server")
    remote = loom.mcp_tools(StdioServerParameters(command=sys.executable, args=[str(SERVER), str(tmp_path)]))
    local_calls: list[str] = []

    @loom.tool(needs_approval=True)
    def read_note(key: str) -> str:
        """Read a local note.

        Args:
            key: The note.
        """
        local_calls.append(key)
        return "from the local tool"

    def script() -> loom.ScriptedModel:
        return loom.ScriptedModel([ModelResponse.tool_calls([("read_note", {"key": "k"})]), ModelResponse.text("done")])

    rt = loom.Runtime.open(":memory:", flows=FlowRegistry())
    try:
        local = loom.Agent(script(), tools=[read_note], name="local_notes")
        served = loom.Agent(script(), tools=[t for t in remote if t.name == "read_note"], name="server_notes")
        parked = local.start("read", runtime=rt, execution_id="local")
        assert parked.status == "suspended"
        # The server's agent runs (and registers its read_note) while the local call waits.
        done = served.start("read", runtime=rt, execution_id="served")
        assert done.status == "completed"
        parked.gates[0].approve()
        assert parked.status == "completed"
        outputs = [rt.history(r.id).steps["#turn:0:tool:0"].output for r in (parked, done)]
        assert outputs == ["from the local tool", {"result": "from the server"}]
        assert local_calls == ["k"]
    finally:
        rt.close()
