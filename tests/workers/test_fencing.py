"""Fencing of effects on the shared PostgreSQL journal: a process that lost an execution's lease
does not make its non-idempotent call, and a call in flight stops when the heartbeat finds the lease
lost (``docs/design.md``, section 5a, "Fencing").

In-process here (one engine, the lease row handed to another owner as a process that took over
would); ``test_fencing_sigstop.py`` freezes a real worker with SIGSTOP."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from loom_nb.errors import LeaseLostError
from loom_nb.journal.events import EventKind
from loom_nb.kernel import ExecutionContext, FlowRegistry
from loom_nb.runtime import Runtime
from tests import stores

pytestmark = pytest.mark.usefixtures("_postgres_server")


def _take_lease(url: str, execution_id: str, owner: str = "other-host:1:takeover") -> None:
    """Hand the execution's lease to ``owner`` (as a process that took over after expiry would)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE leases SET owner = %s, expires_at = clock_timestamp() + INTERVAL '60 seconds' "
            "WHERE execution_id = %s",
            [owner, execution_id],
        )


async def test_a_non_idempotent_call_is_not_made_once_another_process_holds_the_lease() -> None:
    url = stores.new_schema("fence")
    rt = Runtime.open(url, flows=FlowRegistry())
    charges: list[Any] = []
    entered, go = asyncio.Event(), asyncio.Event()

    async def wait(_: Any) -> str:
        entered.set()
        await go.wait()
        return "ready"

    rt.effects.register("wait", wait, idempotent=True)
    rt.effects.register("charge", lambda amount: charges.append(amount) or "charged")

    async def flow(ctx: ExecutionContext, amount: Any) -> Any:
        await ctx.execute("wait", step_id="wait")
        return await ctx.execute("charge", amount, step_id="charge")

    rt.flows.register(flow, "pay")
    try:
        run = asyncio.ensure_future(rt.start("pay", 10, execution_id="pay-1"))
        await entered.wait()
        _take_lease(url, "pay-1")  # the heartbeat (every 10 s) has not noticed: only the database knows
        go.set()
        with pytest.raises(LeaseLostError, match="pay-1"):
            await run
        assert charges == []
        last = rt.journal.read("pay-1")[-1]
        # The start is durable, so the new owner finds the call cut in flight and asks a person.
        assert (last.kind, last.step_id) == (EventKind.STEP_STARTED, "charge")
    finally:
        rt.close()


async def test_a_lost_lease_cancels_the_call_in_flight() -> None:
    url = stores.new_schema("fence_cut")
    rt = Runtime.open(url, flows=FlowRegistry())
    rt.lease_seconds = 0.6  # a heartbeat every 0.2 s
    entered = asyncio.Event()
    finished: list[str] = []
    cancelled: list[str] = []

    async def slow_charge(_: Any) -> str:
        entered.set()
        try:
            await asyncio.sleep(20)
        except asyncio.CancelledError:
            cancelled.append("charge")
            raise
        finished.append("charge")
        return "charged"

    rt.effects.register("charge", slow_charge)

    async def flow(ctx: ExecutionContext, amount: Any) -> Any:
        return await ctx.execute("charge", amount, step_id="charge")

    rt.flows.register(flow, "pay")
    try:
        run = asyncio.ensure_future(rt.start("pay", 10, execution_id="pay-2"))
        await entered.wait()
        _take_lease(url, "pay-2")
        with pytest.raises(LeaseLostError, match="pay-2"):
            await asyncio.wait_for(run, timeout=5)  # the next heartbeat, not the 20 s call
        assert (cancelled, finished) == (["charge"], [])
        assert rt.journal.read("pay-2")[-1].kind == EventKind.STEP_STARTED  # nothing written after the loss
    finally:
        rt.close()


def test_the_fencing_token_is_the_idempotency_key_and_the_attempt() -> None:
    from loom_nb.kernel.effect_registry import EffectContext, Principal

    context = EffectContext(
        execution_id="e",
        step_id="s",
        effect_id="charge",
        attempt=2,
        idempotency_key="e:s",
        principal=Principal(),
        emit_delta=print,
    )
    assert context.fencing_token == ("e:s", 2)
