"""MCP tools: each tool a Model Context Protocol server lists becomes a loom ``Tool``.

Built on the official MCP Python SDK (``pip install 'loom_nb[mcp]'``), imported lazily so
``import loom_nb`` works without it. A server is a ``mcp.StdioServerParameters`` (a command loom
starts) or the URL of a streamable-HTTP server. ``mcp_tools`` lists the server's tools once; each
becomes a ``McpTool`` whose name, description and input JSON schema are the server's, registered like
any tool as the effect ``tools.<name>``, so every call is a journaled step that passes the ring
(authorization, quota, retry, guard, claim-check) and the approval rules.

Defaults come from the server's tool annotations, with MCP's own defaults when a hint is absent
(``readOnlyHint`` false, ``destructiveHint`` true, ``idempotentHint`` false):

* read-only: idempotent, no approval;
* otherwise: approval when destructive, idempotent when ``idempotentHint``;
* idempotent tools are retried (``RetryPolicy(attempts=3)``) when the server dies mid-call; a
  non-idempotent call cut that way has an unknown outcome (``McpServerGone`` is an
  ``OutcomeUnknownError``), so the kernel parks it on an ``InDoubt`` gate for a person to answer;
* every MCP tool is untrusted (``trusted=False``): its output is fenced for the model.

``overrides={"<server's tool name>": {"needs_approval": False, ...}}`` changes any of these per tool.

Lifetime: one session per server per runtime, on a thread of its own (``LoopThread``), started at
the first call, reused across turns and runs, started again after the server died, and closed with
the runtime (``Runtime.close()`` through the ring's close callbacks).
"""

from __future__ import annotations

import base64
import importlib
import logging
import os
import sys
import weakref
from collections.abc import Iterable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, Unpack

from loom_nb.effects.claimcheck import ContentStore
from loom_nb.effects.retry import RetryPolicy
from loom_nb.effects.ring import EffectRing
from loom_nb.effects.tool import Tool, ToolOptions
from loom_nb.errors import McpError, McpServerGone, McpToolError, McpToolsChangedError, ToolArgumentsError, UsageError
from loom_nb.kernel.async_bridge import LoopThread, run_blocking
from loom_nb.kernel.effect_registry import EffectInvoker, EffectResult, EffectSpec
from loom_nb.messages import ToolSpec

if TYPE_CHECKING:
    import asyncio

    from mcp import Client, StdioServerParameters
    from mcp.types import CallToolResult
    from mcp.types import Tool as McpDefinition

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'loom_nb[mcp]'"
#: The keys an override may set, each a ``Tool`` option.
OVERRIDE_KEYS = frozenset({"needs_approval", "idempotent", "trusted", "scopes", "retry", "quota", "description"})


def _sdk(module: str = "mcp") -> Any:
    """Import an MCP SDK module, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(f"MCP tools need the official MCP Python SDK: {INSTALL_HINT} ({exc})") from None


def server_errlog() -> TextIO:
    """Where a stdio server's stderr goes: this process's stderr when it has a file descriptor
    (a terminal, a kernel's captured stream), else the interpreter's original one, else nowhere."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")


