"""An agent whose MCP tool call kills this process mid-call (the server kills its parent).

Usage::

    python tests/effects/mcp_crash_flow.py <journal.duckdb> <state_dir> <tool>

Starts execution ``mcp-1`` of the agent ``mcp-crash`` on a DuckDB journal; the model calls
``<tool>`` (``kill_client`` or ``kill_client_read_only`` of ``mcp_server.py``) with key ``k``; its
first call SIGKILLs this process with the tool step in flight. The test recovers the run in its own
process with ``agent()`` (the same agent: same name, same tools).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse

EXECUTION_ID = "mcp-1"
SERVER = Path(__file__).with_name("mcp_server.py")


def agent(state: Path, tool: str) -> loom.Agent:
    """The agent of the run: the model calls ``tool`` once, then answers ``done``."""
    tools = loom.mcp_tools(
        StdioServerParameters(command=sys.executable, args=[str(SERVER), str(state)]),
        include=[tool],
        overrides={tool: {"needs_approval": False}},
    )
    script = [ModelResponse.tool_calls([(tool, {"key": "k"})]), ModelResponse.text("done")]
    return loom.Agent(model=loom.ScriptedModel(script), tools=tools, name="mcp-crash")


if __name__ == "__main__":
    journal, state, tool = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    rt = loom.Runtime.open(journal, flows=FlowRegistry())
    agent(state, tool).start("go", runtime=rt, execution_id=EXECUTION_ID)
    raise SystemExit("the tool call should have killed this process")
