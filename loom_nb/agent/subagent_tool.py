"""``AgentTool``: an agent as a tool another agent may call (``Agent.as_tool``), run as a child
execution of the caller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loom_nb.effects.tool import Tool
from loom_nb.errors import UsageError
from loom_nb.runtime import Runtime

if TYPE_CHECKING:  # the agent makes its tool; the tool only names its agent
    from loom_nb.agent.agent import Agent


class AgentTool(Tool):
    """An agent as a tool (``Agent.as_tool``): a call runs the agent as a child execution.

    Attributes:
        agent: The agent a call runs.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str,
        description: str | None,
        needs_approval: Any,
        trusted: bool | None = None,
    ) -> None:
        def ask(input: str) -> str:
            """Ask the agent.

            Args:
                input: The task or question for the agent, in plain words.
            """
            raise UsageError(f"tool {name!r} runs the agent {agent.name!r} as a child execution; an agent runs it")

        super().__init__(
            ask,
            name=name,
            description=description or f"Ask the agent {agent.name!r}.",
            needs_approval=needs_approval,
            trusted=trusted is not False,
        )
        self.agent = agent
        self.child_flow = agent.flow_name
        #: ``as_tool(trusted=True)``: the caller vouches for every answer, tainted or not.
        self.vouched = trusted is True

    def child_tainted(self, outcome: Any) -> bool:
        """Whether the child's answer reaches the calling model tainted: always for
        ``trusted=False``, never for ``trusted=True``, else when the child's result says it read
        untrusted content (``AgentResult.tainted``)."""
        if not self.trusted:
            return True
        return not self.vouched and isinstance(outcome, dict) and outcome.get("tainted") is True

    def child_input(self, arguments: dict[str, Any], runtime: Any) -> Any:
        """The child's input (the ``input`` argument); registers the agent on ``runtime`` first."""
        if isinstance(runtime, Runtime) and runtime.agents.get(self.agent.flow_name) is not self.agent:
            self.agent.register(runtime)
        return str(arguments.get("input", ""))
