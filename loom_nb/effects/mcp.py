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
* idempotent tools are retried (``RetryPolicy(attempts=3)``) when the transport is lost mid-call
  (the server died, the connection closed) or the server does not answer within ``read_timeout``
  (60 s unless set); a non-idempotent call cut that way has an unknown outcome (``McpServerGone``
  is an ``OutcomeUnknownError``), so the kernel parks it on an ``InDoubt`` gate for a person to
  answer; a JSON-RPC error the server answers with is a tool error the model reads, never a restart;
* every MCP tool is untrusted (``trusted=False``): its output is fenced for the model;
* a server's question during a call (an elicitation) parks the run on an ``McpElicitation`` gate,
  answered from the notebook or code and kept across a restart (``mcp_elicit``).

The model calls each tool by its server's name with the prefix, mapped to a name providers accept
when it is not one (``mcp_names``); the server's own name is kept for the call. A call's arguments
(the model's, or a person's edit at the approval gate) are checked against the tool's input schema
before the server sees them; a result larger than ``max_result_bytes`` is cut for the model and
kept whole in the content store (``mcp_results``). The server is named everywhere by a label
without its credentials (``loom_nb.redact``); ``headers=`` and ``auth=`` carry credentials to a
streamable-HTTP server without putting them in its URL.

``overrides={"<server's tool name>": {"needs_approval": False, ...}}`` changes any of these per tool.

Lifetime: one session per server per runtime (``mcp_session``), on a thread of its own, started at
the first call, reused across turns and runs, started again after the server died, and closed with
the runtime (``Runtime.close()`` through the ring's close callbacks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from loom_nb.effects.mcp_elicit import MCP_ELICITATION_GATE, ElicitationAnswer, asker
from loom_nb.effects.mcp_names import check_prefix, model_name
from loom_nb.effects.mcp_results import DEFAULT_MAX_RESULT_BYTES, recorded_output
from loom_nb.effects.mcp_session import DEFAULT_READ_TIMEOUT, McpServer, McpSession, definition, sdk
from loom_nb.effects.retry import RetryPolicy
from loom_nb.effects.ring import EffectRing
from loom_nb.effects.tool import Tool, ToolOptions
from loom_nb.errors import McpError, ToolArgumentsError, UsageError
from loom_nb.kernel.async_bridge import run_blocking
from loom_nb.kernel.effect_registry import EffectContext, EffectInvoker, EffectResult, EffectSpec
from loom_nb.messages import ToolSpec

if TYPE_CHECKING:
    from mcp import StdioServerParameters
    from mcp.shared.dispatcher import ProgressFnT
    from mcp.types import CallToolResult
    from mcp.types import Tool as McpDefinition

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "MCP_ELICITATION_GATE",
    "OVERRIDE_KEYS",
    "ElicitationAnswer",
    "McpServer",
    "McpSession",
    "McpTool",
    "defaults",
    "mcp_tools",
    "recorded_output",
]

#: The keys an override may set, each a ``Tool`` option.
OVERRIDE_KEYS = frozenset({"needs_approval", "idempotent", "trusted", "scopes", "retry", "quota", "description"})


def _on_the_server() -> None:
    """Stands in for an MCP tool's function, which runs on the server (``McpTool.call_directly``)."""


class McpTool(Tool):
    """A tool of an MCP server, as a loom ``Tool`` (made by ``mcp_tools``).

    The model sees the server's name (with the prefix; mapped by ``mcp_names.model_name`` when
    providers would refuse it), description and input schema exactly.
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
        max_result_bytes: The size above which a result is cut for the model (``mcp_results``).
    """

    max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES

    def __init__(self, server: McpServer, definition: McpDefinition, **options: Unpack[ToolOptions]) -> None:
        options.setdefault("description", definition.description or "")
        # The function Tool would describe runs on the server: the schema is the server's (``spec``).
        super().__init__(_on_the_server, **options)
        self.server = server
        self.remote_name = definition.name
        self.input_schema: dict[str, Any] = dict(definition.input_schema)
        self._validator: Any = None  # the schema's validator, made at the first ``validate``
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
        if self._validator is None:
            jsonschema = sdk("jsonschema")  # loaded by mcp_tools already: a no-op here
            self._validator = jsonschema.validators.validator_for(self.input_schema)(self.input_schema)
        validator = self._validator
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
        server, session, store = self.server, self.server.session_for(effects), effects.content_store
        remote, label, tainted, limit = self.remote_name, server.label, not self.trusted, self.max_result_bytes

        async def invoke(arguments: dict[str, Any], context: EffectContext) -> EffectResult:
            # Checked again here: an answer at the approval gate may hold edited arguments.
            checked = self.validate(dict(arguments))
            ask = asker(context, server=label, tool=remote, redact=server.redact) if server.elicitation else None
            result = await session.call(remote, checked, ask, progress=on_the_loop(context.report_progress))
            output = recorded_output(
                result, store, tool=remote, server=label, tainted=tainted, max_bytes=limit, redact=server.redact
            )
            return EffectResult(output=output, tainted=tainted)

        return self.register_effect(
            effects, invoke, timeout=default_timeout, owner=owner, mcp_server=label, mcp_tool=remote
        )


