"""An agent's ``tool_timeout`` end to end: what the model and the person see when a tool hangs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

import loom_nb as loom
from loom_nb.effects import RetryPolicy
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests.agent.support import calls, events


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test: a synchronous tool that blocks on it returns, so no thread lingers."""
    gate = threading.Event()
    yield gate
    gate.set()


async def test_an_idempotent_tool_that_hangs_is_retried_then_the_model_reads_the_timeout(rt: Runtime) -> None:
    hang = asyncio.Event()

    @loom.tool(idempotent=True, retry=RetryPolicy(attempts=2, jitter=0))
    async def weather(city: str) -> str:
        """The weather in a city."""
        await hang.wait()
        return "sunny"

    model = ScriptedModel([calls(("weather", {"city": "Paris"})), ModelResponse.text("The service is down.")])
    agent = loom.Agent(model, tools=[weather], tool_timeout=0.05, name="weather-agent")
    agent.register(rt)
    async with asyncio.timeout(10):
        result = await rt.start(agent.flow_name, "Weather in Paris?", execution_id="w")
    assert (result.status, result.output["output"]) == ("completed", "The service is down.")
    failed = events(rt, "w", EventKind.STEP_FAILED)
    assert [(f.data["attempt"], f.data["will_retry"]) for f in failed] == [(1, True), (2, False)]
    told = model.history[1].messages[-1]
    assert (told.role, told.is_error) == ("tool", True)
    assert "tool 'weather'" in told.text and "timeout of 0.05 s" in told.text


async def test_a_non_idempotent_tool_that_hangs_parks_the_run_for_a_person(
    rt: Runtime, release: threading.Event
) -> None:
    @loom.tool
    def transfer(amount: int) -> str:
        """Move money."""
        release.wait(5)
        return "moved"

    model = ScriptedModel([calls(("transfer", {"amount": 10})), ModelResponse.text("Done.")])
    agent = loom.Agent(model, tools=[transfer], tool_timeout=0.05, name="bank-agent")
    agent.register(rt)
    async with asyncio.timeout(10):
        parked = await rt.start(agent.flow_name, "Pay Bob 10", execution_id="b")
    assert parked.status == "suspended"
    (gate,) = parked.gates
    assert gate.kind == "InDoubt" and gate.gate_id.endswith(":in_doubt")
    assert len(model.history) == 1  # the model never read a failure: a person decides
    assert events(rt, "b", EventKind.STEP_FAILED) == []
