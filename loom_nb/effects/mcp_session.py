"""An MCP server as ``mcp_tools`` saw it (``McpServer``) and one live connection to it per runtime
(``McpSession``), on the official MCP Python SDK, imported lazily (``sdk``).

What a call's failure means:

* the server answered with a JSON-RPC error (any code, -32000 included): ``McpError``, a tool error
  the model reads; nothing is restarted or retried, nothing is in doubt;
* the server answered with something that is not an MCP tool result: ``McpError`` (malformed);
* the transport was lost (the process died, the connection closed, an HTTP response stream broke):
  ``McpServerGone``, an ``OutcomeUnknownError`` (retried when idempotent, else in doubt); the SDK
  reports a lost connection with the same code -32000 a server may send, so a "Connection closed"
  is taken for a loss only when a second request on the same connection fails the same way;
* no answer within ``read_timeout`` (``DEFAULT_READ_TIMEOUT`` unless set): ``McpTimeout``, a
  ``McpServerGone`` naming the server and the tool.

A server's elicitation during a call (``on_elicit``) is put to the person through the run of the
one call in flight on the session (``mcp_elicit``); while they answer, loom's ``read_timeout`` clock
of that call stops (a session that declares elicitation gives the SDK's own clock no limit).

Every message names the server by its label (``loom_nb.redact``: a URL without userinfo or query
values, a program's name without its arguments), and every text from the server or the SDK is
scrubbed of the server's secrets (URL password and query values, credential arguments and headers).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import os
import sys
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from pydantic import ValidationError

from loom_nb.effects.mcp_elicit import Asker
from loom_nb.effects.ring import EffectRing
from loom_nb.errors import McpError, McpServerGone, McpTimeout, McpToolsChangedError, UsageError
from loom_nb.kernel.async_bridge import LoopThread
from loom_nb.redact import command_label, credentials_in, label_secrets, scrub, url_label, url_secrets

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters
    from mcp.client.session import ClientRequestContext
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData
    from mcp.types import Tool as McpDefinition

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'loom_nb[mcp]'"
#: Seconds to wait for each answer from a server unless ``read_timeout`` says otherwise.
DEFAULT_READ_TIMEOUT = 60.0
#: Seconds a probe (a ``tools/list``) may take to tell a lost connection from a server's own
#: "Connection closed".
PROBE_TIMEOUT = 5.0
#: The SDK's texts for a request whose connection was lost (code -32000, as a server's own error).
_LOST = ("Connection closed",)
_LOST_STREAM = "SSE stream "
#: How much of a server's error text a message quotes.
QUOTE_CHARS = 500


def sdk(module: str = "mcp") -> Any:
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


def definition(tool: McpDefinition) -> dict[str, Any]:
    """The parts of a tool's definition the model and the defaults depend on, as JSON."""
    dumped = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {key: dumped.get(key) for key in ("description", "inputSchema", "annotations")}


def quote(text: str) -> str:
    """At most ``QUOTE_CHARS`` of ``text``, marked when cut."""
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + f"… ({len(text):,} characters)"


def refusal(message: str) -> ErrorData:
    """The JSON-RPC error (invalid request) loom answers a server's request it cannot serve with."""
    types = sdk("mcp.types")
    error: ErrorData = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    return error


async def no_elicitation(context: Any, params: Any) -> ErrorData:
    """The elicitation callback of a connection that makes no call of a run (listing the tools)."""
    return refusal("loom asks nothing while it lists the tools")


@dataclass
class InFlight:
    """A call in flight on a session: its tool, how it asks a person (``mcp_elicit``), and loom's
    clock of its ``read_timeout`` (stopped while a person answers)."""

    tool: str
    ask: Asker | None
    clock: asyncio.Timeout
    timeout: float | None