def on_the_loop(report: Callable[[float, float | None, str | None], None]) -> ProgressFnT:
    """The SDK's progress callback for one call: it runs on the session's own loop, so each report
    is handed to ``report`` on the loop of the run that made the call (its watchers live there)."""
    loop = asyncio.get_running_loop()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        loop.call_soon_threadsafe(report, progress, total, message)

    return progress


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
    read_timeout: float | None = DEFAULT_READ_TIMEOUT,
    max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
    headers: Mapping[str, str] | None = None,
    auth: Any = None,
    secret_headers: Iterable[str] = (),
    elicitation: bool = True,
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
            clashes between servers (letters, digits, ``_`` and ``-``). A name providers would
            refuse is mapped (``mcp_names``); the server's own name is kept for the call.
        overrides: Per tool (the server's name), ``Tool`` options that replace the defaults:
            ``needs_approval``, ``idempotent``, ``trusted``, ``scopes``, ``retry``, ``quota``,
            ``description``.
        include: Only these tools (the server's names); None: all.
        trusted: Mark every tool's output trusted (not fenced for the model).
        read_timeout: Seconds to wait for each answer from the server (None: no limit); a call
            past it fails with ``McpTimeout``.
        max_result_bytes: A result larger than this is cut for the model, with a note, and kept
            whole in the content store (None: no limit).
        headers: HTTP headers sent with every request to a streamable-HTTP server
            (``{"Authorization": "Bearer ..."}``): credentials that need not be in the URL.
        auth: An ``httpx2.Auth`` for every request (the SDK's ``OAuthClientProvider`` is one).
        secret_headers: More header names whose values are secrets, beside the credential pattern
            (``loom_nb.redact.is_credential_header``); their values are scrubbed from every error
            and result.
        elicitation: Declare the elicitation capability: a server's question during a call
            (``ctx.elicit``, form mode) parks the run on an ``McpElicitation`` gate whose answer
            (``gate.answer({...})``, ``gate.decline()``, ``gate.cancel()``) goes back to the server;
            the question survives a kernel restart (``mcp_elicit``). False: not declared (a server may
            then offer fewer tools).

    Raises:
        UsageError: the MCP SDK is not installed, or an override or ``include`` names a tool the
            server does not list, or an override sets an unknown option, or ``prefix`` is not one
            providers accept, or two tools would be called by the same name, or ``headers`` /
            ``auth`` are given for a command.
        McpError: the server could not be started or listed.
    """
    sdk()
    # jsonschema (which validates each call's arguments) takes 1 to 2 s to import where its format
    # checkers' grammars are installed (Jupyter's own dependencies bring them): here, in the cell
    # that lists the tools, not hidden inside the first call before its step starts.
    sdk("jsonschema")
    link = McpServer(
        server,
        read_timeout=read_timeout,
        headers=headers,
        auth=auth,
        secret_headers=secret_headers,
        elicitation=elicitation,
    )
    check_prefix(prefix or "", link.label)
    try:
        definitions = run_blocking(link.read_tools())
    except Exception as exc:
        raise McpError(
            f"could not list the tools of the MCP server {link.label}: {link.failure(exc)}. "
            "Check its command (or URL), its credentials, and that it runs on its own."
        ) from None
    by_name = {d.name: d for d in definitions}
    link.listed = {name: definition(d) for name, d in by_name.items()}
    wanted = list(by_name) if include is None else list(include)
    for what, names in (("include", wanted), ("overrides", list(overrides or {}))):
        unknown = sorted(set(names) - set(by_name))
        if unknown:
            raise UsageError(
                f"{what} names {unknown}, which the MCP server {link.label} does not list (it lists {sorted(by_name)})"
            )
    tools: list[McpTool] = []
    for name in wanted:
        options: dict[str, Any] = {"trusted": trusted, **defaults(link.listed[name].get("annotations"))}
        extra = dict((overrides or {}).get(name, {}))
        bad = sorted(set(extra) - OVERRIDE_KEYS)
        if bad:
            raise UsageError(f"overrides[{name!r}] sets {bad}; an override may set {sorted(OVERRIDE_KEYS)}")
        options.update(extra)
        tool = McpTool(link, by_name[name], name=model_name(name, prefix or ""), **options)
        tool.max_result_bytes = max_result_bytes
        tools.append(tool)
    seen: dict[str, str] = {}
    for tool in tools:
        if tool.name in seen:
            raise UsageError(
                f"the MCP server {link.label} lists {seen[tool.name]!r} and {tool.remote_name!r}, which the model "
                f"would both call {tool.name!r}: leave one out with include=[...]"
            )
        seen[tool.name] = tool.remote_name
    return list(tools)
