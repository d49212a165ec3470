"""The one bridge between synchronous callers and the async core.

Three entry points, one policy each; nothing else in the package calls ``asyncio.run`` or starts a
thread to run a coroutine:

* ``run_sync``: the ``*_sync`` wrappers (``Engine.start_sync``...). Runs the coroutine with
  ``asyncio.run``; inside a running loop it refuses with a ``UsageError`` that says what to await
  (blocking a notebook's loop would freeze it, and a task would return before the work is done).
* ``run_or_schedule``: the ``Run`` facade and ``%loom recover``. Inside a running loop (a Jupyter
  cell) it schedules the coroutine as a task on that loop and returns the task at once; outside one
  (a script) it runs it to completion and returns its result.
* ``run_blocking``: magics that must print an answer in the same cell (``%loom replay``). Runs the
  coroutine to completion and returns its result; inside a running loop it runs it on its own loop
  in a worker thread while the caller waits (so the coroutine must not touch objects bound to the
  caller's loop).
* ``LoopThread``: a long-lived resource bound to one event loop (an MCP client session, whose
  transport tasks must live on the loop that opened it) gets its own loop on a daemon thread;
  coroutines are submitted to it from any loop (``await thread.run(coro)``) or from synchronous
  code (``thread.call(coro)``), so the resource outlives the ``asyncio.run`` of one script call.
* ``run_in_thread``: a synchronous tool's body runs on a daemon thread of its own while the event
  loop goes on (other runs, the notebook's buttons); a timed-out call is abandoned there, never
  joined, so it cannot hold up the loop's shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from loom_nb.errors import UsageError

T = TypeVar("T")


def in_running_loop() -> bool:
    """True when called from inside a running asyncio event loop (e.g. a Jupyter kernel cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T], *, sync_name: str, await_hint: str) -> T:
    """Run ``coro`` with ``asyncio.run``; inside a running loop, refuse politely and say what to await.

    Args:
        coro: The coroutine (closed unrun when refused).
        sync_name: The name of the sync wrapper, for the message (``start_sync``).
        await_hint: What to write instead (``await runtime.start(...)``).

    Raises:
        UsageError: called inside a running event loop.
    """
    if not in_running_loop():
        return asyncio.run(coro)
    coro.close()
    raise UsageError(
        f"{sync_name}() cannot run inside a running event loop (a Jupyter kernel has one): use `{await_hint}` instead"
    )


def run_or_schedule(coro: Coroutine[Any, Any, T]) -> T | asyncio.Task[T]:
    """Inside a running loop, schedule ``coro`` as a task on it and return the task at once;
    otherwise run ``coro`` to completion (``asyncio.run``) and return its result (or raise)."""
    if in_running_loop():
        return asyncio.ensure_future(coro)
    return asyncio.run(coro)


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code and return its result, even inside a
    running loop (then on its own loop in a worker thread; the caller waits for it)."""
    if not in_running_loop():
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="loom-bridge") as pool:
        return pool.submit(asyncio.run, coro).result()


class LoopThread:
    """An event loop of its own on a daemon thread, for a resource that must stay on one loop.

    Args:
        name: The thread's name (shown in stack dumps).
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this thread's loop and await its result from the caller's loop
        (cancelling the caller cancels it there too)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call(self, coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
        """Run ``coro`` on this thread's loop and wait for its result from synchronous code."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        """Stop the loop and join the thread (idempotent); the caller finishes its work first."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def run_in_thread(fn: Callable[[], T], *, name: str) -> T:
    """Call ``fn()`` on a new daemon thread (with a copy of the caller's context variables) and
    await its result without blocking the event loop.

    Cancelling the awaiting task (a timeout) abandons the call: the thread runs on until ``fn``
    returns and its outcome is dropped. Python cannot stop a thread, which is why a timed-out call
    of a non-idempotent tool is in doubt. The thread is a daemon and never joined, so an abandoned
    call does not hold up ``asyncio.run``'s shutdown the way the default executor's threads would.

    Args:
        fn: The synchronous call, arguments bound.
        name: The thread's name (shown in stack dumps).
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(outcome: Callable[[], None]) -> None:
        # If the loop closed meanwhile, nobody waits for the answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(outcome)

    def work() -> None:
        try:
            result = context.run(fn)
        except BaseException as exc:  # handed to the awaiting task, as an await would raise it
            error = exc
            settle(lambda: None if future.done() else future.set_exception(error))
        else:
            settle(lambda: None if future.done() else future.set_result(result))

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


def caller_thread() -> threading.Thread:
    """The thread calling (for an owner of loop-bound state that refuses calls from another thread:
    ``Session.start``); the bridge is the one module that deals in threads."""
    return threading.current_thread()
