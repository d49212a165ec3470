"""The ``JournalStore`` protocol every journal implements, and the projection helper they share."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol, runtime_checkable

from loom_nb.errors import JournalWriteError, UsageError
from loom_nb.journal.canonical import storable_text
from loom_nb.journal.events import QUEUED_STATUS, STATUS_OF_KIND, ContentBlob, Event, EventKind, ExecutionRecord
from loom_nb.journal.hints import fix_for


@runtime_checkable
class JournalStore(Protocol):
    """An append-only event log with an ``executions`` projection and a content store.

    ``append`` is atomic: the events, the content blobs and the projection change land together
    or not at all, and are durable when it returns. When it cannot commit it raises
    ``JournalWriteError`` (built by ``write_error``) with the original error as its cause.
    """

    location: str

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Atomically append events (and content blobs), updating the executions projection."""
        ...

    def read(self, execution_id: str) -> list[Event]:
        """Return an execution's events in ``seq`` order."""
        ...

    def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Return the projection row of one execution, or None."""
        ...

    def list_executions(self, status: str | None = None) -> list[ExecutionRecord]:
        """Return executions (optionally of one status), oldest first."""
        ...

    def get_content(self, digest: str) -> bytes | None:
        """Return stored bytes by tagged digest, or None."""
        ...

    def content_info(self, digest: str) -> tuple[int, str, bool] | None:
        """Return ``(size, media_type, tainted)`` of stored content, or None."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


@runtime_checkable
class LeasingStore(Protocol):
    """A journal several processes share: each execution is driven by the one owner holding its
    lease (a row with a heartbeat and an expiry, read on the database's clock).

    The engine claims the lease before it drives an execution, renews it while it does, and
    releases it when the run suspends, ends or stops. ``(execution_id, seq)`` stays the last
    defence: two writers of one execution still cannot both commit a seq.
    """

    def claim_lease(self, execution_id: str, owner: str, ttl: float) -> bool:
        """Take the lease for ``ttl`` seconds when nobody holds it, it expired, or ``owner`` holds
        it already; False when another owner holds a live one."""
        ...

    def take_over_lease(self, execution_id: str, owner: str, dead_owner: str, ttl: float) -> bool:
        """Take the lease from ``dead_owner`` (a process known to have died) before it expires;
        False when ``dead_owner`` no longer holds it (another process took it first)."""
        ...

    def renew_lease(self, execution_id: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s lease by ``ttl`` seconds from now; False when ``owner`` lost it."""
        ...

    def release_lease(self, execution_id: str, owner: str) -> None:
        """Give the lease up (a no-op when ``owner`` does not hold it)."""
        ...

    def lease_owner(self, execution_id: str) -> str | None:
        """Who holds a live lease on the execution, or None."""
        ...


@runtime_checkable
class BatchedLookup(Protocol):
    """A store that reads many executions' projection rows in one query (the engine looks up the
    runs started together with one call instead of one query each)."""

    def get_executions(self, execution_ids: Sequence[str]) -> dict[str, ExecutionRecord]:
        """The rows of the executions that exist among ``execution_ids``, by stored id."""
        ...


@runtime_checkable
class TailReader(Protocol):
    """A store that reads an execution's events after a given ``seq`` (a follower catches up on
    what was committed since it last looked, not the whole run again)."""

    def read_after(self, execution_id: str, seq: int) -> list[Event]:
        """The execution's events with ``seq`` above ``seq``, in order."""
        ...


def projection_changes(events: Sequence[Event]) -> list[tuple[str, str, str | None, float]]:
    """Return ``(execution_id, status, flow_or_None, at)`` for each status-changing event, in order
    (ids and flow names as stored: ``storable_text``).

    ``flow`` is set only for ``execution_started`` (the row is created then). An
    ``execution_started`` with ``"queued": true`` (``Engine.submit``) creates the row ``queued``.
    """
    changes: list[tuple[str, str, str | None, float]] = []
    for event in events:
        status = STATUS_OF_KIND.get(event.kind)
        if status is None:
            continue
        flow = storable_text(str(event.data.get("flow", ""))) if event.kind == EventKind.EXECUTION_STARTED else None
        if event.kind == EventKind.EXECUTION_STARTED and event.data.get("queued") is True:
            status = QUEUED_STATUS
        changes.append((storable_text(event.execution_id), status, flow, event.at))
    return changes