class McpServer:
    """One MCP server as ``mcp_tools`` saw it: where it is, the tools it listed, one session per runtime.

    Args:
        target: ``StdioServerParameters`` or a streamable-HTTP URL.
        read_timeout: Seconds to wait for each answer (None: no limit).
        headers: HTTP headers sent with every request (a URL target only).
        auth: An ``httpx2.Auth`` (the SDK's ``OAuthClientProvider`` is one) for every request.
        secret_headers: More header names whose values are secrets, beside the credential pattern.
        elicitation: Declare the elicitation capability (form mode) to the server: its questions
            during a run's call become ``McpElicitation`` gates (``mcp_elicit``).

    Attributes:
        label: How every message, span and view names the server (``loom_nb.redact``).
        secrets: What is scrubbed from every text the server or the SDK produces.
    """

    def __init__(
        self,
        target: StdioServerParameters | str,
        *,
        read_timeout: float | None = DEFAULT_READ_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        secret_headers: Iterable[str] = (),
        elicitation: bool = True,
    ) -> None:
        if read_timeout is not None and not read_timeout > 0:
            raise UsageError(f"read_timeout must be a positive number of seconds or None, got {read_timeout!r}")
        self.target = target
        self.read_timeout = read_timeout
        self.elicitation = elicitation
        self.headers = dict(headers or {})
        self.auth = auth
        if isinstance(target, str):
            self.label = url_label(target)
            secrets = url_secrets(target)
        else:
            self.label = command_label(target.command, target.args)
            if headers or auth is not None:
                raise UsageError(
                    f"headers= and auth= are for a streamable-HTTP server; {self.label} is a command: "
                    "pass its credentials in StdioServerParameters(env={...})"
                )
            secrets = label_secrets(target.command, target.args, target.env)
        self.secrets: tuple[str, ...] = (*secrets, *credentials_in(self.headers, secret_headers))
        #: The server's definition of each tool when ``mcp_tools`` listed it, by the server's name.
        self.listed: dict[str, dict[str, Any]] = {}
        self.sessions: weakref.WeakKeyDictionary[EffectRing, McpSession] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"McpServer({self.label!r})"

    def redact(self, value: Any) -> Any:
        """``value`` (text or JSON) with the server's secrets replaced by ``<redacted>``."""
        return scrub(value, self.secrets)

    def failure(self, exc: BaseException) -> str:
        """``Type: message`` of an exception (the one inside a group of one), scrubbed and cut."""
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return quote(str(self.redact(f"{type(exc).__name__}: {exc}")))

    def client(self, **options: Any) -> Client:
        """A new SDK ``Client`` for this server (not yet entered)."""
        server: Any = self.target
        if not isinstance(server, str):
            # The server's stderr must go to a real file: inside a kernel (nbval, some front ends)
            # ``sys.stderr`` has no file descriptor, and the SDK's default would fail to start it.
            server = sdk("mcp.client.stdio").stdio_client(server, errlog=server_errlog())
        elif self.headers or self.auth is not None:
            server = self.http_transport()
        return sdk().Client(server, read_timeout_seconds=self.read_timeout, **options)  # type: ignore[no-any-return]

    @asynccontextmanager
    async def http_transport(self) -> AsyncIterator[Any]:
        """The SDK's streamable-HTTP transport on an HTTP client carrying ``headers`` and ``auth``."""
        assert isinstance(self.target, str)
        httpx2 = sdk("httpx2")  # the SDK's HTTP client library
        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults (a response stream may idle)
        transport = sdk("mcp.client.streamable_http").streamable_http_client
        async with (
            httpx2.AsyncClient(headers=self.headers, auth=self.auth, timeout=timeout) as http,
            transport(self.target, http_client=http) as streams,
        ):
            yield streams

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
        """Start the server, list its tools, close it (declaring what a run's session declares, so
        a server that offers some tools only to clients that answer elicitations lists them)."""
        options = {"elicitation_callback": no_elicitation} if self.elicitation else {}
        async with self.client(**options) as client:
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
        #: The calls in flight (on the session's loop), each with its asker and its timeout.
        self.in_flight: dict[int, InFlight] = {}

    async def call(
        self, name: str, arguments: dict[str, Any], ask: Asker | None = None, *, progress: ProgressFnT | None = None
    ) -> CallToolResult:
        """Call the server's tool ``name`` (starting the server if needed); ``ask`` answers the
        server's elicitations during the call (``mcp_elicit``; None: they are refused);
        ``progress`` is called with each progress notification the server sends for the call.

        Raises:
            McpTimeout: no answer within ``read_timeout`` (the session is closed).
            McpServerGone: the server could not be started or the transport was lost during the
                call (the session is closed: a stdio server is stopped).
            McpToolsChangedError: the tool is gone or changed since ``mcp_tools`` listed it.
            McpError: the server answered with a JSON-RPC error or a malformed result.
            UsageError: the runtime was closed.
        """
        if self.closed:
            raise UsageError(f"the MCP session with {self.server.label} is closed (its runtime was closed)")
        if self.thread is None:
            self.thread = LoopThread(f"loom-mcp {self.server.label}")
        return await self.thread.run(self.on_thread(name, arguments, ask, progress))

    async def on_thread(
        self, name: str, arguments: dict[str, Any], ask: Asker | None = None, progress: ProgressFnT | None = None
    ) -> CallToolResult:
        """``call``'s body, on the session's own loop."""
        client = await self.connected(name)
        mcp_error = sdk("mcp.shared.exceptions").MCPError
        label, timeout = self.server.label, self.server.read_timeout
        try:
            async with asyncio.timeout(timeout) as clock:
                # The SDK's own clock is a safety net behind loom's (its timeout error has a code a
                # server may send too); it cannot stop while a person answers an elicitation, so
                # then there is none.
                backstop = None if timeout is None else timeout + 5
                if self.server.elicitation:
                    backstop = math.inf
                token = id(clock)
                self.in_flight[token] = InFlight(name, ask, clock, timeout)
                try:
                    result: CallToolResult = await client.call_tool(
                        name, arguments, read_timeout_seconds=backstop, progress_callback=progress
                    )
                finally:
                    self.in_flight.pop(token, None)
                return result
        except TimeoutError:
            await self.drop()
            raise McpTimeout(
                f"the MCP server {label} did not answer the call of {name!r} within read_timeout={timeout:g} s; "
                "the session was closed (the next attempt starts it again). Raise read_timeout= if it is slow."
            ) from None
        except mcp_error as exc:
            if not await self.lost(client, exc):
                raise McpError(
                    f"the MCP server {label} answered the call of {name!r} with the JSON-RPC error "
                    f"{exc.error.code}: {quote(str(self.server.redact(exc.error.message)))}"
                ) from None
            failure: Exception = exc
        except (OSError, EOFError) as exc:
            failure = exc
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in exc.errors()[:3])
            raise McpError(
                f"the MCP server {label} answered the call of {name!r} with a malformed result (not an MCP tool "
                f"result: {exc.error_count()} problem(s), {quote(str(self.server.redact(problems)))})"
            ) from None
        await self.drop()
        raise McpServerGone(
            f"the MCP server {label} died or closed the connection during a call of {name!r} "
            f"({self.server.failure(failure)}); the session was closed and the next attempt starts it again"
        ) from None

    async def lost(self, client: Client, exc: Any) -> bool:
        """Whether an SDK error means the transport was lost (not the server's own answer)."""
        error = exc.error
        if error.code != sdk("mcp_types.jsonrpc").CONNECTION_CLOSED or error.data is not None:
            return False
        if error.message.startswith(_LOST_STREAM):
            return True  # an HTTP response stream broke: the answer, if any, is lost
        if error.message not in _LOST:
            return False
        # The SDK's own "Connection closed", or a server's? On a closed connection the next request
        # fails at once with the same error; any other outcome is an answer.
        try:
            async with asyncio.timeout(min(PROBE_TIMEOUT, self.server.read_timeout or PROBE_TIMEOUT)):
                await client.list_tools(cache_mode="bypass")
        except sdk("mcp.shared.exceptions").MCPError as probe:
            return bool(probe.error.code == error.code and probe.error.message in _LOST)
        except Exception:
            return True
        return False

    async def connected(self, name: str) -> Client:
        """The live client (connecting first if needed), after checking ``name``'s definition."""
        if self.lock is None:
            self.lock = asyncio.Lock()
        async with self.lock:
            if self.client is None:
                await self.start()
            elif self.stale:
                self.stale = False
                assert self.client is not None
                self.current = {t.name: definition(t) for t in await self.server.list_tools(self.client)}
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
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.owner = asyncio.create_task(self.own(ready, self.stop))
        self.starts += 1
        self.client = await ready
        self.current = {t.name: definition(t) for t in await self.server.list_tools(self.client)}
        self.stale = False

    async def own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        """Enter the SDK client, hand it out, and hold it until ``stop`` is set (one task, as the
        SDK's task groups require)."""
        try:
            options = {"elicitation_callback": self.on_elicit} if self.server.elicitation else {}
            async with self.server.client(message_handler=self.on_message, **options) as client:
                ready.set_result(client)
                await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(
                    McpServerGone(
                        f"could not start or reach the MCP server {self.server.label}: {self.server.failure(exc)}. "
                        "Check its command or URL."
                    )
                )
            else:
                log.debug("the MCP session with %s ended with %s", self.server.label, self.server.failure(exc))

    async def on_elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        """Answer the server's ``elicitation/create`` through the call in flight (its run's gate)."""
        schema: Any = getattr(params, "requested_schema", None)
        if schema is None:  # URL mode: the person would go to a page loom cannot follow
            return refusal(f"loom answers form elicitations only, not URL ones (client of {self.server.label})")
        calls = list(self.in_flight.values())
        call = calls[0] if len(calls) == 1 else None
        if call is None or call.ask is None:
            why = (
                f"{len(calls)} calls of this server are in flight at once, and an elicitation does not say which asks"
                if len(calls) > 1
                else "no call of a run is in flight to ask for"
            )
            return refusal(f"loom cannot put this question to a person: {why}")
        call.clock.reschedule(None)  # a person answers: loom's read_timeout measures the server, not them
        try:
            if hasattr(schema, "model_dump"):
                schema = schema.model_dump(mode="json", by_alias=True, exclude_none=True)
            answer = await call.ask(params.message, dict(schema))
        finally:
            if call.timeout is not None:
                call.clock.reschedule(asyncio.get_running_loop().time() + call.timeout)
        result: ElicitResult = sdk("mcp.types").ElicitResult(action=answer.action, content=answer.content)
        return result

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
