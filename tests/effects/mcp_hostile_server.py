"""A hostile MCP server for the tests, written with the SDK's low-level ``Server``; run as a program.

``python tests/effects/mcp_hostile_server.py STATE_DIR [--token=...] [postgresql://...]`` serves over
stdio (extra arguments are ignored: they stand for the credentials a command line may carry);
``... STATE_DIR --http PORT [--require NAME VALUE]`` over streamable HTTP on 127.0.0.1, answering 401
to every request without the header ``NAME: VALUE`` (so a test sees the header reached the server).

Every call is appended to ``STATE_DIR/calls`` as one JSON line ``{"name", "arguments"}`` before
anything else (so a test sees what reached the server, and how often). Each process writes its pid
to ``STATE_DIR/pids``. The tools:

* ``server_error`` (read-only), ``charge`` (no hints: destructive, not idempotent) and
  ``closed_lookalike`` (read-only) answer with a JSON-RPC error of code -32000: "database is
  locked", "card declined" and "Connection closed" (the text the SDK uses for a lost connection);
* ``move`` (destructive) takes ``path: string`` and answers what it was given, unvalidated;
* ``big`` (read-only) answers ``megabytes`` MB of text;
* ``malformed`` (read-only) answers a result that is not a ``CallToolResult`` (over stdio);
* ``sleep`` (read-only) answers after ``seconds``;
* ``echo_header`` (read-only) answers the value of the request header ``name`` (HTTP only);
* ``a b``, ``a/b``, ``é``, ``a_b``, ``x`` * 300 and ``""``: names no provider accepts (or that a
  mapping could clash with), each answering its own name.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

STATE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
READ_ONLY = types.ToolAnnotations(read_only_hint=True)
ODD_NAMES = ["a b", "a/b", "é", "a_b", "x" * 300, ""]


def _tool(name: str, properties: dict[str, Any], annotations: types.ToolAnnotations | None = None) -> types.Tool:
    schema = {"type": "object", "properties": properties, "required": sorted(properties)}
    return types.Tool(name=name, description=f"The tool {name!r}.", input_schema=schema, annotations=annotations)


TOOLS = [
    _tool("server_error", {}, READ_ONLY),
    _tool("charge", {"amount": {"type": "integer"}}),
    _tool("closed_lookalike", {}, READ_ONLY),
    _tool("move", {"path": {"type": "string", "minLength": 1}}),
    _tool("big", {"megabytes": {"type": "number"}}, READ_ONLY),
    _tool("malformed", {}, READ_ONLY),
    _tool("sleep", {"seconds": {"type": "number"}}, READ_ONLY),
    _tool("echo_header", {"name": {"type": "string"}}, READ_ONLY),
    *(_tool(name, {}, READ_ONLY) for name in ODD_NAMES),
]


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
    arguments = dict(params.arguments or {})
    with (STATE / "calls").open("a") as log:
        log.write(json.dumps({"name": params.name, "arguments": arguments}) + "\n")
    name = params.name
    if name == "server_error":
        raise MCPError(code=-32000, message="database is locked")
    if name == "charge":
        raise MCPError(code=-32000, message="card declined")
    if name == "closed_lookalike":
        raise MCPError(code=-32000, message="Connection closed")
    if name == "move":
        return _text(f"moved {arguments.get('path')!r}")
    if name == "big":
        return _text("y" * int(float(arguments["megabytes"]) * 1_000_000))
    if name == "sleep":
        await anyio.sleep(float(arguments["seconds"]))
        return _text("awake")
    if name == "malformed":
        return _text(MALFORMED)  # replaced on its way out (``Mangled``): the SDK checks what a handler returns
    if name == "echo_header":
        headers = getattr(ctx.request, "headers", None) or {}  # the HTTP request (None over stdio)
        return _text(f"{arguments['name']}: {headers.get(str(arguments['name']).lower(), '(none)')}")
    return _text(f"I am {name!r}")


#: The text ``malformed`` answers, and what ``Mangled`` sends instead of a result holding it.
MALFORMED = "<malformed>"
NOT_A_RESULT = {"content": [{"type": "text"}], "isError": "perhaps"}


class Mangled:
    """The server's write stream, with a result holding ``MALFORMED`` replaced by ``NOT_A_RESULT``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCResponse) and MALFORMED in json.dumps(message.result):
            item = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=NOT_A_RESULT))
        await self.inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def __aenter__(self) -> Mangled:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.inner.__aexit__(*exc)


server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, Mangled(write), server.create_initialization_options())  # type: ignore[arg-type]


def http(port: int, required: tuple[str, str] | None) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse
    from starlette.types import ASGIApp, Receive, Scope, Send

    app: ASGIApp = server.streamable_http_app()

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and required is not None:
                headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
                if headers.get(required[0].lower()) != required[1]:
                    await PlainTextResponse("no such credential", status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        return asgi

    uvicorn.run(guarded(app), host="127.0.0.1", port=port, log_level="error", lifespan="on")


if __name__ == "__main__":
    (STATE / "pids").mkdir(parents=True, exist_ok=True)
    (STATE / "pids" / str(os.getpid())).touch()
    if "--http" in sys.argv:
        at = sys.argv.index("--http")
        required = None
        if "--require" in sys.argv:
            r = sys.argv.index("--require")
            required = (sys.argv[r + 1], sys.argv[r + 2])
        http(int(sys.argv[at + 1]), required)
    else:
        anyio.run(stdio)