class ProjectionRows(NamedTuple):
    """One commit's changes to the executions projection, one row per execution: what a store
    writes with one ``INSERT`` and one ``UPDATE`` instead of a statement per change.

    Attributes:
        created: ``(execution_id, flow, status, created_at, updated_at)`` of each execution the
            commit starts, with the last status the commit gives it.
        updated: ``(execution_id, status, updated_at)`` of each execution that existed before,
            with the last status the commit gives it.
    """

    created: list[tuple[str, str, str, float, float]]
    updated: list[tuple[str, str, float]]

    def created_columns(self, to_us: Callable[[float], int]) -> list[list[Any]]:
        """``created`` as five column lists (id, flow, status, created, updated), times through ``to_us``."""
        return [
            [r[0] for r in self.created],
            [r[1] for r in self.created],
            [r[2] for r in self.created],
            [to_us(r[3]) for r in self.created],
            [to_us(r[4]) for r in self.created],
        ]

    def updated_columns(self, to_us: Callable[[float], int]) -> list[list[Any]]:
        """``updated`` as three column lists (id, status, updated), times through ``to_us``."""
        return [[r[0] for r in self.updated], [r[1] for r in self.updated], [to_us(r[2]) for r in self.updated]]


def projection_rows(changes: Sequence[tuple[str, str, str | None, float]]) -> ProjectionRows:
    """``projection_changes`` folded to one row per execution: the same final rows as applying each
    change in order (an ``execution_started`` inserts, every later change sets status and time)."""
    created: dict[str, list[Any]] = {}
    updated: dict[str, tuple[str, str, float]] = {}
    for execution_id, status, flow, when in changes:
        row = created.get(execution_id)
        if flow is not None:
            created[execution_id] = [execution_id, flow, status, when, when]
        elif row is not None:
            row[2], row[4] = status, when
        else:
            updated[execution_id] = (execution_id, status, when)
    return ProjectionRows([(r[0], r[1], r[2], r[3], r[4]) for r in created.values()], list(updated.values()))


def write_error(location: str, events: Sequence[Event], cause: BaseException, *, why: str = "") -> JournalWriteError:
    """The ``JournalWriteError`` a store raises when an append fails (raise it ``from cause``).

    Args:
        location: The journal's file.
        events: The events that were not written (the first one names the execution and step).
        cause: The original error, named in the message (the caller raises ``from cause``).
        why: What the store knows about the cause, when more than the error says.

    The fix the message ends with follows the cause (``hints.fix_for``: free disk space for a full
    disk, a writable place for a read-only filesystem, one driver for a duplicate key...).
    """
    first = events[0] if events else None
    eid = first.execution_id if first is not None else ""
    what = (
        f"{len(events)} event(s) of execution {eid!r} (from seq {first.seq}, step {first.step_id!r})"
        if first
        else "content"
    )
    error = JournalWriteError(
        f"the journal {location} could not commit {what}: {type(cause).__name__}: {cause}"
        f"{'. ' + why if why else ''}. Nothing of this commit was written and the run stopped; it stays "
        f"'running'. {fix_for(cause, 'Fix the cause named above')}, then call runtime.recover() to run it on "
        "from its last committed event."
    )
    error.location, error.execution_id = location, eid
    return error


#: Who runs in this context off the event loop's thread (a synchronous tool's worker thread), if anyone.
_OFF_LOOP: ContextVar[str | None] = ContextVar("loom_journal_off_loop", default=None)


@contextmanager
def off_the_loop(who: str) -> Iterator[None]:
    """Mark the block as running off the event loop's thread (a synchronous tool's worker thread):
    every journal refuses to be used inside it (``check_on_loop``).

    Args:
        who: What runs there, for the message (``tool 'lookup'``).
    """
    token = _OFF_LOOP.set(who)
    try:
        yield
    finally:
        _OFF_LOOP.reset(token)


def check_on_loop(location: str) -> None:
    """Refuse a journal call made inside ``off_the_loop``: the journal's one DuckDB connection
    belongs to the event loop's thread, and a second thread using it at the same time as a commit
    fails ("connection is busy") or loses events.

    Raises:
        UsageError: called from a synchronous tool's worker thread; the message says the fix.
    """
    who = _OFF_LOOP.get()
    if who is not None:
        raise UsageError(
            f"{who} used the journal {location} from its worker thread (a synchronous tool runs off the event "
            "loop, so other runs and the notebook stay responsive), where the journal's one connection may "
            "be committing for another run. Make the tool `async def` to read the journal, or return the data "
            "and let the flow do the journal work."
        )
