"""Stops asked for at a body's next boundary: "stop after this turn" (``Engine.stop_at_boundary``).

A cancel (``Engine.cancel``) cuts the body at its next ``await``: a step in flight is recorded in
doubt when its effect is not idempotent. A stop at a boundary waits instead until the body says it
has nothing in flight (``ExecutionContext.boundary``, which the agent loop calls between turns) and
is recorded there as ``execution_cancelled``, so nothing is left in doubt.

The request is held by the process that drives (or will resume) the execution and is not
journaled: a kernel that dies before the boundary forgets it, and the recovered run goes on.
"""

from __future__ import annotations


class BoundaryStops:
    """The stops asked for and not yet taken: execution id -> the reason (or None)."""

    def __init__(self) -> None:
        self._asked: dict[str, str | None] = {}

    def ask(self, execution_id: str, reason: str | None) -> None:
        """Ask ``execution_id`` to stop at its next boundary (a second ask keeps the first reason)."""
        self._asked.setdefault(execution_id, reason)

    def asked(self, execution_id: str) -> bool:
        """True while a stop of ``execution_id`` was asked for and not yet taken."""
        return execution_id in self._asked

    def take(self, execution_id: str) -> tuple[bool, str | None]:
        """``(True, reason)`` and forget the request when one was asked for, else ``(False, None)``."""
        if execution_id not in self._asked:
            return False, None
        return True, self._asked.pop(execution_id)

    def drop(self, execution_id: str) -> None:
        """Forget the request (the execution settled another way)."""
        self._asked.pop(execution_id, None)
