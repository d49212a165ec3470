"""A real MCP server whose tool reports its progress (``ctx.report_progress``), written with the
SDK's ``MCPServer``; run as a program: ``python tests/effects/mcp_progress_server.py``.

``copy_files(count)`` (read-only: no approval) reports ``i/count · copied file <i>`` after each
of its ``count`` steps and answers ``copied <count> files``.
"""

from __future__ import annotations

import asyncio

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("copier")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
async def copy_files(count: int, ctx: Context) -> str:
    """Copy ``count`` files, reporting each one."""
    for i in range(1, count + 1):
        await asyncio.sleep(0.01)
        await ctx.report_progress(i, count, f"copied file {i}")
    return f"copied {count} files"


if __name__ == "__main__":
    app.run()
