"""A script finds its agent when it recovers, and an id the user typed never turns into a random one."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.errors import FlowNotFoundError, UsageError
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelResponse


class SimulatedCrash(BaseException):
    """The script's process dies mid-call."""


def build(crash: bool, log: list[str]) -> loom.Agent:
    """What a script does at its top: build the agent (the same name each time it runs)."""

    @loom.tool(idempotent=True)
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: The city.
        """
        log.append(city)
        if crash:
            raise SimulatedCrash()
        return f"{city}: 18 C"

    model = loom.ScriptedModel(
        lambda request: (
            ModelResponse.text("It is 18 C.")
            if any(m.role == "tool" for m in request.messages)
            else ModelResponse.tool_calls([("lookup", {"city": "Oslo"})])
        )
    )
    return loom.Agent(model=model, tools=[lookup], name="script-recovery")


async def test_recover_in_a_fresh_script_finds_the_agent_it_built_without_starting_it(tmp_path: Path) -> None:
    path, log = tmp_path / "j.duckdb", []
    with loom.Runtime.open(path) as rt:
        with pytest.raises(SimulatedCrash):
            await build(crash=True, log=log).start("weather?", runtime=rt, execution_id="w-1")
        assert rt.journal.get_execution("w-1").status == "running"  # type: ignore[union-attr]
    # The script runs again: it builds its agent and recovers; it never calls start or register.
    build(crash=False, log=log)
    with loom.Runtime.open(path) as rt:
        (result,) = await rt.recover()
    assert (result.status, result.output["output"]) == ("completed", "It is 18 C.")
    assert log == ["Oslo", "Oslo"]  # the idempotent tool cut in flight ran again, once


async def test_an_unregistered_agent_flow_says_how_to_register_it() -> None:
    with pytest.raises(FlowNotFoundError, match=r"loom.Agent\(name='nobody'.*agent.register\(runtime\)"):
        FlowRegistry().get("agent:nobody")


async def test_an_empty_or_blank_execution_id_is_refused_not_replaced() -> None:
    agent = build(crash=False, log=[])
    with loom.Runtime.open(":memory:") as rt:
        for bad in ("", "  ", " w-1"):
            with pytest.raises(UsageError, match="execution_id must be a non-empty string"):
                agent.start("weather?", runtime=rt, execution_id=bad, view=False)
            with pytest.raises(UsageError, match="execution_id must be a non-empty string"):
                await rt.start(agent.flow_name, "weather?", execution_id=bad)
        assert rt.executions() == []
        done = await agent.start("weather?", runtime=rt, execution_id="w-2", view=False)
        assert done.output == "It is 18 C."
        with pytest.raises(UsageError, match="new_execution_id must be a non-empty string"):
            await rt.fork("w-2", "#turn:0", new_execution_id="")
