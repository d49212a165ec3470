"""A real MCP server for the tests, written with the SDK's ``MCPServer``; run as a program.

``python tests/effects/mcp_server.py STATE_DIR`` serves over stdio;
``python tests/effects/mcp_server.py STATE_DIR --http PORT`` over streamable HTTP on 127.0.0.1.

Notes are files in ``STATE_DIR/notes`` (so what a call did is visible to the test and survives a
restart of the server). ``STATE_DIR/changed`` present changes ``read_note``'s description (a tool list
that changed). Tools carry each annotation: ``read_note`` read-only, ``put_note`` additive and
idempotent, ``delete_note`` none (MCP's defaults: destructive), ``snapshot`` returns an image,
``stats`` structured JSON, ``fail`` an error, ``flaky`` (idempotent) and
``crash`` (not) kill their own process on their first call. ``kill_client`` (not
idempotent) and ``kill_client_read_only`` kill loom's own process (the server's parent) on their
first call. Each process writes its pid to ``STATE_DIR/pids``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import TypedDict

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

#: The bytes ``snapshot`` returns (a PNG signature and a marker, not a real picture).
PNG = b"\x89PNG\r\n\x1a\nloom-test-image"

STATE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
NOTES = STATE / "notes"
app = MCPServer("notes")


class Stats(TypedDict):
    """How many notes there are and their total size."""

    count: int
    chars: int


@app.tool(
    annotations=ToolAnnotations(read_only_hint=True),
    description="Read a note (v2)." if (STATE / "changed").exists() else "Read a note.",
)
def read_note(key: str) -> str:
    return (NOTES / key).read_text() if (NOTES / key).exists() else f"no note {key}"


@app.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def put_note(key: str, text: str) -> str:
    """Write a note (replacing one with the same key)."""
    NOTES.mkdir(parents=True, exist_ok=True)
    (NOTES / key).write_text(text)
    return f"saved {key}"


@app.tool()
def delete_note(key: str) -> str:
    """Delete a note."""
    (NOTES / key).unlink(missing_ok=True)
    return f"deleted {key}"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def stats() -> Stats:
    """Count the notes."""
    files = list(NOTES.glob("*")) if NOTES.exists() else []
    return Stats(count=len(files), chars=sum(len(f.read_text()) for f in files))


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def snapshot() -> Image:
    """A picture of the notes."""
    return Image(data=PNG, format="png")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"cannot: {reason}")


@app.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
def flaky(key: str) -> str:
    """Kill this server's process on the first call for ``key``; answer on the next."""
    marker = STATE / f"flaky-{key}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(17)
    return f"survived {key}"


@app.tool()
def crash(key: str) -> str:
    """Kill this server's process on the first call for ``key`` (no annotations: not idempotent)."""
    marker = STATE / f"crash-{key}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(17)
    return f"survived {key}"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


def _kill_client(key: str) -> str:
    marker = STATE / f"client-{key}"
    if not marker.exists():
        marker.write_text(str(os.getppid()))
        os.kill(os.getppid(), signal.SIGKILL)  # loom's process dies mid-call
        time.sleep(1)  # long enough for the kill to land before this server is seen to go
        os._exit(0)
    return f"called again {key}"


@app.tool()
def kill_client(key: str) -> str:
    """Kill loom's process (this server's parent) on the first call for ``key`` (not idempotent)."""
    return _kill_client(key)


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def kill_client_read_only(key: str) -> str:
    """The same, read-only (so idempotent)."""
    return _kill_client(key)


if __name__ == "__main__":
    (STATE / "pids").mkdir(parents=True, exist_ok=True)
    (STATE / "pids" / str(os.getpid())).touch()  # the test checks every server it started is gone
    if "--http" in sys.argv:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        app.run()