def _definition(tool: McpDefinition) -> dict[str, Any]:
    """The parts of a tool's definition the model and the defaults depend on, as JSON."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: dumped.get(key) for key in ("description", "inputSchema", "annotations")}


class McpServer:
    """One MCP server as ``mcp_tools`` saw it: where it is, the tools it listed, one session per runtime.

    Args:
        target: ``StdioServerParameters`` or a streamable-HTTP URL.
        read_timeout: Seconds to wait for each answer (None: no limit).
    """

    def __init__(self, target: StdioServerParameters | str, *, read_timeout: float | None = None) -> None:
        self.target = target
        self.read_timeout = read_timeout
        if isinstance(target, str):
            self.label = target
        else:
            self.label = " ".join([Path(target.command).name, *target.args])
        #: The server's definition of each tool when ``mcp_tools`` listed it, by the server's name.
        self.listed: dict[str, dict[str, Any]] = {}
        self.sessions: weakref.WeakKeyDictionary[EffectRing, McpSession] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"McpServer({self.label!r})"

    def client(self, **options: Any) -> Client:
        """A new SDK ``Client`` for this server (not yet entered)."""
        sdk = _sdk()
        server: Any = self.target
        if not isinstance(server, str):
            # The server's stderr must go to a real file: inside a kernel (nbval, some front ends)
            # ``sys.stderr`` has no file descriptor, and the SDK's default would fail to start it.
            server = _sdk("mcp.client.stdio").stdio_client(server, errlog=server_errlog())
        return sdk.Client(server, read_timeout_seconds=self.read_timeout, **options)  # type: ignore[no-any-return]

    async def list_tools(self, client: Client) -> list[McpDefinition]:
        """Every tool the server lists, page by page."""
        tools: list[McpDefinition] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                return tools

    async def read_tools(self) -> list[McpDefinition]:
        """Start the server, list its tools, close it."""
        async with self.client() as client:
            return await self.list_tools(client)

    def session_for(self, ring: EffectRing) -> McpSession:
        """This server's session on the runtime that owns ``ring`` (made once; closed with the ring)."""
        session = self.sessions.get(ring)
        if session is None or session.closed:
            session = McpSession(self)
            self.sessions[ring] = session
            ring.on_close(session.close)
        return session


