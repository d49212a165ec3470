"""``Gate``: the handle on one open gate of a run (approve, refuse, edit, resolve; in doubt:
happened, run again, fail; an MCP server's question: answer, decline, cancel), and what
answering one carries along: the live ancestors of a sub-agent's gate are driven on with it
(``carry_along``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Iterable
from typing import TYPE_CHECKING, Any

from loom_nb.agent.config import (
    APPROVAL_GATE,
    ApprovalDecision,
)
from loom_nb.agent.subagent_tool import AgentTool
from loom_nb.effects.mcp_elicit import MCP_ELICITATION_GATE, ElicitationAnswer
from loom_nb.errors import UsageError
from loom_nb.journal.canonical import digest_value, to_jsonable
from loom_nb.journal.events import Event, EventKind
from loom_nb.kernel.context import IN_DOUBT_GATE, InDoubtResolution
from loom_nb.kernel.engine import ExecutionResult
from loom_nb.kernel.gates import OpenGate, answer_text
from loom_nb.runtime import Runtime

if TYPE_CHECKING:  # kept ring (tests/test_meta.py): Gate.run is the Run it belongs to; resume is its work
    from loom_nb.agent.agent import Agent
    from loom_nb.agent.run import Run


#: The events after which a child execution stands still (settled, or waiting at gates).
_PAUSING = frozenset(
    {
        EventKind.EXECUTION_SUSPENDED,
        EventKind.EXECUTION_COMPLETED,
        EventKind.EXECUTION_FAILED,
        EventKind.EXECUTION_CANCELLED,
    }
)


def live_ancestors(rt: Runtime, execution_id: str) -> list[str]:
    """The executions ``execution_id`` is a child (grandchild...) of, nearest first, down to the
    first one without a live ``Run`` here (none unless such a Run exists: no journal read then)."""
    out: list[str] = []
    at = execution_id
    while "/" in at and rt.runs.get(at.rsplit("/", 1)[0]) is not None:
        events = rt.journal.read(at)
        parent = events[0].data.get("parent") if events and isinstance(events[0].data, dict) else None
        if not isinstance(parent, dict) or parent.get("execution") != at.rsplit("/", 1)[0]:
            break  # an id with a '/' of its own, not a child execution
        at = str(parent["execution"])
        out.append(at)
    return out


def carry_along(rt: Runtime, execution_ids: Iterable[str], outcome: Any) -> None:
    """The live ``Run`` of each of ``execution_ids`` (``Runtime.runs``) that does not move follows
    what ``outcome`` (another run's driving: a task, or a script's finished result) does to it."""
    for eid in execution_ids:
        other: Run[Any] | None = rt.runs.get(eid)
        if other is None or other.moving:
            continue
        if isinstance(outcome, asyncio.Future):
            other.drive(_until_paused(rt, eid, outcome))
        else:  # a script: everything ran already
            other.refresh()


async def _until_paused(rt: Runtime, execution_id: str, driving: asyncio.Future[Any]) -> ExecutionResult:
    """The state of ``execution_id`` (a child another run's task drives) once it settles or waits
    again, or once ``driving`` ends (whichever comes first)."""
    paused: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_event(e: Event) -> None:
        if e.kind in _PAUSING and not paused.done():
            paused.set_result(None)

    stop = rt.observe(on_event, execution_id=execution_id)
    try:
        await asyncio.wait({paused, driving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop()
        paused.cancel()
    return rt.result(execution_id)


def child_agent(agent: Agent[Any], flow: str) -> Agent[Any] | None:
    """The agent behind ``agent``'s ``as_tool`` tool that runs the flow ``flow``, or None."""
    for t in agent.config.tools:
        if isinstance(t, AgentTool) and t.child_flow == flow:
            return t.agent
    return None


class Resumption:
    """The resume a gate answer scheduled on the running loop: await it for the runtime's result.

    Attributes:
        run: The run being resumed.
        gate_id: The gate answered.
    """

    def __init__(self, run: Run, gate_id: str, task: asyncio.Future[ExecutionResult]) -> None:
        self.run = run
        self.gate_id = gate_id
        self.task = task

    def __await__(self) -> Generator[Any, None, ExecutionResult]:
        return self.task.__await__()

    def done(self) -> bool:
        """True once the resume finished."""
        return self.task.done()

    def __repr__(self) -> str:
        return f"<resuming run {self.run.id} at {self.gate_id}>"


class Gate:
    """An open gate of a run: approve or refuse a tool call, or resolve an in-doubt step.

    Attributes:
        run: The run.
        gate_id: The gate.
        kind: ``AgentToolApproval``, ``InDoubt`` or a custom kind.
        payload: What the gate shows (tool, arguments... / effect, input...).
        opened_at: When it opened.
    """

    def __init__(self, run: Run, gate: OpenGate) -> None:
        self.run = run
        #: The execution the gate belongs to: the run's own, or a sub-agent's (a child execution)
        #: the run waits for.
        self.execution_id = gate.execution_id
        self.gate_id = gate.gate_id
        self.kind = gate.kind
        self.payload = gate.payload
        self.opened_at = gate.opened_at
        self.resolution: Any = None

    @property
    def tool(self) -> str | None:
        """The tool an approval gate is about."""
        return self.payload.get("tool") if isinstance(self.payload, dict) else None

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments of the call an approval gate is about."""
        args = self.payload.get("arguments") if isinstance(self.payload, dict) else None
        return dict(args) if isinstance(args, dict) else {}

    @property
    def question(self) -> str | None:
        """What an MCP server's elicitation (an ``McpElicitation`` gate) asks, else None."""
        message = self.payload.get("message") if self.kind == MCP_ELICITATION_GATE else None
        return str(message) if message is not None else None

    @property
    def requested_schema(self) -> dict[str, Any]:
        """The form an elicitation asks to be filled in (JSON Schema: flat properties), else {}."""
        schema = self.payload.get("schema") if self.kind == MCP_ELICITATION_GATE else None
        return dict(schema) if isinstance(schema, dict) else {}

    @property
    def agent(self) -> Agent[Any] | None:
        """The agent whose execution holds the gate: the run's own agent, or, for a sub-agent's
        gate, the child's (``Run.agent_of``). None when the run was attached without its agent."""
        return self.run.agent_of(self.execution_id)

    @property
    def resolved(self) -> bool:
        """True once this object resolved the gate."""
        return self.resolution is not None

    def __repr__(self) -> str:
        if self.kind == APPROVAL_GATE:
            args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
            return f"<Gate {self.gate_id}: approve {self.tool}({args})?>"
        if self.kind == MCP_ELICITATION_GATE:
            fields = ", ".join(map(str, self.payload.get("fields") or ()))
            return f"<Gate {self.gate_id}: {self.payload.get('server')} asks {self.question!r} ({fields})>"
        return f"<Gate {self.gate_id} ({self.kind})>"

    def resolve(self, payload: Any) -> Any:
        """Resolve with any payload the gate's schema accepts; returns what ``Run`` resumes with."""
        if self.resolution is not None:
            raise UsageError(
                f"gate {self.gate_id!r} of execution {self.execution_id!r} is already decided: "
                f"{answer_text(self.resolution)}, by an earlier call on this gate. A gate is answered once."
            )
        self.resolution = payload
        try:
            if self.run.runtime.questions.get(self.execution_id, self.gate_id) is not None:
                outcome = self.run.answer_question(self.execution_id, self.gate_id, payload)
            elif self.execution_id != self.run.id:
                outcome = self._resolve_in_child(payload)
            else:
                outcome = self.run.resume(self.gate_id, payload)
        except BaseException:
            self.resolution = None
            raise
        return Resumption(self.run, self.gate_id, outcome) if isinstance(outcome, asyncio.Future) else outcome

    def _resolve_in_child(self, payload: Any) -> Any:
        """Answer a sub-agent's gate: the child runs on and, once it settles, the run (its parent).

        The live ``Run`` of the child (and of any execution between, ``Run.of``) follows: it is
        ``running`` while the child runs and reads its new state once the child settles or waits
        again, so ``await child_run`` returns after an answer given through the parent."""
        rt, run = self.run.runtime, self.run
        answer = rt.answer(self.execution_id, self.gate_id, payload)  # a wrong answer raises here

        async def through_child() -> ExecutionResult:
            await rt.proceed(answer)
            return rt.result(run.id)

        outcome = run.drive(through_child())
        steps = self.execution_id[len(run.id) + 1 :].split("/")
        carry_along(rt, ["/".join([run.id, *steps[: i + 1]]) for i in range(len(steps))], outcome)
        return outcome

    def approve(self, reason: str | None = None, *, arguments: dict[str, Any] | None = None) -> Any:
        """Approve the tool call; the run resumes and runs it.

        Args:
            reason: Why (optional).
            arguments: Edited arguments to run instead of the model's (the model is told). The
                approval is bound to the digest of the exact arguments that will run.

        Raises:
            ToolArgumentsError: the edited arguments fail the tool's schema (nothing recorded).
            StaleApprovalError: the gate's arguments are not the ones this object shows.
        """
        self._expect(APPROVAL_GATE)
        if arguments is not None:
            agent = self.agent
            found = agent.config.tool(str(self.tool)) if agent is not None else None
            if found is not None:
                found.validate(arguments)
            arguments = to_jsonable(dict(arguments))
        running = arguments if arguments is not None else self.arguments
        return self.resolve(
            ApprovalDecision(approved=True, reason=reason, arguments=arguments, digest=digest_value(running))
        )

    def refuse(self, reason: str | None = None) -> Any:
        """Refuse the tool call; the model is told (with ``reason``) and the run goes on."""
        self._expect(APPROVAL_GATE)
        return self.resolve(ApprovalDecision(approved=False, reason=reason))

    def happened(self, output: Any) -> Any:
        """In doubt: the effect did happen; record ``output`` as its result."""
        self._expect(IN_DOUBT_GATE)
        return self.resolve(InDoubtResolution(action="happened", output=output))

    def run_again(self) -> Any:
        """In doubt: invoke the effect again."""
        self._expect(IN_DOUBT_GATE)
        return self.resolve(InDoubtResolution(action="run_again"))

    def fail(self, reason: str | None = None) -> Any:
        """In doubt: record the step as failed."""
        self._expect(IN_DOUBT_GATE)
        return self.resolve(InDoubtResolution(action="fail", reason=reason))

    def answer(self, content: dict[str, Any]) -> Any:
        """An MCP server's question: accept it with ``content`` (its fields by name); the server's
        call goes on with it.

        Raises:
            ResumeValidationError: ``content`` does not fit the requested schema (the message names
                the field; nothing recorded, the gate stays open).
        """
        self._expect(MCP_ELICITATION_GATE)
        return self.resolve(ElicitationAnswer(action="accept", content=to_jsonable(dict(content))))

    def decline(self) -> Any:
        """An MCP server's question: decline to answer (the server is told ``decline``)."""
        self._expect(MCP_ELICITATION_GATE)
        return self.resolve(ElicitationAnswer(action="decline"))

    def cancel(self) -> Any:
        """An MCP server's question: dismiss it (the server is told ``cancel``)."""
        self._expect(MCP_ELICITATION_GATE)
        return self.resolve(ElicitationAnswer(action="cancel"))

    def _expect(self, kind: str) -> None:
        if self.kind != kind:
            raise UsageError(f"gate {self.gate_id!r} is a {self.kind} gate, not {kind}")
