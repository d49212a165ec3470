"""The event model: one row of the append-only ``events`` table.

Event kinds are persisted names (contracts): change them only with a migration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EventKind(StrEnum):
    """Every kind of event the journal holds (snake_case, past tense)."""

    EXECUTION_STARTED = "execution_started"
    STEP_STARTED = "step_started"
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    STEP_IN_DOUBT = "step_in_doubt"
    DECISION_RECORDED = "decision_recorded"
    VALUE_RECORDED = "value_recorded"
    GATE_OPENED = "gate_opened"
    GATE_RESOLVED = "gate_resolved"
    STREAM_CHUNK = "stream_chunk"
    WARNING = "warning"
    EXECUTION_SUSPENDED = "execution_suspended"
    EXECUTION_RESUMED = "execution_resumed"
    EXECUTION_COMPLETED = "execution_completed"
    EXECUTION_FAILED = "execution_failed"
    EXECUTION_CANCELLED = "execution_cancelled"


#: Event kinds that change an execution's status, and the status they set.
STATUS_OF_KIND: dict[str, str] = {
    EventKind.EXECUTION_STARTED: "running",
    EventKind.EXECUTION_SUSPENDED: "suspended",
    EventKind.EXECUTION_RESUMED: "running",
    EventKind.EXECUTION_COMPLETED: "completed",
    EventKind.EXECUTION_FAILED: "failed",
    EventKind.EXECUTION_CANCELLED: "cancelled",
}

#: The projection status of an execution submitted for a worker and not yet taken by one: its
#: ``execution_started`` carries ``"queued": true`` (``Engine.submit``). A worker taking it sets the
#: status ``running`` (``PostgresJournal.claim_queued``); the events say ``running`` throughout.
QUEUED_STATUS = "queued"

#: The statuses an execution never leaves: nothing resumes, recovers or cancels it any more.
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Event:
    """One journaled event.

    Attributes:
        execution_id: The execution the event belongs to.
        seq: Position in the execution's log, from 1, unique per execution.
        kind: An ``EventKind`` value.
        step_id: The step, gate or decision the event is about, if any.
        at: When it happened, seconds since the epoch, from the runtime's injected clock.
        data: The payload: plain JSON data (stored as canonical JSON).
        data_json: ``canonical_json(data)`` when whoever built the event computed it already (the
            stores write it instead of encoding ``data`` again), or None. Never compared, never
            persisted as a column of its own: it is the stored text of ``data``, nothing else.
    """

    execution_id: str
    seq: int
    kind: str
    step_id: str | None
    at: float
    data: dict[str, Any] = field(default_factory=dict)
    data_json: str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One row of the ``executions`` projection.

    Attributes:
        execution_id: The execution's id.
        flow: The registered name of the flow it runs.
        status: ``queued`` (submitted for a worker, not taken yet), ``running``, ``suspended``,
            ``completed``, ``failed`` or ``cancelled``.
        created_at: When it started (epoch seconds).
        updated_at: When its status last changed (epoch seconds).
    """

    execution_id: str
    flow: str
    status: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class ContentBlob:
    """Bytes for the content-addressed store, written in the same transaction as events.

    Attributes:
        digest: The tagged digest of ``data`` (``sha256:...``).
        data: The bytes.
        media_type: e.g. ``application/json``.
        tainted: True when the bytes came from an untrusted source.
    """

    digest: str
    data: bytes
    media_type: str = "application/json"
    tainted: bool = False
