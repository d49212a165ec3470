"""``@tool``: a typed Python function becomes an effect with a JSON schema the model sees."""

from __future__ import annotations

import asyncio
import functools
import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypedDict, Unpack, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo

from loom_nb.errors import ToolArgumentsError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.store import off_the_loop
from loom_nb.kernel.async_bridge import run_in_thread
from loom_nb.kernel.effect_registry import Durability, EffectContext, EffectInvoker, EffectSpec
from loom_nb.messages import ToolCall, ToolSpec

ApprovalRule = bool | Callable[[ToolCall, int], bool]
_ARG_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _docs(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].strip()
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if line and not line.startswith(" "):
                in_args = False
                continue
            m = _ARG_LINE.match(line)
            if m:
                params[m.group(1)] = m.group(2).strip()
    return summary, params


class Tool:
    """A function the model may call, registered as the effect ``tools.<name>``.

    Calling the ``Tool`` object calls the function directly (handy in tests and notebooks). Run by
    an agent, a synchronous function runs on a worker thread of its own, so a slow call does not
    stop other runs or the notebook's buttons; it must not use the journal there (a ``UsageError``
    says so: make it ``async def`` for that).

    Attributes:
        name: The name the model calls it by.
        description: What the model is told it does (the docstring's first paragraph).
        fn: The function.
        args_model: The pydantic model its arguments validate against.
        needs_approval: True, or ``rule(call, turn) -> bool``: a gate parks the run before it runs.
        idempotent: Safe to run again after a crash.
        trusted: True by default: its results and error messages reach the model as they are. Set
            ``trusted=False`` for a tool whose output comes from outside (web pages, files, email,
            other people's text): its results and its exceptions' messages are then tainted, fenced
            for the model, and never allowed into a system message.
        scopes: Scopes the principal must hold.
        retry: A ``RetryPolicy`` or None.
        quota: A ``Quota`` for this tool, or None.
        timeout: Seconds one attempt may take, or None (the agent's ``tool_timeout``, else no limit).
            A call past it is abandoned with an ``EffectTimeout``: retried per ``retry`` when the
            tool is idempotent, else the step parks on an ``InDoubt`` gate for a person.
    """

    #: The flow a call runs as a child execution (``Agent.as_tool``), or None for a plain tool.
    child_flow: str | None = None

    def child_input(self, arguments: dict[str, Any], runtime: Any) -> Any:
        """The child execution's input for a call with ``arguments`` (``Agent.as_tool``; plain tools
        never run as a child). May register the child's flow on ``runtime``."""
        raise NotImplementedError(f"tool {self.name!r} does not run as a child execution")

    def child_tainted(self, outcome: Any) -> bool:
        """Whether the answer of a child execution that settled with ``outcome`` (its output)
        reaches the model tainted: as the tool is trusted, unless a subclass knows better."""
        return not self.trusted

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: ApprovalRule = False,
        idempotent: bool = False,
        trusted: bool = True,
        scopes: Iterable[str] = (),
        retry: Any = None,
        quota: Any = None,
        timeout: float | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        summary, param_docs = _docs(fn)
        self.description = description if description is not None else summary
        self.needs_approval = needs_approval
        self.idempotent = idempotent
        self.trusted = trusted
        self.scopes = frozenset(scopes)
        self.retry = retry
        self.quota = quota
        if timeout is not None and not timeout > 0:
            raise UsageError(f"tool {self.name!r}: timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self._context_param: str | None = None
        #: ``fn`` as last checked by ``invoke``, and whether it is a coroutine function (asked once).
        self._checked: tuple[Callable[..., Any], bool] | None = None
        #: ``spec`` as last built, with the name, description and argument model it was built from.
        self._spec: tuple[str, str, type[BaseModel], ToolSpec] | None = None
        self.args_model = self._build_model(param_docs)
        self.__doc__ = fn.__doc__
        self.__name__ = self.name

    def _build_model(self, param_docs: dict[str, str]) -> type[BaseModel]:
        try:
            hints = get_type_hints(self.fn)
        except Exception as exc:
            raise UsageError(f"tool {self.name!r}: cannot read its type hints ({exc})") from exc
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(self.fn).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is EffectContext:
                self._context_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UsageError(f"tool {self.name!r}: *args / **kwargs cannot be described to a model")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, FieldInfo(default=default, description=param_docs.get(pname)))
        model: type[BaseModel] = create_model(f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        return model

    @property
    def effect_id(self) -> str:
        """The effect id it is registered under: ``tools.<name>``."""
        return step_ids.tool_effect_id(self.name)

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it (name, description, JSON schema of the arguments).

        Built once and kept while ``name``, ``description`` and ``args_model`` stay the ones it was
        built from (every run of an agent asks for it; the JSON schema costs ~150 µs). A ``ToolSpec``
        is frozen: treat its ``parameters`` as read-only too.
        """
        kept = self._spec
        if kept is not None and kept[0] == self.name and kept[1] == self.description and kept[2] is self.args_model:
            return kept[3]
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        spec = ToolSpec(name=self.name, description=self.description, parameters=schema)
        self._spec = (self.name, self.description, self.args_model, spec)
        return spec

    def requires_approval(self, call: ToolCall, turn: int) -> bool:
        """Whether this call must pass an approval gate."""
        rule = self.needs_approval
        return bool(rule(call, turn)) if callable(rule) else bool(rule)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate arguments against the schema.

        Raises:
            ToolArgumentsError: with a message the model can act on.
        """
        try:
            # What ``model_validate`` runs, without its Python wrapper (this runs twice per tool call).
            model = self.args_model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(f"invalid arguments for tool {self.name!r}: {problems}") from None
        # A model that forbids extras keeps exactly its fields' values in ``__dict__``, in field order.
        return dict(model.__dict__)

    async def invoke(self, arguments: dict[str, Any], effect_context: EffectContext) -> Any:
        """The effect body: validate, then call the function: an async one on the event loop, a
        synchronous one on a worker thread (``run_in_thread``) where the journal refuses use."""
        # Validation reads its input and never changes it: a plain dict needs no copy.
        kwargs = self.validate(arguments if type(arguments) is dict else dict(arguments))
        checked = self._checked
        if checked is None or checked[0] is not self.fn:
            checked = self._checked = (self.fn, inspect.iscoroutinefunction(self.fn))
        if checked[1]:
            if self._context_param:
                kwargs[self._context_param] = effect_context
            return await self.fn(**kwargs)
        if self._context_param:
            kwargs[self._context_param] = _threadsafe_context(effect_context)
        result = await run_in_thread(functools.partial(self._off_the_loop, kwargs), name=f"loom-tool-{self.name}")
        if inspect.isawaitable(result):
            result = await result
        return result

    def _off_the_loop(self, kwargs: dict[str, Any]) -> Any:
        with off_the_loop(f"tool {self.name!r}"):
            return self.fn(**kwargs)

    def register(
        self, effects: EffectInvoker, *, default_timeout: float | None = None, owner: str | None = None
    ) -> EffectSpec:
        """Register as the effect ``tools.<name>``.

        Args:
            effects: The effect runtime.
            default_timeout: The timeout when the tool sets none (an agent's ``tool_timeout``).
            owner: Whose tool it is (``EffectSpec.owner``; ``loom.Agent`` passes its flow and
                version), so another agent's tool of the same name never replaces it; None: shared.
        """
        return self.register_effect(effects, self.invoke, timeout=self.effective_timeout(default_timeout), owner=owner)

    def effective_timeout(self, default: float | None) -> float | None:
        """The tool's own ``timeout``, else ``default``."""
        return self.timeout if self.timeout is not None else default

    def register_effect(
        self,
        effects: EffectInvoker,
        fn: Callable[..., Any],
        *,
        timeout: float | None = None,
        owner: str | None = None,
        **meta: Any,
    ) -> EffectSpec:
        """Register ``fn`` as this tool's effect ``tools.<name>`` with the tool's options (and ``meta``
        added to the spec's): how a subclass (``McpTool``) registers a body of its own. ``timeout``
        is the one the call gets (``effective_timeout``; the tool's own when None); ``owner`` as
        ``register`` has it."""
        return effects.register(
            self.effect_id,
            fn,
            idempotent=self.idempotent,
            # An idempotent tool's step rides the next commit (the next model step's): a crash
            # before it re-runs the tool; one that is not is committed before and after it runs.
            durability=Durability.DEFERRED if self.idempotent else Durability.BEFORE,
            scopes=self.scopes,
            retry=self.retry,
            quota=self.quota,
            timeout=self.effective_timeout(timeout),
            trusted=self.trusted,
            kind="tool",
            meta={"tool": self.name, **meta},
            owner=owner,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        flags = [
            f
            for f, on in (
                ("needs_approval", bool(self.needs_approval)),
                ("idempotent", self.idempotent),
                ("untrusted", not self.trusted),
            )
            if on
        ]
        return f"Tool({self.name!r}{', ' if flags else ''}{', '.join(flags)})"


class ToolOptions(TypedDict, total=False):
    """The options of ``@tool(...)``: the keyword arguments of ``Tool`` (documented there)."""

    name: str | None
    description: str | None
    needs_approval: ApprovalRule
    idempotent: bool
    trusted: bool
    scopes: Iterable[str]
    retry: Any
    quota: Any
    timeout: float | None


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, **options: Any) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function into a ``Tool``: ``@tool`` or ``@tool(needs_approval=True, ...)``.

    The docstring's first paragraph is the description; ``Args:`` lines describe parameters.
    A parameter annotated ``EffectContext`` receives the call's context and is hidden from the model.
    A tool is trusted by default; ``trusted=False`` marks its results and error messages as untrusted
    text, which the prompt guard fences for the model (use it for anything that reads the outside world).
    """
    if fn is not None:
        return Tool(fn)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, **options)

    return wrap


def _threadsafe_context(effect_context: EffectContext) -> EffectContext:
    """``effect_context`` for a synchronous tool on a worker thread: its deltas and progress
    reports are handed back to the event loop, where the observers live. (A function of its own: in
    ``Tool.invoke`` the closure would make its captured locals cells at every call, async tools' too.)"""
    loop = asyncio.get_running_loop()
    emit, report = effect_context.emit_delta, effect_context.report_progress

    def threadsafe(text: str) -> None:
        loop.call_soon_threadsafe(emit, text)

    def progress(done: float, total: float | None = None, message: str | None = None) -> None:
        loop.call_soon_threadsafe(report, done, total, message)

    return replace(effect_context, emit_delta=threadsafe, report_progress=progress)
