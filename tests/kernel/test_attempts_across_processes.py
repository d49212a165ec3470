"""An idempotent step cut in flight on every attempt counts its attempts across processes against
its retry policy: once the recorded ``step_started`` events reach the limit, recovery fails it with
``RetriesExhaustedError`` (recorded as ``step_failed``) instead of invoking it without bound."""

from __future__ import annotations

from typing import Any

import pytest

from loom_nb.effects import RetryPolicy
from loom_nb.errors import RetriesExhaustedError
from loom_nb.journal import InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.kernel import EffectContext, Engine, ExecutionContext
from loom_nb.kernel.context import DEFAULT_ATTEMPT_LIMIT
from tests.journal.support import kinds
from tests.kernel.support import make_runtime


class Killed(BaseException):
    """Stands for SIGKILL inside the effect: nothing after ``step_started`` is recorded."""


def _process(journal: InMemoryJournal, invocations: list[int], retry: RetryPolicy | None) -> Engine:
    """A fresh process on ``journal`` whose effect dies on every call (after noting the attempt)."""
    rt = make_runtime(journal)

    async def body(ctx: ExecutionContext, value: Any) -> Any:
        return await ctx.execute("fetch", value, step_id="fetch")

    def fetch(value: Any, ctx: EffectContext) -> Any:
        invocations.append(ctx.attempt)
        raise Killed

    rt.flows.register(body, "body")
    rt.effects.register("fetch", fetch, idempotent=True, retry=retry)
    return rt


@pytest.mark.parametrize(("retry", "limit"), [(RetryPolicy(attempts=4), 4), (None, DEFAULT_ATTEMPT_LIMIT)])
async def test_a_step_cut_on_every_attempt_fails_once_its_attempts_are_spent(
    retry: RetryPolicy | None, limit: int
) -> None:
    journal = InMemoryJournal()
    invocations: list[int] = []
    with pytest.raises(Killed):
        await _process(journal, invocations, retry).start("body", 1, execution_id="e")
    for _ in range(limit - 1):
        with pytest.raises(Killed):
            await _process(journal, invocations, retry).recover()
    assert invocations == list(range(1, limit + 1))

    (result,) = await _process(journal, invocations, retry).recover()
    assert invocations == list(range(1, limit + 1))  # not run again
    assert result.status == "failed"
    error = result.exception()
    assert isinstance(error, RetriesExhaustedError)
    assert f"step 'fetch' (effect 'fetch') of execution 'e' was started {limit} times" in str(error)
    assert "fork the run" in str(error)
    events = journal.read("e")
    assert kinds(events)[-2:] == ["step_failed", "execution_failed"]
    assert events[-2].data["attempt"] == limit and events[-2].data["will_retry"] is False
    # event format 2 numbers an attempt past the first only
    assert [e.data.get("attempt", 1) for e in events if e.kind == EventKind.STEP_STARTED] == list(range(1, limit + 1))
    replayed = await _process(journal, invocations, retry).replay("e")
    assert replayed.reproduced
    assert await _process(journal, invocations, retry).recover() == []


async def test_a_step_cut_fewer_times_than_its_limit_is_still_run_again() -> None:
    journal = InMemoryJournal()
    invocations: list[int] = []
    with pytest.raises(Killed):
        await _process(journal, invocations, RetryPolicy(attempts=2)).start("body", 1, execution_id="e")
    rt = make_runtime(journal)
    rt.flows.register(lambda ctx, v: ctx.execute("fetch", v, step_id="fetch"), "body")
    rt.effects.register("fetch", lambda v: v + 1, idempotent=True, retry=RetryPolicy(attempts=2))
    (result,) = await rt.recover()
    assert (result.status, result.output) == ("completed", 2)