class McpSession:
    """One live connection to one server for one runtime, on a ``LoopThread`` of its own.

    Started at the first call, started again at the next call after the server died, closed by
    ``close()``. Before a call it checks the tool's definition against what ``mcp_tools`` listed.

    Attributes:
        server: The server.
        starts: How many times a connection was opened (a restart after a crash counts).
        closed: True once closed (a call then is a ``UsageError``).
    """

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.starts = 0
        self.closed = False
        self.thread: LoopThread | None = None
        self.client: Client | None = None
        self.current: dict[str, dict[str, Any]] = {}
        self.stale = False
        self.stop: asyncio.Event | None = None
        self.owner: asyncio.Task[None] | None = None
        self.lock: asyncio.Lock | None = None

    async def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call the server's tool ``name`` (starting the server if needed).

        Raises:
            McpServerGone: the server could not be started, died during the call, or did not answer
                within ``read_timeout`` (the session is closed: a stdio server is stopped).
            McpToolsChangedError: the tool is gone or changed since ``mcp_tools`` listed it.
            McpError: the server refused the call.
            UsageError: the runtime was closed.
        """
        if self.closed:
            raise UsageError(f"the MCP session with {self.server.label} is closed (its runtime was closed)")
        if self.thread is None:
            self.thread = LoopThread(f"loom-mcp {self.server.label}")
        return await self.thread.run(self.on_thread(name, arguments))

    async def on_thread(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """``call``'s body, on the session's own loop."""
        client = await self.connected(name)
        mcp_error = _sdk("mcp.shared.exceptions").MCPError
        codes = _sdk("mcp_types.jsonrpc")
        try:
            return await client.call_tool(name, arguments)
        except mcp_error as exc:
            if exc.error.code not in (codes.CONNECTION_CLOSED, codes.REQUEST_TIMEOUT):
                raise McpError(f"the MCP server {self.server.label} refused the call of {name!r}: {exc}") from None
            failure: Exception = exc
        except (OSError, EOFError) as exc:
            failure = exc
        await self.drop()
        raise McpServerGone(
            f"the MCP server {self.server.label} died, closed the connection or did not answer in time "
            f"(read_timeout={self.server.read_timeout}) during a call of {name!r} ({type(failure).__name__}: "
            f"{failure}); the session was closed and the next attempt starts it again"
        ) from None

    async def connected(self, name: str) -> Client:
        """The live client (connecting first if needed), after checking ``name``'s definition."""
        if self.lock is None:
            self.lock = _asyncio().Lock()
        async with self.lock:
            if self.client is None:
                await self.start()
            elif self.stale:
                self.stale = False
                assert self.client is not None
                self.current = {t.name: _definition(t) for t in await self.server.list_tools(self.client)}
            client = self.client
        assert client is not None
        self.check(name)
        return client

    def check(self, name: str) -> None:
        """Refuse a tool that the server no longer lists, or lists differently, since ``mcp_tools``."""
        fix = (
            "Call loom.mcp_tools(...) again and start a new run with the tools it returns "
            "(a run keeps the tools and schemas it started with)."
        )
        if name not in self.current:
            raise McpToolsChangedError(
                f"the MCP server {self.server.label} no longer lists the tool {name!r} (it did when "
                f"loom.mcp_tools() read it; it now lists {sorted(self.current) or 'nothing'}). {fix}"
            )
        before, now = self.server.listed.get(name), self.current[name]
        if before is not None and before != now:
            changed = ", ".join(k for k in now if now.get(k) != before.get(k))
            raise McpToolsChangedError(
                f"the MCP server {self.server.label} changed the tool {name!r} ({changed}) since "
                f"loom.mcp_tools() read it, so the model was told something else. {fix}"
            )

    async def start(self) -> None:
        """Open a connection in an owner task that keeps it open until ``drop``."""
        aio = _asyncio()
        ready: asyncio.Future[Client] = aio.get_running_loop().create_future()
        self.stop = aio.Event()
        self.owner = aio.create_task(self.own(ready, self.stop))
        self.starts += 1
        self.client = await ready
        self.current = {t.name: _definition(t) for t in await self.server.list_tools(self.client)}
        self.stale = False

    async def own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Enter the SDK client, hand it out, and hold it until ``stop`` is set (one task, as the
        SDK's task groups require)."""
        try:
            async with self.server.client(message_handler=self.on_message) as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(
                    McpServerGone(
                        f"could not start or reach the MCP server {self.server.label}: {type(exc).__name__}: {exc}. "
                        "Check its command or URL."
                    )
                )
            else:
                log.debug("the MCP session with %s ended with %r", self.server.label, exc)

    async def on_message(self, message: Any) -> None:
        """Mark the tool list stale on ``notifications/tools/list_changed``."""
        notification = getattr(message, "root", message)
        if getattr(notification, "method", None) == "notifications/tools/list_changed":
            self.stale = True

    async def drop(self) -> None:
        """Close the connection (the SDK stops a stdio server's process)."""
        owner, self.owner, self.client = self.owner, None, None
        if self.stop is not None:
            self.stop.set()
        if owner is not None:
            with suppress(Exception):
                await owner

    def close(self) -> None:
        """Close the connection and stop the thread (idempotent; the ring calls it on close)."""
        if self.closed:
            return
        self.closed = True
        thread, self.thread = self.thread, None
        if thread is None:
            return
        try:
            thread.call(self.drop(), timeout=30)
        except Exception:
            log.exception("closing the MCP session with %s failed", self.server.label)
        thread.stop()


def _asyncio() -> Any:
    import asyncio

    return asyncio


def _on_the_server() -> None:
    """Stands in for an MCP tool's function, which runs on the server (``McpTool.call_directly``)."""


class McpTool(Tool):
    """A tool of an MCP server, as a loom ``Tool`` (made by ``mcp_tools``).

    The model sees the server's name (with the prefix), description and input schema exactly.
    Calling the object calls the server directly through a short connection of its own and returns
    the SDK's ``CallToolResult`` (handy in a notebook; nothing is journaled).

    Args:
        server: The server.
        definition: The server's definition of the tool (from ``tools/list``).
        **options: ``Tool``'s options (``ToolOptions``); ``mcp_tools`` sets them from the annotations.

    Attributes:
        server: The server.
        remote_name: The tool's name on the server.
        input_schema: The server's JSON schema of the arguments.
        annotations: The server's annotations (hints) as JSON, or None.
    """

    def __init__(self, server: McpServer, definition: McpDefinition, **options: Unpack[ToolOptions]) -> None:
        options.setdefault("description", definition.description or "")
        # The function Tool would describe runs on the server: the schema is the server's (``spec``).
        super().__init__(_on_the_server, **options)
        self.server = server
        self.remote_name = definition.name
        self.input_schema: dict[str, Any] = dict(definition.input_schema)
        annotations = definition.annotations
        self.annotations = (
            None if annotations is None else annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        self.fn = self.call_directly
        self.__doc__ = self.description

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it: the server's description and input schema, unchanged."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.input_schema)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the arguments against the server's input schema (JSON Schema).

        Raises:
            ToolArgumentsError: with a message the model can act on.
        """
        jsonschema = _sdk("jsonschema")
        validator = jsonschema.validators.validator_for(self.input_schema)(self.input_schema)
        problems = [
            f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
            for error in validator.iter_errors(arguments)
        ]
        if problems:
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {'; '.join(sorted(problems))}")
        return arguments

    def call_directly(self, **arguments: Any) -> CallToolResult:
        """Call the tool on a short connection of its own, outside any run (nothing is journaled)."""

        async def once() -> CallToolResult:
            async with self.server.client() as client:
                result: CallToolResult = await client.call_tool(self.remote_name, arguments)
                return result

        return run_blocking(once())

    def register(
        self, effects: EffectInvoker, *, default_timeout: float | None = None, owner: str | None = None
    ) -> EffectSpec:
        """Register as the effect ``tools.<name>``, calling the server through the runtime's session
        (``default_timeout``: an agent's ``tool_timeout``, used when the tool sets none; ``owner``:
        as ``Tool.register`` has it)."""
        if not isinstance(effects, EffectRing) or effects.content_store is None:
            raise UsageError(
                f"MCP tool {self.name!r} needs loom.Runtime (its effect ring closes the server's session and "
                "its content store keeps images): open one with loom.Runtime.open(...)"
            )
        session = self.server.session_for(effects)
        store = effects.content_store
        remote, label, tainted = self.remote_name, self.server.label, not self.trusted

        async def invoke(arguments: dict[str, Any]) -> EffectResult:
            result = await session.call(remote, dict(arguments))
            return EffectResult(
                output=recorded_output(result, store, tool=remote, server=label, tainted=tainted), tainted=tainted
            )

        return self.register_effect(
            effects, invoke, timeout=default_timeout, owner=owner, mcp_server=label, mcp_tool=remote
        )


def recorded_output(result: CallToolResult, store: ContentStore, *, tool: str, server: str, tainted: bool) -> Any:
    """A call's result as the step records it (and the model reads it).

    Text only: the text (blocks joined by newlines); with structured content and text only: the
    structured JSON; anything else: ``{"content": [...], "structured": ...}`` where each image, audio
    or binary resource is ``{"type", "mime_type", "ref", "size"}``, its bytes in the content store
    (never base64 in the journal).

    Raises:
        McpToolError: the result is an error (``isError``); its text is the message.
    """
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in result.content:
        dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True)
        if block.type == "text":
            texts.append(block.text)
        elif block.type in ("image", "audio"):
            dumped = _stored(block.type, dumped["data"], dumped["mimeType"], store, tainted=tainted)
        elif block.type == "resource" and "blob" in dumped["resource"]:
            resource = dumped["resource"]
            stored = _stored(
                "blob",
                resource.pop("blob"),
                resource.get("mimeType", "application/octet-stream"),
                store,
                tainted=tainted,
            )
            dumped["resource"] = {**resource, **stored}
        blocks.append(dumped)
    if result.is_error:
        text = "\n".join(texts) or "(no message)"
        raise McpToolError(f"the MCP tool {tool!r} (server {server}) reported an error: {text}")
    if len(texts) == len(blocks):
        return result.structured_content if result.structured_content is not None else "\n".join(texts)
    output: dict[str, Any] = {"content": blocks}
    if result.structured_content is not None:
        output["structured"] = result.structured_content
    return output


def _stored(kind: str, data: str, media_type: str, store: ContentStore, *, tainted: bool) -> dict[str, Any]:
    raw = base64.b64decode(data)
    ref = store.put(raw, media_type=media_type, tainted=tainted)
    return {"type": kind, "mime_type": media_type, "ref": ref, "size": len(raw)}


def defaults(annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tool options the server's annotations imply, with MCP's defaults for absent hints
    (``readOnlyHint`` false, ``destructiveHint`` true, ``idempotentHint`` false)."""
    hints = annotations or {}
    if hints.get("readOnlyHint") is True:
        needs_approval, idempotent = False, True
    else:
        needs_approval = hints.get("destructiveHint") is not False
        idempotent = hints.get("idempotentHint") is True
    return {
        "needs_approval": needs_approval,
        "idempotent": idempotent,
        "retry": RetryPolicy(attempts=3) if idempotent else None,
    }


def mcp_tools(
    server: StdioServerParameters | str,
    *,
    prefix: str | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    include: Iterable[str] | None = None,
    trusted: bool = False,
    read_timeout: float | None = None,
) -> list[Tool]:
    """The tools of an MCP server, as loom tools for ``loom.Agent(tools=[...])``.

    Starts the server once to list its tools (and closes it); a run's calls go through one session
    per runtime, started at the first call and closed with the runtime. Each call is a journaled
    step (``tools.<name>``); the approval, idempotency and retry defaults come from the server's
    annotations (see the module docstring); MCP output is untrusted (fenced for the model) unless
    ``trusted=True``.

    Args:
        server: ``mcp.StdioServerParameters(command=..., args=[...])`` or a streamable-HTTP URL
            (``"http://127.0.0.1:8000/mcp"``).
        prefix: Put before every tool name (``prefix="time_"``: ``time_get_current_time``), against
            clashes between servers.
        overrides: Per tool (the server's name), ``Tool`` options that replace the defaults:
            ``needs_approval``, ``idempotent``, ``trusted``, ``scopes``, ``retry``, ``quota``,
            ``description``.
        include: Only these tools (the server's names); None: all.
        trusted: Mark every tool's output trusted (not fenced for the model).
        read_timeout: Seconds to wait for each answer from the server (None: no limit).

    Raises:
        UsageError: the MCP SDK is not installed, or an override or ``include`` names a tool the
            server does not list, or an override sets an unknown option.
        McpError: the server could not be started or listed.
    """
    _sdk()
    link = McpServer(server, read_timeout=read_timeout)
    try:
        definitions = run_blocking(link.read_tools())
    except Exception as exc:
        raise McpError(
            f"could not list the tools of the MCP server {link.label}: {type(exc).__name__}: {exc}. "
            "Check its command (or URL) and that it runs on its own."
        ) from None
    by_name = {d.name: d for d in definitions}
    link.listed = {name: _definition(d) for name, d in by_name.items()}
    wanted = list(by_name) if include is None else list(include)
    for what, names in (("include", wanted), ("overrides", list(overrides or {}))):
        unknown = sorted(set(names) - set(by_name))
        if unknown:
            raise UsageError(
                f"{what} names {unknown}, which the MCP server {link.label} does not list (it lists {sorted(by_name)})"
            )
    tools: list[Tool] = []
    for name in wanted:
        definition = by_name[name]
        options: dict[str, Any] = {"trusted": trusted, **defaults(link.listed[name].get("annotations"))}
        extra = dict((overrides or {}).get(name, {}))
        bad = sorted(set(extra) - OVERRIDE_KEYS)
        if bad:
            raise UsageError(f"overrides[{name!r}] sets {bad}; an override may set {sorted(OVERRIDE_KEYS)}")
        options.update(extra)
        tools.append(McpTool(link, definition, name=f"{prefix or ''}{name}", **options))
    return tools
