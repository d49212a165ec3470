"""``Cancels``: the cancels asked for and not yet recorded, and how one is recorded
(``execution_cancelled``, after putting the steps cut in flight in doubt or failed)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from loom_nb.errors import JournalWriteError, RunCancelledError, UsageError
from loom_nb.journal.events import TERMINAL_STATUSES, Event, EventKind
from loom_nb.journal.store import JournalStore
from loom_nb.kernel.effect_registry import EffectInvoker
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.history import History
from loom_nb.kernel.observers import Observers
from loom_nb.kernel.results import ExecutionResult
from loom_nb.kernel.sources import Clock

log = logging.getLogger("loom_nb")

#: How many times a cancel recorded from outside the driving process reads the history again after
#: the driver took its seqs (each retry follows a commit of the driver, so this bounds a livelock only).
_CANCEL_ATTEMPTS = 100


def cancelled_error(execution_id: str, reason: str | None) -> RunCancelledError:
    """The ``RunCancelledError`` of a cancelled execution (what awaiting it raises)."""
    why = f" ({reason})" if reason else ""
    return RunCancelledError(
        f"execution {execution_id!r} was cancelled{why}; it will not go on: start a new run to try again"
    )


class CancelHost(Protocol):
    """What ``Cancels`` needs of the engine: its journal, clock, effects and observers, and the
    history and result of an execution."""

    @property
    def journal(self) -> JournalStore:
        """Where the cancel is appended."""
        ...

    @property
    def clock(self) -> Clock:
        """The time the cancel's events carry."""
        ...

    @property
    def effects(self) -> EffectInvoker:
        """Whether a step cut in flight is idempotent (``specs_named``)."""
        ...

    @property
    def observers(self) -> Observers:
        """Who is shown the cancel's events."""
        ...

    def history(self, execution_id: str) -> History:
        """The indexed events of one execution."""
        ...

    def result(self, execution_id: str) -> ExecutionResult:
        """Where an execution stands, from the journal."""
        ...


class Cancels:
    """The cancels an engine was asked for and has not recorded yet: execution id -> reason.

    Args:
        host: The engine whose executions are cancelled.
    """

    def __init__(self, host: CancelHost) -> None:
        self._host = host
        self._asked: dict[str, str | None] = {}

    def asked(self, execution_id: str) -> bool:
        """True while a cancel of the execution was asked for and not yet recorded."""
        return execution_id in self._asked

    def ask(self, execution_id: str, reason: str | None) -> None:
        """Ask for a cancel of the execution, for ``reason``."""
        self._asked[execution_id] = reason

    def ask_unless_asked(self, execution_id: str, reason: str | None) -> None:
        """Ask for a cancel of the execution, unless one is asked for already (its reason stays)."""
        self._asked.setdefault(execution_id, reason)

    def record_elsewhere(self, execution_id: str) -> ExecutionResult:
        """Record the cancel of an execution this process does not drive (suspended, left running,
        or driven by another process: a worker holding its lease on a shared journal).

        The driver may commit between this read and this write: then the cancel's seqs are taken and
        its append is refused by the ``(execution_id, seq)`` key. The cancel then reads the history
        again and records itself after what the driver committed (the in-flight steps as they are
        now), until it lands; the driver's next commit is refused in turn and it stops. When what
        the driver committed ended the run, there is nothing to cancel any more.

        Raises:
            UsageError: the execution completed or failed before the cancel could be recorded.
            JournalWriteError: the append failed for another reason (the journal is failing).
        """
        host = self._host
        reason = self._asked.get(execution_id)
        for _ in range(_CANCEL_ATTEMPTS):
            h = host.history(execution_id)
            if h.status in TERMINAL_STATUSES:
                self._asked.pop(execution_id, None)
                if h.status == "cancelled":
                    return host.result(execution_id)
                raise UsageError(
                    f"execution {execution_id!r} {h.status} (its driver committed that first) before the cancel "
                    f"could be recorded; there is nothing to cancel: read its result with runtime.result("
                    f"{execution_id!r})"
                )
            self._asked[execution_id] = reason
            try:
                return self.record(execution_id, h)
            except JournalWriteError as failed:
                self._asked.pop(execution_id, None)
                try:
                    moved = host.history(execution_id).last_seq != h.last_seq
                except Exception:  # the journal cannot be read either: the write's error says why
                    moved = False
                if not moved:
                    raise failed from failed.__cause__  # not a seq the driver took: the journal failed
                log.info("the cancel of execution %s met a commit of its driver; reading it again", execution_id)
        error = JournalWriteError(
            f"the cancel of execution {execution_id!r} met a new commit of the process driving it "
            f"{_CANCEL_ATTEMPTS} times in a row and was not recorded: cancel it again"
        )
        error.location, error.execution_id = host.journal.location, execution_id
        raise error

    def record(self, execution_id: str, history: History | None = None) -> ExecutionResult:
        """Append ``execution_cancelled`` (after putting the steps cut in flight in doubt or failed)."""
        host = self._host
        reason = self._asked.pop(execution_id, None)
        h = history if history is not None else host.history(execution_id)
        now = host.clock.now()
        error = cancelled_error(execution_id, reason)
        events: list[Event] = []

        def add(kind: str, step_id: str | None, data: dict[str, Any]) -> None:
            events.append(Event(execution_id, h.last_seq + len(events) + 1, kind, step_id, now, data))

        for step in h.steps.values():
            if step.settled or step.in_doubt or step.attempts == 0:
                continue
            # Which owner's registration the step ran is not journaled: idempotent only when every
            # registration of its effect is (none: in doubt).
            specs = host.effects.specs_named(step.effect)
            idempotent = bool(specs) and all(spec.idempotent for spec in specs)
            if idempotent or step.retry_pending:
                data = {"effect": step.effect, "attempt": step.attempts, "will_retry": False}
                add(EventKind.STEP_FAILED, step.step_id, {**data, "error": error_to_data(error)})
            else:
                add(EventKind.STEP_IN_DOUBT, step.step_id, {"effect": step.effect, "attempt": step.attempts})
        add(EventKind.EXECUTION_CANCELLED, None, {"reason": reason})
        host.journal.append(events)
        host.observers.notify_events(events)
        return ExecutionResult(execution_id=execution_id, status="cancelled", error=error_to_data(error))
