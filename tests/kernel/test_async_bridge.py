"""The one sync/async bridge: each entry point keeps its policy, and no other module runs
coroutines on its own (``asyncio.run``, threads)."""

from __future__ import annotations

import ast
import asyncio
import threading
from pathlib import Path

import pytest

from loom_nb.errors import UsageError
from loom_nb.kernel.async_bridge import LoopThread, run_blocking, run_or_schedule, run_sync

PACKAGE = Path(__file__).resolve().parents[2] / "loom_nb"
BRIDGE = PACKAGE / "kernel" / "async_bridge.py"


async def where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_outside_a_loop_every_entry_point_runs_to_completion() -> None:
    main = threading.current_thread().name
    assert run_sync(where(), sync_name="x_sync", await_hint="await x()") == main
    assert run_or_schedule(where()) == main
    assert run_blocking(where()) == main


async def test_inside_a_loop_run_sync_refuses_and_says_what_to_await() -> None:
    with pytest.raises(UsageError, match=r"start_sync\(\) cannot run inside a running event loop.*await rt.start"):
        run_sync(where(), sync_name="start_sync", await_hint="await rt.start(...)")


async def test_inside_a_loop_run_or_schedule_returns_a_task_of_this_loop() -> None:
    outcome = run_or_schedule(where())
    assert isinstance(outcome, asyncio.Task) and not outcome.done()
    assert await outcome == threading.current_thread().name


async def test_inside_a_loop_run_blocking_waits_for_a_worker_thread() -> None:
    name = run_blocking(where())
    assert name != threading.current_thread().name and name.startswith("loom-bridge")


def _only_locks(node: ast.ImportFrom) -> bool:
    return {a.name for a in node.names} <= {"Lock", "RLock"}


def _runs_coroutines_itself(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        called = (
            (node.value.id, node.attr) if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else None
        )
        if called in {("asyncio", "run"), ("asyncio", "new_event_loop")}:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: asyncio.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "threading" and _only_locks(node):
            continue  # a lock starts no thread and runs no coroutine (the journal serializes commits with one)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n in {"threading", "concurrent.futures", "ThreadPoolExecutor"} for n in names):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: imports threads")
    return found


def test_no_module_but_the_bridge_runs_coroutines_itself() -> None:
    offenders = [
        hit for path in sorted(PACKAGE.rglob("*.py")) if path != BRIDGE for hit in _runs_coroutines_itself(path)
    ]
    assert offenders == [], "use loom_nb.kernel.async_bridge (run_sync, run_or_schedule, run_blocking)"
    assert _runs_coroutines_itself(BRIDGE)  # the check sees what it looks for


async def test_a_loop_thread_runs_coroutines_on_its_own_thread_from_any_loop_or_from_sync_code() -> None:
    thread = LoopThread("loom-test-loop")
    try:
        assert await thread.run(where()) == "loom-test-loop"
        assert await asyncio.to_thread(thread.call, where()) == "loom-test-loop"
    finally:
        thread.stop()
    thread.stop()  # idempotent
    assert not thread.thread.is_alive() and thread.loop.is_closed()
