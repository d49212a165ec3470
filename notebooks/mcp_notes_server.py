"""The MCP server tutorial 7 uses: notes in a folder, written with the official MCP Python SDK.

``python mcp_notes_server.py FOLDER`` serves over stdio. ``list_notes`` says it only reads
(``readOnlyHint``); ``delete_note`` says nothing, which MCP counts as destructive. The server writes
nothing to stderr, so a notebook cell shows only what loom prints.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # quiet: the SDK's request logs would land in the cell
FOLDER = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("notes")
app = MCPServer("notes")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> str:
    """List the notes in the folder, one per line, with their first line."""
    notes = sorted(FOLDER.glob("*.md"))
    return "\n".join(f"{p.name}: {p.read_text().splitlines()[0]}" for p in notes) or "no notes"


@app.tool()
def delete_note(name: str) -> str:
    """Delete one note from the folder."""
    (FOLDER / name).unlink()
    return f"deleted {name}"


if __name__ == "__main__":
    app.run()
