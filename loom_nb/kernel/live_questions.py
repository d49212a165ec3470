"""The questions calls of this process wait on (``LiveQuestions``, ``Engine.questions``): how an
answer reaches a call that asked a person mid-call (``kernel/questions.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.kernel.gates import OpenGate

log = logging.getLogger(__name__)


@dataclass
class LiveQuestion:
    """A question a call in this process waits on.

    Attributes:
        gate: The open gate (as ``run.gates`` shows it).
        answer: Set to the validated answer (plain JSON) on the loop that waits.
        loop: The loop the waiting call runs on.
        given: True once an answer was handed over (the call commits it; a second one is refused).
    """

    gate: OpenGate
    answer: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop = field(repr=False)
    given: bool = False


class LiveQuestions:
    """The questions calls of this engine wait on, by ``(execution_id, gate_id)``."""

    def __init__(self) -> None:
        #: The questions asked and journaled (``gate_opened`` committed), by execution and gate.
        self.waiting: dict[tuple[str, str], LiveQuestion] = {}
        self.watchers: dict[tuple[str, str], list[Callable[[], None]]] = {}

    def add(self, question: LiveQuestion) -> None:
        """A call waits on ``question`` now that its gate is journaled; tell its watchers."""
        key = (question.gate.execution_id, question.gate.gate_id)
        self.waiting[key] = question
        for watcher in self.watchers.pop(key, ()):
            try:
                watcher()
            except Exception:  # a watcher (a view) that raises never breaks the call
                log.exception("a watcher of the question %s of execution %s raised", key[1], key[0])

    def remove(self, execution_id: str, gate_id: str) -> None:
        """The call no longer waits on the question (answered, cut or cancelled)."""
        self.waiting.pop((execution_id, gate_id), None)
        self.watchers.pop((execution_id, gate_id), None)

    def when_open(self, execution_id: str, gate_id: str, watcher: Callable[[], None]) -> None:
        """Call ``watcher()`` once a call waits on the question ``gate_id`` (now, if one does): a
        view that saw its ``gate_opened`` shows its card then (the call registers the question only
        after that commit, so that nothing is answered before it is journaled)."""
        if (execution_id, gate_id) in self.waiting:
            watcher()
        else:
            self.watchers.setdefault((execution_id, gate_id), []).append(watcher)

    def get(self, execution_id: str, gate_id: str) -> LiveQuestion | None:
        """The question gate ``gate_id`` of ``execution_id`` a call here waits on, else None."""
        return self.waiting.get((execution_id, gate_id))

    def open(self, execution_id: str, *, children: bool = False) -> list[OpenGate]:
        """The question gates of ``execution_id`` calls here wait on, in the order they opened
        (``children``: those of its child executions, ``<execution_id>/...``, too)."""
        under = execution_id + "/"
        return [
            q.gate
            for (eid, _), q in self.waiting.items()
            if eid == execution_id or (children and eid.startswith(under))
        ]

    def give(self, execution_id: str, gate_id: str, value: Any) -> None:
        """Hand the checked answer ``value`` to the call waiting on the gate (thread-safe)."""
        question = self.waiting.get((execution_id, gate_id))
        if question is None or question.given:
            raise UsageError(
                f"gate {gate_id!r} of execution {execution_id!r} is already answered (its call is recording "
                "the answer). A gate is answered once (run.gates lists the open ones)."
            )
        question.given = True

        def settle() -> None:
            if not question.answer.done():
                question.answer.set_result(value)

        question.loop.call_soon_threadsafe(settle)
