"""``InMemoryJournal``: the test fake of ``JournalStore``, with the same semantics as DuckDB's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.events import ContentBlob, Event, ExecutionRecord
from loom_nb.journal.ids import journal_id, journal_step_id
from loom_nb.journal.store import check_on_loop, projection_changes, write_error


class InMemoryJournal:
    """A journal held in Python lists; payloads round-trip through canonical JSON like the real one."""

    def __init__(self) -> None:
        self.location = ":memory:"
        self._events: dict[str, list[Event]] = {}
        self._executions: dict[str, ExecutionRecord] = {}
        self._content: dict[str, tuple[bytes, str, bool]] = {}
        self.commits = 0

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Atomically append events and content, updating the projection (refused, as DuckDB's is,
        from a synchronous tool's worker thread)."""
        check_on_loop(self.location)
        staged: dict[str, list[Event]] = {}
        for event in events:
            eid = journal_id(event.execution_id)
            log = staged.setdefault(eid, [])
            last = log[-1] if log else (self._events[eid][-1] if self._events.get(eid) else None)
            if last is not None and last.seq >= event.seq:
                cause = ValueError(f"duplicate or out-of-order seq {event.seq} for execution {eid!r}")
                raise write_error(self.location, events, cause, why="another runtime writes this execution")
            step = journal_step_id(event.step_id)
            text = canonical_json(event.data) if event.data_json is None else event.data_json
            log.append(Event(eid, event.seq, event.kind, step, event.at, json.loads(text)))
        changes = projection_changes(events)
        started = [c[0] for c in changes if c[2] is not None]
        for execution_id in started:
            if execution_id in self._executions or started.count(execution_id) > 1:
                cause = ValueError(f"duplicate execution {execution_id!r}: it was already started")
                raise write_error(self.location, events, cause, why="pick another execution id")
        for eid, new in staged.items():  # appended in place: an append costs its own events, not the log's
            self._events.setdefault(eid, []).extend(new)
        for blob in contents:
            self._content.setdefault(blob.digest, (blob.data, blob.media_type, blob.tainted))
        for execution_id, status, flow, at in changes:
            row = self._executions.get(execution_id)
            if row is None:
                self._executions[execution_id] = ExecutionRecord(execution_id, flow or "", status, at, at)
            else:
                self._executions[execution_id] = replace(row, status=status, updated_at=at)
        self.commits += 1

    def read(self, execution_id: str) -> list[Event]:
        """Return an execution's events in order (refused, as DuckDB's is, from a synchronous tool's
        worker thread)."""
        check_on_loop(self.location)
        return list(self._events.get(journal_id(execution_id), ()))

    def read_after(self, execution_id: str, seq: int) -> list[Event]:
        """Return an execution's events after ``seq``, in order (``TailReader``)."""
        return [e for e in self.read(execution_id) if e.seq > seq]

    def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Return one execution's projection row."""
        return self._executions.get(journal_id(execution_id))

    def list_executions(self, status: str | None = None) -> list[ExecutionRecord]:
        """Return executions, oldest first."""
        rows = sorted(self._executions.values(), key=lambda r: (r.created_at, r.execution_id))
        return [r for r in rows if status is None or r.status == status]

    def get_content(self, digest: str) -> bytes | None:
        """Return stored bytes, or None."""
        item = self._content.get(digest)
        return None if item is None else item[0]

    def content_info(self, digest: str) -> tuple[int, str, bool] | None:
        """Return size, media type and taint of stored content."""
        item = self._content.get(digest)
        return None if item is None else (len(item[0]), item[1], item[2])

    def all_events(self) -> list[Event]:
        """Every event of every execution (for tests and exports)."""
        return [e for log in self._events.values() for e in log]

    def close(self) -> None:
        """Nothing to release."""
