"""The bridge between synchronous callers and the async core: event-loop detection and sync wrappers."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
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
    """
    if not in_running_loop():
        return asyncio.run(coro)
    coro.close()
    raise UsageError(
        f"{sync_name}() cannot run inside a running event loop (a Jupyter kernel has one): use `{await_hint}` instead"
    )
