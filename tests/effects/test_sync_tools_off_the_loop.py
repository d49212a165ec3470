"""A synchronous tool runs on a worker thread (``async_bridge.run_in_thread``): while it blocks, other
runs on the same runtime go on; and the journal refuses to be used from that thread, with the fix."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from loom_nb.effects import EffectContext, tool
from loom_nb.journal import DuckDBJournal, EventKind, InMemoryJournal, JournalStore
from loom_nb.runtime import Runtime
from tests.effects.support import error_type, make, step_events


async def test_a_blocking_sync_tool_leaves_the_event_loop_to_other_runs(rt: Runtime) -> None:
    started, other_done = threading.Event(), threading.Event()
    span: dict[str, float] = {}

    @tool
    def slow(seconds: float) -> str:
        """Block up to ``seconds`` (2 s), or until the other run is done."""
        span["start"] = time.monotonic()
        started.set()
        finished = other_done.wait(seconds)
        span["end"] = time.monotonic()
        return "the other run finished meanwhile" if finished else "blocked alone"

    async def blocking(ctx: Any, _: Any) -> Any:
        return await ctx.execute(slow.effect_id, {"seconds": 2.0})

    async def other(ctx: Any, _: Any) -> Any:
        stamps = [await ctx.execute("tick", i, step_id=f"tick{i}") for i in range(3)]
        other_done.set()
        return stamps

    slow.register(rt.effects)
    rt.effects.register("tick", lambda _: time.monotonic())
    rt.flows.register(blocking, "blocking")
    rt.flows.register(other, "other")
    async with asyncio.timeout(10):
        first = asyncio.ensure_future(rt.start("blocking", None, execution_id="a"))
        while not started.is_set():  # the first run is inside its tool before the second starts
            await asyncio.sleep(0.01)
        second = await rt.start("other", None, execution_id="b")
        done = await first
    assert (done.status, done.output) == ("completed", "the other run finished meanwhile")
    assert second.status == "completed"
    assert all(span["start"] < stamp < span["end"] for stamp in second.output)  # its steps ran meanwhile
    assert len([e for e in rt.journal.read("b") if e.kind == EventKind.STEP_COMPLETED]) == 3


def test_a_sync_tool_runs_on_a_worker_thread_and_streams_deltas_back_to_the_loop(rt: Runtime) -> None:
    @tool
    def where(info: EffectContext) -> str:
        """Say which thread runs it."""
        info.emit_delta("hello ")
        info.emit_delta("there")
        return threading.current_thread().name

    deltas: list[str] = []

    async def flow(ctx: Any, _: Any) -> Any:
        return await ctx.execute(where.effect_id, {}, on_delta=deltas.append)

    where.register(rt.effects)
    rt.flows.register(flow, "f")
    done = rt.start_sync("f", None, execution_id="e")
    assert done.output == "loom-tool-where" != threading.current_thread().name
    assert deltas == ["hello ", "there"]


@pytest.mark.parametrize("store", [InMemoryJournal, DuckDBJournal])
def test_a_sync_tool_that_uses_the_journal_fails_with_the_fix(store: type[JournalStore]) -> None:
    rt = make(store())

    @tool
    def history(execution_id: str) -> int:
        """Count an execution's events."""
        return len(rt.journal.read(execution_id))

    @tool
    async def history_async(execution_id: str) -> int:
        """Count an execution's events, on the event loop."""
        return len(rt.journal.read(execution_id))

    async def flow(ctx: Any, _: Any) -> Any:
        counted = await ctx.execute(history_async.effect_id, {"execution_id": "e"}, step_id="async")
        try:
            await ctx.execute(history.effect_id, {"execution_id": "e"}, step_id="sync")
        except Exception as exc:
            return [counted, type(exc).__name__]
        return [counted, "no error"]

    history.register(rt.effects)
    history_async.register(rt.effects)
    rt.flows.register(flow, "f")
    done = rt.start_sync("f", None, execution_id="e")
    assert done.output == [2, "UsageError"]  # the async tool read the journal; the sync one was refused
    (failed,) = [e for e in step_events(rt, "e", "sync") if e.kind == EventKind.STEP_FAILED]
    assert error_type(failed.data) == "UsageError"
    message = failed.data["error"]["message"]
    for part in ("tool 'history'", "worker thread", "async def", "let the flow do the journal work"):
        assert part in message
    rt.close()
