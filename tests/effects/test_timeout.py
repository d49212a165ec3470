"""Tool timeouts (``loom_nb.effects.timeout``): ``@tool(timeout=...)`` and ``Agent(tool_timeout=...)``
abandon an attempt that runs too long with an ``EffectTimeout``: journaled as a failed attempt and
retried per the tool's policy when it is idempotent; parked on an ``InDoubt`` gate when it is not."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from loom_nb import Agent, EffectTimeout, ScriptedModel
from loom_nb.effects import RetryPolicy, tool
from loom_nb.errors import UsageError
from loom_nb.journal import EventKind
from loom_nb.runtime import Runtime
from tests.effects.support import error_type, step_events


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of a test: a synchronous tool that blocks on it returns, so no thread lingers."""
    gate = threading.Event()
    yield gate
    gate.set()


def call_once(effect_id: str, arguments: dict[str, Any]) -> Any:
    async def flow(ctx: Any, _: Any) -> Any:
        try:
            return await ctx.execute(effect_id, arguments, step_id="call")
        except EffectTimeout as exc:
            return f"timed out: {exc}"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc.__cause__}"

    return flow


async def test_an_idempotent_tool_past_its_timeout_is_retried_and_every_attempt_journaled(rt: Runtime) -> None:
    attempts: list[int] = []
    hang = asyncio.Event()  # never set: awaiting it hangs until cancelled

    @tool(idempotent=True, timeout=0.05, retry=RetryPolicy(attempts=3, jitter=0))
    async def lookup(key: str) -> str:
        """Look a key up."""
        attempts.append(1)
        if len(attempts) < 3:
            await hang.wait()
        return f"value of {key}"

    lookup.register(rt.effects)
    rt.flows.register(call_once(lookup.effect_id, {"key": "k"}), "f")
    async with asyncio.timeout(10):
        done = await rt.start("f", None, execution_id="e")
    assert (done.status, done.output, len(attempts)) == ("completed", "value of k", 3)
    events = step_events(rt, "e", "call")
    assert [e.kind for e in events] == [EventKind.STEP_STARTED, EventKind.STEP_FAILED] * 2 + [
        EventKind.STEP_STARTED,
        EventKind.STEP_COMPLETED,
    ]
    failed = [e.data for e in events if e.kind == EventKind.STEP_FAILED]
    assert [(error_type(d), d["attempt"], d["will_retry"]) for d in failed] == [
        ("EffectTimeout", 1, True),
        ("EffectTimeout", 2, True),
    ]
    message = failed[0]["error"]["message"]
    for part in ("tool 'lookup'", "step 'call'", "execution 'e'", "0.05 s", "raise the timeout"):
        assert part in message


async def test_a_non_idempotent_sync_tool_past_its_timeout_parks_on_an_in_doubt_gate(
    rt: Runtime, release: threading.Event
) -> None:
    calls: list[str] = []

    @tool(timeout=0.05, retry=RetryPolicy(attempts=3))
    def charge(amount: int) -> str:
        """Charge the card."""
        calls.append("charge")
        release.wait(5)
        return f"charged {amount}"

    charge.register(rt.effects)
    rt.flows.register(call_once(charge.effect_id, {"amount": 5}), "f")
    async with asyncio.timeout(10):
        parked = await rt.start("f", None, execution_id="e")
    assert parked.status == "suspended"
    (gate,) = parked.gates
    assert (gate.gate_id, gate.kind, gate.payload["attempt"]) == ("call:in_doubt", "InDoubt", 1)
    kinds = [e.kind for e in step_events(rt, "e", "call")]
    assert kinds == [EventKind.STEP_STARTED, EventKind.STEP_IN_DOUBT]  # never retried by itself
    assert calls == ["charge"]

    done = await rt.resume("e", "call:in_doubt", {"action": "happened", "output": "charged 5 (per the bank)"})
    assert (done.status, done.output, calls) == ("completed", "charged 5 (per the bank)", ["charge"])


async def test_a_timeout_error_the_tool_raises_itself_is_not_taken_for_the_timeout(rt: Runtime) -> None:
    @tool(idempotent=True, timeout=5)
    async def fetch(url: str) -> str:
        """Fetch a page."""
        raise TimeoutError(f"{url} did not answer")

    fetch.register(rt.effects)
    rt.flows.register(call_once(fetch.effect_id, {"url": "u"}), "f")
    await rt.start("f", None, execution_id="e")
    (failed,) = [e for e in step_events(rt, "e", "call") if e.kind == EventKind.STEP_FAILED]
    assert error_type(failed.data) == "TimeoutError"


def test_the_agent_default_applies_to_tools_without_a_timeout_of_their_own(rt: Runtime) -> None:
    @tool
    def plain(x: int) -> int:
        """Plain."""
        return x

    @tool(timeout=7)
    def own(x: int) -> int:
        """Own timeout."""
        return x

    bounded = Agent(ScriptedModel([]), tools=[plain, own], tool_timeout=2.5)
    bounded.register(rt)
    owner = bounded.config.owner
    assert (rt.effects.spec("tools.plain", owner).timeout, rt.effects.spec("tools.own", owner).timeout) == (2.5, 7)
    other = Agent(ScriptedModel([]), tools=[plain], name="other")
    other.register(rt)
    assert rt.effects.spec("tools.plain", other.config.owner).timeout is None
    assert rt.effects.spec("tools.plain", owner).timeout == 2.5  # each agent keeps its own registration


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(UsageError, match="tool 'bad': timeout must be a positive"):

        @tool(name="bad", timeout=0)
        def bad() -> None:
            """Bad."""

    with pytest.raises(UsageError, match="tool_timeout must be a positive"):
        Agent(ScriptedModel([]), tool_timeout=-1)
