"""``Agent``: the friendly surface over ``agent_loop`` and the runtime (its handles, ``Run`` and
``Gate``, live in ``loom_nb.agent.run``; the sub-agent tool in ``loom_nb.agent.subagent_tool``).

In a notebook (an event loop is running) ``agent.start(...)`` schedules the run as a task and
returns at once; a click calls ``gate.approve()``, which has the engine check and record the answer
at once (a wrong one raises there and the run stays suspended) and schedules the run on. In a
script (no loop) ``start`` runs until the run completes, fails or waits at a gate, and
``gate.approve()`` resumes synchronously. Both go through ``loom_nb.kernel.async_bridge``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, Literal, Unpack, overload

from loom_nb.agent.batch import Batch, map_agent
from loom_nb.agent.config import (
    DEFAULT_WARN_BYTES,
    AgentConfig,
    AgentOptions,
    AgentResult,
    Deps,
    Out,
    Routes,
    Skill,
)
from loom_nb.agent.llm import llm_effect, summarizer_effect
from loom_nb.agent.loop import agent_loop
from loom_nb.agent.output import OutputMode, OutputSpec
from loom_nb.agent.run import Run
from loom_nb.agent.session import Session
from loom_nb.agent.stalls import refuse_again
from loom_nb.agent.subagent_tool import AgentTool
from loom_nb.agent.versions import AgentVersions
from loom_nb.effects.retry import RetryPolicy
from loom_nb.effects.ring import EffectRing
from loom_nb.effects.tool import Tool
from loom_nb.errors import UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import digest_value, to_jsonable
from loom_nb.kernel.async_bridge import in_running_loop
from loom_nb.kernel.engine import require_execution_id
from loom_nb.kernel.flow_context import FlowContext
from loom_nb.kernel.flows import FLOWS
from loom_nb.providers.base import ModelProvider
from loom_nb.runtime import Runtime, default_runtime

_UNSET: Any = object()
#: ``Agent(deps_type=...)`` left out: the runs hand their tools nothing (``None``).
_NO_DEPS: Any = type(None)

#: Called with every ``Run`` that ``Agent.start`` creates (the notebook layer shows its live view).
#: Global because the notebook extension is loaded once per kernel process and shows every run
#: started in it, on whatever runtime it runs.
RUN_HOOKS: list[Callable[[Run], None]] = []


class InputIgnoredWarning(UserWarning):
    """``agent.start(input, execution_id=...)`` named an execution that exists with another input:
    the recorded input wins (a durable run never changes its input); the run returned is that one."""


class Agent(Generic[Deps, Out]):
    """An agent: a model (or routes), tools and a system prompt, run durably.

    ``Agent[Deps, Out]`` hands its tools a ``Deps`` (``None`` unless ``deps_type=`` says otherwise)
    and answers with an ``Out`` (``str`` unless ``output_type=`` says otherwise), so
    ``(await agent.start(...)).output`` is typed for mypy and editors.

    The other keyword arguments are ``AgentConfig`` fields, documented there (``AgentOptions``):
    ``system``, ``max_turns``, ``compaction``, ``claim_check``, ``needs_approval``, ``refusal_text``,
    ``skill_selector``, ``memory``, ``recall_limit``, ``stream``, ``chunk_min_chars``,
    ``parallel_tools``, ``tool_timeout``, ``max_tool_calls``, ``max_answer_chars``, ``when_cut``.

    Args:
        model: A ``ModelProvider`` (e.g. ``ScriptedModel``, ``OpenAIChat``) or a registered model
            effect id.
        tools: Tools (``@loom.tool`` functions).
        name: The agent's name; its flow is ``agent:<name>`` (a persisted contract).
        routes: Route among model effects instead of ``model``.
        models: Providers to register for ``routes``, by effect id.
        summarizer: A provider registered as ``compaction.effect_id`` (when that is not registered).
        model_retry: Retry policy of the model effect.
        skills: Skills a selector may add to a turn.
        warn_transcript_bytes: Warn once per run past this many uncompacted transcript bytes (True:
            the default limit; False: never).
        deps_type: The type of the ``deps`` a run hands its tools (``start(..., deps=...)``; a tool
            reads them as ``EffectContext.deps``). Only the type checker uses it.
        output_type: The type of the final answer: ``str`` (the default), a pydantic model, a
            dataclass, a ``TypedDict`` or ``list[...]`` of them (``loom_nb.agent.output``).
        output_mode: ``auto`` (native structured output where the provider has it, else a
            ``final_result`` tool), ``native`` or ``tool``.
        output_retries: Failed validations sent back to the model before ``OutputValidationError``.
    """

    @overload
    def __init__(
        self: Agent[None, str],
        model: ModelProvider | str | None = None,
        *,
        tools: Sequence[Tool] = (),
        name: str = "agent",
        routes: Routes | None = None,
        models: Mapping[str, ModelProvider] | None = None,
        summarizer: ModelProvider | None = None,
        model_retry: RetryPolicy | None = _UNSET,
        skills: Sequence[Skill] = (),
        warn_transcript_bytes: int | bool = DEFAULT_WARN_BYTES,
        output_mode: OutputMode = "auto",
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[None, Out],
        model: ModelProvider | str | None = None,
        *,
        tools: Sequence[Tool] = (),
        name: str = "agent",
        routes: Routes | None = None,
        models: Mapping[str, ModelProvider] | None = None,
        summarizer: ModelProvider | None = None,
        model_retry: RetryPolicy | None = _UNSET,
        skills: Sequence[Skill] = (),
        warn_transcript_bytes: int | bool = DEFAULT_WARN_BYTES,
        output_type: type[Out],
        output_mode: OutputMode = "auto",
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[Deps, str],
        model: ModelProvider | str | None = None,
        *,
        tools: Sequence[Tool] = (),
        name: str = "agent",
        routes: Routes | None = None,
        models: Mapping[str, ModelProvider] | None = None,
        summarizer: ModelProvider | None = None,
        model_retry: RetryPolicy | None = _UNSET,
        skills: Sequence[Skill] = (),
        warn_transcript_bytes: int | bool = DEFAULT_WARN_BYTES,
        deps_type: type[Deps],
        output_mode: OutputMode = "auto",
        **options: Unpack[AgentOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[Deps, Out],
        model: ModelProvider | str | None = None,
        *,
        tools: Sequence[Tool] = (),
        name: str = "agent",
        routes: Routes | None = None,
        models: Mapping[str, ModelProvider] | None = None,
        summarizer: ModelProvider | None = None,
        model_retry: RetryPolicy | None = _UNSET,
        skills: Sequence[Skill] = (),
        warn_transcript_bytes: int | bool = DEFAULT_WARN_BYTES,
        deps_type: type[Deps],
        output_type: type[Out],
        output_mode: OutputMode = "auto",
        **options: Unpack[AgentOptions],
    ) -> None: ...

    def __init__(
        self,
        model: ModelProvider | str | None = None,
        *,
        tools: Sequence[Tool] = (),
        name: str = "agent",
        routes: Routes | None = None,
        models: Mapping[str, ModelProvider] | None = None,
        summarizer: ModelProvider | None = None,
        model_retry: RetryPolicy | None = _UNSET,
        skills: Sequence[Skill] = (),
        warn_transcript_bytes: int | bool = DEFAULT_WARN_BYTES,
        deps_type: Any = _NO_DEPS,
        output_type: Any = str,
        output_mode: OutputMode = "auto",
        **options: Unpack[AgentOptions],
    ) -> None:
        for t in tools:
            if not isinstance(t, Tool):
                raise UsageError(f"{t!r} is not a tool: decorate the function with @loom.tool")
        self.name = name
        self.flow_name = step_ids.agent_flow_name(name)
        #: The type of what runs hand their tools (``start(..., deps=...)``): for the type checker.
        self.deps_type: type[Deps] = deps_type
        self._providers: dict[str, ModelProvider] = dict(models or {})
        model_id: str | None = None
        if isinstance(model, str):
            model_id = model
        elif model is not None:
            model_id = step_ids.model_effect_id(name)
            self._providers[model_id] = model
        self._summarizer = summarizer
        self.model_retry = RetryPolicy(attempts=3) if model_retry is _UNSET else model_retry
        if warn_transcript_bytes is True:
            warn_transcript_bytes = DEFAULT_WARN_BYTES
        config = AgentConfig(
            model=model_id,
            routes=routes,
            tools=tuple(tools),
            skills=tuple(skills),
            warn_transcript_bytes=warn_transcript_bytes,
            output_type=output_type,
            output_mode=_resolve_mode(output_mode, self._providers.get(model_id or "")),
            **options,
        )
        self._versions = AgentVersions(config, self.flow_name)
        self._body = self._run_body
        # The process-wide registry: any runtime's ``recover()`` finds the latest agent built under
        # this flow name (a re-run cell replaces it), as a restarted kernel or script expects.
        FLOWS.register(self._body, self.flow_name)

    def __repr__(self) -> str:
        tools = ", ".join(t.name for t in self.config.tools)
        return f"Agent({self.name!r}, model={self.config.model!r}, tools=[{tools}])"

    @property
    def config(self) -> AgentConfig:
        """The configuration new runs use (the newest patch's, if any: see ``patch``)."""
        return self._versions.latest

    @config.setter
    def config(self, config: AgentConfig) -> None:
        self._versions.replace_latest(config)

    @property
    def model(self) -> ModelProvider | None:
        """The provider behind ``model``, if one was given."""
        return self._providers.get(self.config.model or "")

    @property
    def providers(self) -> Mapping[str, ModelProvider]:
        """Every provider this agent registers, by model effect id (``model``, ``models=``)."""
        return MappingProxyType(self._providers)

    def register(self, runtime: Runtime) -> None:
        """Register this agent's effects and flow on ``runtime`` (``start`` does it for you).

        Every version's model, compaction and tool effects are registered as that version's own
        (``AgentConfig.owner``): another agent's tool of the same name, a sub-agent's or an MCP
        server's never replaces them, and a run recorded before a ``patch`` keeps its version's bodies.
        """
        effects = runtime.effects
        for config in self._versions.configs:
            owner = config.owner
            for effect_id, provider in self._providers.items():
                effects.register(
                    effect_id, llm_effect(provider), kind="model", idempotent=True, retry=self.model_retry, owner=owner
                )
            compaction = config.compaction
            if compaction is not None and self._summarizer is not None:
                effects.register(
                    compaction.effect_id,
                    summarizer_effect(self._summarizer),
                    kind="summarizer",
                    idempotent=True,
                    retry=self.model_retry,
                    owner=owner,
                )
            for t in config.tools:
                t.register(effects, default_timeout=config.tool_timeout, owner=owner)
            if config.claim_check is not None:
                if not isinstance(effects, EffectRing):
                    raise UsageError("claim_check needs loom.Runtime (the effect ring), not the bare kernel runtime")
                effects.add_claim_check(config.claim_check, owner=owner)
        runtime.flows.register(self._body, self.flow_name)
        runtime.check_hooks[self.flow_name] = self._versions.check_hook
        runtime.agents[self.flow_name] = self

    async def _run_body(self, ctx: FlowContext, input: Any) -> AgentResult[Any]:
        # Found by flow name in the process-wide registry (a script's ``rt.recover()`` after a crash,
        # before anything called ``start``): the runtime gets this agent's effects on first use.
        runtime = ctx.runtime
        if isinstance(runtime, Runtime) and runtime.agents.get(self.flow_name) is not self:
            self.register(runtime)
        return await agent_loop(ctx, self._versions.for_run(ctx), input)

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: Any = False,
        trusted: bool | None = None,
    ) -> AgentTool:
        """This agent as a tool another agent may call: each call runs it as a CHILD execution.

        The child (id ``<parent run>/#turn:<i>:tool:<j>``) has its own steps, journaled, and its
        ``execution_started`` names the parent's step. Its approval gates park the parent too (the
        parent's ``gates`` and ``%loom pending`` show them); answering them runs the child on and,
        once it settles, the parent with the child's output as the tool's result. Recovery, replay
        and cancel reach the child. The model passes one argument, ``input`` (the task, as text).

        Args:
            name: The tool's name (default: the agent's name).
            description: What the calling model is told it does.
            needs_approval: As for ``loom.tool``: a gate before the child starts.
            trusted: None (the default): the answer is tainted, and fenced for the calling model,
                when the child's conversation held untrusted content (``AgentResult.tainted``);
                True: never (the caller vouches for it); False: always.
        """
        return AgentTool(
            self, name=name or self.name, description=description, needs_approval=needs_approval, trusted=trusted
        )

    def patch(
        self, change: str, *, tools: Sequence[Tool] | None = None, **options: Unpack[AgentOptions]
    ) -> Agent[Deps, Out]:
        """Change the agent for new runs only, behind the patch ``change`` (``ctx.patched``'s meaning).

        New runs record the marker ``#patched:<change>`` at their start and use the agent with
        ``tools`` and ``options`` (``system``, ``max_turns``...) replaced; a run recorded before the
        patch replays and resumes with the configuration it started with, so it does not diverge.
        ``runtime.check()`` lists the recorded runs a change made without a patch would break.
        Returns the agent (patches chain: each builds on the one before).

        Raises:
            UsageError: ``change`` is empty or was used by an earlier patch of this agent.
        """
        if not isinstance(change, str) or not change.strip() or change != change.strip():
            raise UsageError(f"agent.patch needs a change name such as 'short-prompt', got {change!r}")
        updates: dict[str, Any] = dict(options)
        if tools is not None:
            for t in tools:
                if not isinstance(t, Tool):
                    raise UsageError(f"{t!r} is not a tool: decorate the function with @loom.tool")
            updates["tools"] = tuple(tools)
        try:
            self._versions.add(change, **updates)
        except ValueError:
            raise UsageError(
                f"agent {self.name!r} already has the patch {change!r}: give each change its own name"
            ) from None
        return self

    def session(self, session_id: str, *, runtime: Runtime | None = None) -> Session:
        """The session ``session_id`` of this agent: consecutive runs that continue one conversation
        (``session.start(message)``). Found again from the journal after a kernel restart."""
        return Session(self, session_id, runtime=runtime)

    @property
    def output(self) -> OutputSpec[Out] | None:
        """How the typed answer is asked for and checked (None for a text agent)."""
        return self.config.output

    def start(
        self,
        input: Any,
        *,
        runtime: Runtime | None = None,
        execution_id: str | None = None,
        view: bool = True,
        session: Session | str | None = None,
        deps: Deps | None = None,
    ) -> Run[Out]:
        """Start a run of this agent on ``input`` (the user's message) and return its ``Run``.

        ``deps`` is handed to the run's tools (a parameter annotated ``EffectContext`` reads it as
        ``.deps``; a sub-agent's run gets its caller's). It lives in this process only, never in
        the journal: after a kernel restart give it again with ``attach(id, deps=...)`` before the
        run resumes or recovers, or its tools see ``None``.

        With ``session`` (a ``Session`` or a session id) the run is the session's next one and
        continues its conversation (``Session.start``).

        In a notebook this returns at once (the run is a task on the kernel's loop); in a script it
        returns when the run completes, fails or waits at a gate. An existing ``execution_id``
        returns this kernel's one ``Run`` of that execution (the same object every time, as the
        journal has it; ``runtime.recover()`` continues one a crash left running); its recorded
        input wins (``InputIgnoredWarning`` when ``input`` differs). ``view=False`` shows no live
        view in a notebook (for many runs in one cell).

        Raises:
            UsageError: ``execution_id`` exists and runs another flow (another agent).
        """
        if session is not None:
            if execution_id is not None:
                raise UsageError("a session run's execution id is derived from the session: leave execution_id out")
            if isinstance(session, str):
                session = self.session(session, runtime=runtime)
            return session.start(input, view=view, deps=deps)
        rt = runtime or default_runtime()
        self.register(rt)
        # The same work stopped here by a failed commit and still running: recover it, never twice.
        refuse_again(rt, self.flow_name, input, execution_id)
        if execution_id is None:
            eid = rt.ids.new_id()
        else:
            eid = require_execution_id(execution_id, "execution_id")
            if rt.journal.get_execution(eid) is not None:
                if deps is not None:
                    rt.deps[eid] = deps
                return self._existing(rt, eid, input, view=view)
        if deps is not None:
            rt.deps[eid] = deps
        run: Run[Out] = Run.of(rt, eid, agent=self)
        for hook in list(RUN_HOOKS) if view else ():
            hook(run)
        run.drive(rt.start(self.flow_name, input, execution_id=run.id))
        return run

    def submit(
        self, input: Any, execution_id: str | None = None, *, runtime: Runtime | None = None, view: bool = True
    ) -> Run[Out]:
        """Record a run of this agent on ``input`` for a worker (``loom-nb worker``) to drive, and
        return its ``Run`` (status ``queued`` until a worker takes it); nothing runs here. The
        runtime must be on a shared PostgreSQL journal for a worker to see it. An existing
        ``execution_id`` returns that run as the journal has it. In a notebook (``view=True``) the
        run's live view is shown and follows the worker from the journal (``Run.follow``).

        Raises:
            UsageError: ``execution_id`` exists and runs another flow (another agent).
        """
        rt = runtime or default_runtime()
        self.register(rt)
        eid = rt.ids.new_id() if execution_id is None else require_execution_id(execution_id, "execution_id")
        rt.submit(self.flow_name, input, execution_id=eid)
        run: Run[Out] = Run.of(rt, eid, agent=self)
        run.refresh()
        if view and in_running_loop():
            for hook in list(RUN_HOOKS):
                hook(run)
            run.follow()
        return run

    def _existing(self, rt: Runtime, eid: str, input: Any, *, view: bool) -> Run[Out]:
        """``start`` on an execution id the journal holds: this kernel's one ``Run`` of it."""
        record = rt.journal.get_execution(eid)
        assert record is not None
        if record.flow != self.flow_name:
            raise UsageError(
                f"execution {eid!r} already exists and runs flow {record.flow!r}, not {self.flow_name!r} "
                f"(agent {self.name!r}): pick another execution_id, or look at it with %loom show {eid}"
            )
        recorded = rt.history(eid).input
        if digest_value(to_jsonable(input)) != digest_value(recorded):
            warnings.warn(
                InputIgnoredWarning(
                    f"execution {eid!r} already exists with the input {recorded!r}; the input given now "
                    f"({to_jsonable(input)!r}) is ignored and the recorded run is returned: pick another "
                    "execution_id to start a new run"
                ),
                stacklevel=3,
            )
        run: Run[Out] = Run.of(rt, eid, agent=self)
        for hook in list(RUN_HOOKS) if view else ():
            hook(run)
        return run

    async def run(
        self,
        input: Any,
        *,
        runtime: Runtime | None = None,
        execution_id: str | None = None,
        session: Session | str | None = None,
        deps: Deps | None = None,
    ) -> AgentResult[Out]:
        """Start a run (a session's next one with ``session``) and wait for its result (approvals
        must come from elsewhere); ``deps`` as for ``start``."""
        return await self.start(input, runtime=runtime, execution_id=execution_id, session=session, deps=deps)

    def map(
        self,
        inputs: Iterable[Any],
        concurrency: int = 16,
        ids: Sequence[str] | None = None,
        *,
        runtime: Runtime | None = None,
        view: bool = True,
        progress: bool = True,
        on: Literal["here", "workers"] = "here",
        deps: Deps | None = None,
    ) -> Batch:
        """Run this agent on many inputs, at most ``concurrency`` runs moving at once, and return
        the ``Batch``.

        Each input is its own execution, ``map:<name>:<16 hex of the input's digest>`` unless
        ``ids`` (one per input) are given. Resumable: the same call again (after a crash or a
        kernel restart) skips the items the journal holds finished or waiting at a gate, recovers
        those a crash left running, and starts the rest. A failed item never stops the others;
        resumes after a gate's answer wait for a slot too.

        In a notebook this returns at once (a progress bar and every open gate in one view, with
        Approve all / Refuse all, when the extension is loaded; ``view=False``: none). In a script
        it returns when no item moves, after printing a progress line and the results' DataFrame
        (``progress=False``: silent). ``batch.frame()`` gives the DataFrame.

        ``on="workers"``: every input is submitted (``submit``) for the workers of the shared
        journal (``loom-nb worker``) and nothing runs here; the batch returns at once with its items
        ``queued`` (``batch.refresh()`` reads where they stand).

        ``deps`` is handed to every item's tools, as ``start``'s (not with ``on="workers"``: they
        live in this process only).

        Raises:
            UsageError: ``concurrency`` below 1, ``ids`` not one distinct id per input, or an id
                whose execution runs another flow.
        """
        return map_agent(
            self,
            inputs,
            concurrency=concurrency,
            ids=ids,
            runtime=runtime,
            view=view,
            progress=progress,
            on=on,
            deps=deps,
        )

    def attach(self, execution_id: str, *, runtime: Runtime | None = None, deps: Deps | None = None) -> Run[Out]:
        """This kernel's ``Run`` of an existing execution (e.g. after a kernel restart); ``deps``:
        what its tools get from now on (``start``'s ``deps`` are not journaled).

        Raises:
            UsageError: no such execution in the journal.
        """
        rt = runtime or default_runtime()
        self.register(rt)
        run: Run[Out] = Run.attach(rt, execution_id, agent=self)
        if deps is not None:
            rt.deps[run.id] = deps
        return run


def _resolve_mode(mode: OutputMode, provider: ModelProvider | None) -> OutputMode:
    """``auto``: native structured output when the provider has it (``native_output``), else a tool."""
    if mode != "auto":
        return mode
    return "native" if getattr(provider, "native_output", False) is True else "tool"
