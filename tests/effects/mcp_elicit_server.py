"""A real MCP server whose tools ask the user a question mid-call (``ctx.elicit``), written with the
SDK's ``MCPServer``; run as a program: ``python tests/effects/mcp_elicit_server.py STATE_DIR``.

``book`` (not idempotent, not destructive: no approval) and ``book_again`` (idempotent) ask
"Which day for <room>?" with the form ``When`` (``day``: text, ``nights``: a number, ``breakfast``:
yes/no, ``view``: one of ``sea``/``garden``) and answer what they got. Every call appends a line
to ``STATE_DIR/calls`` when it starts and when it is answered, so a test sees each call the
server received, across restarts of the server and of loom.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal

from mcp.server.mcpserver import AcceptedElicitation, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

STATE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
app = MCPServer("booking")


class When(BaseModel):
    """The form the tools ask to be filled in."""

    day: str = Field(description="Day of arrival")
    nights: int = Field(default=1, ge=1, le=30, description="How many nights")
    breakfast: bool = False
    view: Literal["sea", "garden"] = "garden"


def log(line: str) -> None:
    with (STATE / "calls").open("a") as f:
        f.write(line + "\n")


def ask_when(room: str) -> Elicit[When]:
    """The question (the SDK runs it before the tool's body, and again on each round of the call)."""
    log(f"ask {room}")
    return Elicit(f"Which day for {room}?", When)


Answer = Annotated[ElicitationResult[When], Resolve(ask_when)]


def booking(room: str, when: ElicitationResult[When]) -> str:
    if not isinstance(when, AcceptedElicitation):
        log(f"{when.action} {room}")
        return f"not booked ({when.action})"
    log(f"answered {room} {when.data.day}")
    day = when.data
    return f"booked {room} on {day.day} for {day.nights} night(s), breakfast {day.breakfast}, {day.view} view"


@app.tool(annotations=ToolAnnotations(destructive_hint=False))
async def book(room: str, when: Answer) -> str:
    """Book a room (asks the day)."""
    return booking(room, when)


@app.tool(annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True))
async def book_again(room: str, when: Answer) -> str:
    """Book a room, idempotently (asks the day)."""
    return booking(room, when)


if __name__ == "__main__":
    app.run()
