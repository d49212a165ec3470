"""The executions projection written with one statement per commit (``projection_rows``) ends as
if every status change were applied in turn, on every store, however the changes fall into commits."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom_nb.errors import UsageError
from loom_nb.journal import Event, EventKind, JournalStore
from loom_nb.journal.events import QUEUED_STATUS, STATUS_OF_KIND
from loom_nb.journal.store import BatchedLookup, projection_changes, projection_rows

LATER = [
    EventKind.EXECUTION_SUSPENDED,
    EventKind.EXECUTION_RESUMED,
    EventKind.EXECUTION_COMPLETED,
    EventKind.EXECUTION_FAILED,
    EventKind.EXECUTION_CANCELLED,
]
#: One execution: queued or not, then the kinds of its later status changes.
executions = st.lists(st.tuples(st.booleans(), st.lists(st.sampled_from(LATER), max_size=4)), min_size=1, max_size=4)
_example = itertools.count()


def _events(plan: list[tuple[bool, list[str]]], prefix: str) -> list[list[Event]]:
    """Each execution's events: ``execution_started``, a step event, then its status changes."""
    out = []
    for i, (queued, later) in enumerate(plan):
        eid = f"{prefix}-{i}"
        started = {"flow": f"flow-{i}", **({"queued": True} if queued else {})}
        evs = [Event(eid, 1, EventKind.EXECUTION_STARTED, None, 10.0 + i, started)]
        evs.append(Event(eid, 2, EventKind.STEP_STARTED, "s", 11.0 + i, {"effect": "e"}))
        evs += [Event(eid, 3 + k, kind, None, 20.0 + 7 * i + k, {}) for k, kind in enumerate(later)]
        out.append(evs)
    return out


def _expected(events: list[Event]) -> dict[str, tuple[str, str, float, float]]:
    """Every change applied in turn: ``{execution_id: (flow, status, created_at, updated_at)}``."""
    rows: dict[str, tuple[str, str, float, float]] = {}
    for e in events:
        status = STATUS_OF_KIND.get(e.kind)
        if status is None:
            continue
        if e.kind == EventKind.EXECUTION_STARTED:
            status = QUEUED_STATUS if e.data.get("queued") else status
            rows[e.execution_id] = (e.data["flow"], status, e.at, e.at)
        else:
            flow, _, created, _ = rows[e.execution_id]
            rows[e.execution_id] = (flow, status, created, e.at)
    return rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=executions, order=st.randoms(use_true_random=False), cuts=st.lists(st.booleans(), max_size=40))
def test_the_projection_after_grouped_commits_is_the_one_of_changes_applied_in_turn(
    journal: JournalStore, plan: list[tuple[bool, list[str]]], order: object, cuts: list[bool]
) -> None:
    per_execution = _events(plan, f"x{next(_example)}")
    # Interleave the executions (each keeps its own order), then cut the stream into commits.
    queues = [list(evs) for evs in per_execution]
    stream: list[Event] = []
    while any(queues):
        q = order.choice([q for q in queues if q])  # type: ignore[attr-defined]
        stream.append(q.pop(0))
    commits: list[list[Event]] = [[]]
    for e, cut in zip(stream, cuts + [False] * len(stream), strict=False):
        commits[-1].append(e)
        if cut:
            commits.append([])
    for batch in commits:
        if batch:
            journal.append(batch)
    for eid, (flow, status, created, updated) in _expected(stream).items():
        record = journal.get_execution(eid)
        assert record is not None, eid
        assert (record.flow, record.status) == (flow, status), eid
        assert abs(record.created_at - created) < 1e-5 and abs(record.updated_at - updated) < 1e-5, record


def test_projection_rows_folds_each_execution_to_one_row() -> None:
    events = [
        Event("a", 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f"}),
        Event("b", 7, EventKind.EXECUTION_RESUMED, None, 2.0, {}),
        Event("a", 2, EventKind.EXECUTION_SUSPENDED, None, 3.0, {}),
        Event("b", 8, EventKind.EXECUTION_COMPLETED, None, 4.0, {}),
        Event("a", 3, EventKind.EXECUTION_RESUMED, None, 5.0, {}),
    ]
    rows = projection_rows(projection_changes(events))
    assert rows.created == [("a", "f", "running", 1.0, 5.0)]
    assert rows.updated == [("b", "completed", 4.0)]


def test_get_executions_reads_the_rows_get_execution_reads(journal: JournalStore) -> None:
    """``BatchedLookup`` (DuckDB, PostgreSQL): one query gives every existing row, by stored id;
    ids that do not exist are simply absent, a surrogate pair is its character, and an id no
    journal keys (a NUL, a lone surrogate) is a ``UsageError``, as in ``get_execution``."""
    if not isinstance(journal, BatchedLookup):
        pytest.skip("the in-memory store reads each row from a dict: it offers no batched read")
    journal.append([Event(f"look-{i}", 1, EventKind.EXECUTION_STARTED, None, 5.0 + i, {"flow": "f"}) for i in range(3)])
    journal.append([Event("look-\ud83d\ude00", 1, EventKind.EXECUTION_STARTED, None, 9.0, {"flow": "g"})])
    asked = ["look-0", "look-2", "missing", "look-\ud83d\ude00", "look-0"]
    found = journal.get_executions(asked)
    assert sorted(found) == sorted(["look-0", "look-2", "look-\U0001f600"])
    for bad in ("look-\ud83d", "nul-\x00"):
        with pytest.raises(UsageError, match="execution id"):
            journal.get_executions(["look-0", bad])
    for eid in ("look-0", "look-2", "look-\ud83d\ude00"):
        record = journal.get_execution(eid)
        assert record is not None and found[record.execution_id] == record
