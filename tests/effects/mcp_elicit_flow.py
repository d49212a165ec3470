"""An agent whose MCP tool asks the user a question mid-call; this process is killed while the
question waits for its answer (the stdio server dies with it).

Usage::

    python tests/effects/mcp_elicit_flow.py <journal.duckdb> <state_dir> <tool>

Starts execution ``elicit-1`` of the agent ``mcp-elicit`` on a DuckDB journal; the model calls
``<tool>`` (``book`` or ``book_again`` of ``mcp_elicit_server.py``) for room ``12``; once the run
shows the server's question as a gate, this process SIGKILLs itself. The test answers the question
in its own process with ``agent()`` (the same agent: same name, same tools).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse

EXECUTION_ID = "elicit-1"
SERVER = Path(__file__).with_name("mcp_elicit_server.py")


def agent(state: Path, tool: str, *, after_turn_0: bool = False) -> loom.Agent:
    """The agent of the run: the model calls ``tool`` once for room 12, then answers ``done``
    (``after_turn_0``: the model of a process that finds turn 0 journaled only answers ``done``)."""
    server = StdioServerParameters(command=sys.executable, args=[str(SERVER), str(state)])
    tools = loom.mcp_tools(server, include=[tool])
    script = [ModelResponse.tool_calls([(tool, {"room": "12"})]), ModelResponse.text("done")]
    script = script[1:] if after_turn_0 else script
    return loom.Agent(model=loom.ScriptedModel(script), tools=tools, name="mcp-elicit")


async def main(journal: str, state: Path, tool: str) -> None:
    rt = loom.Runtime.open(journal, flows=FlowRegistry())
    run = agent(state, tool).start("book", runtime=rt, execution_id=EXECUTION_ID)
    for _ in range(600):
        if run.gates:
            os.kill(os.getpid(), signal.SIGKILL)  # the question waits: the kernel dies
        await asyncio.sleep(0.05)
    raise SystemExit(f"the server's question never showed as a gate: {run!r}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3]))
