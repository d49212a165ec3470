"""``PostgresJournal.change_marker``: what ``loom.frames()`` checks on every call to tell whether to load
the journal again. It must change on every commit of events (a new execution, an event appended to an
existing one, from another connection too), stay put without one, and cost index probes per
execution, never a scan of ``events``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loom_nb.journal import Event, EventKind
from tests import stores


@pytest.fixture
def pg(_postgres_server: str) -> Iterator[Any]:
    """A PostgresJournal on a fresh schema (dropped after)."""
    from loom_nb.journal import PostgresJournal

    url = stores.new_schema("change-marker")
    journal = PostgresJournal(url)
    yield journal
    journal.close()
    stores.drop_schemas()


def started(eid: str) -> Event:
    return Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": None})


def value(eid: str, seq: int) -> Event:
    return Event(eid, seq, EventKind.VALUE_RECORDED, f"#value:{seq}", 1.0 + seq, {"value": seq})


def test_the_marker_changes_on_every_commit_and_only_then(pg: Any) -> None:
    from loom_nb.journal import PostgresJournal

    empty = pg.change_marker()
    assert pg.change_marker() == empty
    pg.append([started("a")])
    one = pg.change_marker()
    assert one != empty and pg.change_marker() == one
    pg.append([value("a", 2)])  # an event of an existing execution, no status change
    two = pg.change_marker()
    assert two != one
    pg.append([started("b"), value("b", 2), value("a", 3)])
    three = pg.change_marker()
    assert three not in (empty, one, two)
    other = PostgresJournal(pg.url)  # another process's commit is seen too
    try:
        other.append([value("b", 3)])
        assert pg.change_marker() != three
    finally:
        other.close()


def test_an_unchanged_server_snapshot_skips_the_probes_and_a_commit_anywhere_does_not(pg: Any) -> None:
    """The snapshot shortcut: a look with no write on the server since the last one returns the last
    marker without probing; a write in another schema of the server makes it probe again (same
    marker), and a write to this journal from another connection is never missed. (The server is
    shared with other tests, whose writes also make it probe: the skip is looked for a few times.)"""
    import time

    from loom_nb.journal import PostgresJournal

    pg.append([started("a")])
    first = pg.change_marker()
    skipped = False
    for _ in range(50):
        probes = pg.marker_probes
        assert pg.change_marker() == first
        if pg.marker_probes == probes:
            skipped = True
            break
        time.sleep(0.01)
    assert skipped, "the marker was probed on every look although nothing in this journal changed"
    elsewhere = PostgresJournal(stores.new_schema("change-marker-elsewhere"))
    try:
        probes = pg.marker_probes
        elsewhere.append([started("x")])
        assert pg.change_marker() == first and pg.marker_probes == probes + 1
        other = PostgresJournal(pg.url)
        try:
            other.append([value("a", 2)])
        finally:
            other.close()
        assert pg.change_marker() != first
    finally:
        elsewhere.close()


def test_the_marker_reads_the_key_index_not_every_event(pg: Any) -> None:
    """The plan of the marker's query probes the ``(execution_id, seq)`` index; no sequential scan of
    ``events`` (the former marker, a count and sum over ``events``, scans it whole)."""
    from loom_nb.journal.postgres_store import CHANGE_MARKER_SQL

    pg.append([started(f"e{i}") for i in range(50)])
    pg.append([value(f"e{i}", s) for i in range(50) for s in range(2, 20)])
    with pg.pool.connection() as conn:
        conn.execute("ANALYZE events")
        conn.execute("ANALYZE executions")
        plan = "\n".join(row[0] for row in conn.execute(f"EXPLAIN {CHANGE_MARKER_SQL}"))
        former = "\n".join(row[0] for row in conn.execute("EXPLAIN SELECT count(*), sum(seq) FROM events"))
    assert "Seq Scan on events" in former, former  # what the test would catch
    assert "Seq Scan on events" not in plan, plan
    assert "events_pkey" in plan, plan
