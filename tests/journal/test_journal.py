"""The journal: canonical JSON, tagged digests, and one contract both stores must pass."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import duckdb
import pytest
from pydantic import BaseModel

from loom_nb.errors import JournalError, UsageError
from loom_nb.journal import (
    ContentBlob,
    DuckDBJournal,
    Event,
    EventKind,
    JournalStore,
    canonical_json,
    digest_bytes,
    digest_value,
    to_jsonable,
)
from loom_nb.journal.migrations import MIGRATIONS
from tests.journal.support import shape


# -- canonical JSON and digests ----------------------------------------------------------------------
def test_canonical_json_sorts_keys_at_every_depth_and_is_compact() -> None:
    value = {"b": 1, "a": {"z": [3, {"y": 2, "x": 1}], "c": None}}
    assert canonical_json(value) == '{"a":{"c":null,"z":[3,{"x":1,"y":2}]},"b":1}'


def test_canonical_json_keeps_unicode_as_is() -> None:
    assert canonical_json({"k": "héllo ✓"}) == '{"k":"héllo ✓"}'


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_json_refuses_non_finite_floats(bad: float) -> None:
    with pytest.raises(UsageError, match="non-finite"):
        canonical_json({"x": [1, bad]})


def test_canonical_json_of_pydantic_models_and_dataclasses() -> None:
    class Point(BaseModel):
        y: int
        x: int

    @dataclasses.dataclass
    class Box:
        label: str
        corner: Point

    assert canonical_json(Point(y=2, x=1)) == '{"x":1,"y":2}'
    assert canonical_json(Box("b", Point(y=2, x=1))) == '{"corner":{"x":1,"y":2},"label":"b"}'
    assert to_jsonable([Box("b", Point(y=2, x=1))]) == [{"corner": {"x": 1, "y": 2}, "label": "b"}]


def test_canonical_json_refuses_bytes_and_arbitrary_objects_with_the_fix() -> None:
    with pytest.raises(UsageError, match="put_content"):
        canonical_json({"raw": b"\x00"})
    with pytest.raises(UsageError, match=r"cannot be journaled.*pydantic model or a dataclass"):
        canonical_json(object())


def test_digests_are_tagged_sha256_of_canonical_json() -> None:
    import hashlib

    assert digest_bytes(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert digest_value({"b": 1, "a": 2}) == digest_bytes(b'{"a":2,"b":1}')
    assert digest_value({"b": 1, "a": 2}) == digest_value({"a": 2, "b": 1})
    assert digest_value({"a": 1}) != digest_value({"a": 1.5})


# -- the store contract ------------------------------------------------------------------------------
def ev(
    seq: int,
    kind: str,
    step_id: str | None = None,
    data: dict[str, object] | None = None,
    *,
    execution_id: str = "e1",
    at: float | None = None,
) -> Event:
    return Event(execution_id, seq, kind, step_id, 1_000.0 + seq if at is None else at, data or {})


def started(execution_id: str = "e1", flow: str = "f") -> Event:
    return ev(1, EventKind.EXECUTION_STARTED, data={"flow": flow, "input": None}, execution_id=execution_id)


def test_store_satisfies_the_protocol(journal: JournalStore) -> None:
    assert isinstance(journal, JournalStore)


def test_append_then_read_in_seq_order_per_execution(journal: JournalStore) -> None:
    journal.append([started("e1"), ev(2, EventKind.STEP_STARTED, "#1", {"effect": "x", "input": {"b": 1, "a": [1.5]}})])
    journal.append([started("e2")])
    journal.append(
        [ev(3, EventKind.STEP_COMPLETED, "#1", {"output": "é"}), ev(4, EventKind.STREAM_CHUNK, None, {"text": "t"})]
    )
    events = journal.read("e1")
    assert shape(events) == [
        (1, "execution_started", None, {"flow": "f", "input": None}),
        (2, "step_started", "#1", {"effect": "x", "input": {"a": [1.5], "b": 1}}),
        (3, "step_completed", "#1", {"output": "é"}),
        (4, "stream_chunk", None, {"text": "t"}),
    ]
    assert [e.at for e in events] == [1001.0, 1002.0, 1003.0, 1004.0]
    assert all(e.execution_id == "e1" for e in events)
    assert shape(journal.read("e2")) == [(1, "execution_started", None, {"flow": "f", "input": None})]
    assert journal.read("nobody") == []


def test_timestamps_keep_microseconds(journal: JournalStore) -> None:
    journal.append([ev(1, EventKind.WARNING, at=1_767_225_600.123456)])
    assert journal.read("e1")[0].at == pytest.approx(1_767_225_600.123456, abs=1e-6)


def test_payloads_are_stored_as_canonical_json(journal: JournalStore) -> None:
    class Model(BaseModel):
        n: int

    journal.append([ev(1, EventKind.VALUE_RECORDED, "#value:1", {"value": Model(n=3), "t": (1, 2)})])
    assert journal.read("e1")[0].data == {"value": {"n": 3}, "t": [1, 2]}


def test_non_finite_payload_is_refused_and_nothing_is_written(journal: JournalStore) -> None:
    with pytest.raises(UsageError):
        journal.append([ev(1, EventKind.WARNING), ev(2, EventKind.WARNING, data={"x": math.nan})])
    assert journal.read("e1") == []


def test_duplicate_seq_is_refused_and_the_batch_is_not_half_written(journal: JournalStore) -> None:
    journal.append([started(), ev(2, EventKind.STEP_STARTED, "#1")])
    with pytest.raises(JournalError):
        journal.append([ev(3, EventKind.STEP_COMPLETED, "#1"), ev(2, EventKind.STEP_STARTED, "#again")])
    assert [e.seq for e in journal.read("e1")] == [1, 2]
    assert journal.read("e1")[1].step_id == "#1"
    # the same with a projection change in the batch (the transactional path)
    with pytest.raises(JournalError):
        journal.append(
            [ev(3, EventKind.EXECUTION_SUSPENDED), ev(2, EventKind.EXECUTION_COMPLETED)],
            [ContentBlob(digest_bytes(b"zz"), b"zz")],
        )
    assert [e.seq for e in journal.read("e1")] == [1, 2]
    rec = journal.get_execution("e1")
    assert rec is not None and rec.status == "running"
    assert journal.get_content(digest_bytes(b"zz")) is None
    # a duplicate inside one batch
    with pytest.raises(JournalError):
        journal.append([ev(3, EventKind.WARNING), ev(3, EventKind.WARNING)])
    assert [e.seq for e in journal.read("e1")] == [1, 2]
    # and the journal still takes a good batch afterwards
    journal.append([ev(3, EventKind.STEP_COMPLETED, "#1")])
    assert [e.seq for e in journal.read("e1")] == [1, 2, 3]


def test_starting_an_execution_twice_is_refused_atomically(journal: JournalStore) -> None:
    journal.append([started("e1", flow="first")])
    with pytest.raises(JournalError):
        journal.append([ev(2, EventKind.WARNING), ev(3, EventKind.EXECUTION_STARTED, data={"flow": "second"})])
    assert [e.seq for e in journal.read("e1")] == [1]
    rec = journal.get_execution("e1")
    assert rec is not None and rec.flow == "first"


def test_executions_projection_follows_status_events(journal: JournalStore) -> None:
    assert journal.get_execution("e1") is None
    journal.append([started("e1", flow="tidy")])
    rec = journal.get_execution("e1")
    assert rec is not None
    assert (rec.execution_id, rec.flow, rec.status, rec.created_at, rec.updated_at) == (
        "e1",
        "tidy",
        "running",
        1001.0,
        1001.0,
    )
    journal.append([ev(2, EventKind.GATE_OPENED, "g"), ev(3, EventKind.EXECUTION_SUSPENDED)])
    rec = journal.get_execution("e1")
    assert rec is not None and (rec.status, rec.created_at, rec.updated_at) == ("suspended", 1001.0, 1003.0)
    journal.append(
        [ev(4, EventKind.GATE_RESOLVED, "g"), ev(5, EventKind.EXECUTION_RESUMED), ev(6, EventKind.EXECUTION_COMPLETED)]
    )
    rec = journal.get_execution("e1")
    assert rec is not None and (rec.status, rec.updated_at) == ("completed", 1006.0)


def test_projection_row_is_created_and_updated_in_the_same_append(journal: JournalStore) -> None:
    journal.append([started("e1"), ev(2, EventKind.EXECUTION_FAILED, data={"error": {"type": "x"}})])
    rec = journal.get_execution("e1")
    assert rec is not None and (rec.flow, rec.status, rec.created_at, rec.updated_at) == (
        "f",
        "failed",
        1001.0,
        1002.0,
    )


def test_list_executions_oldest_first_and_by_status(journal: JournalStore) -> None:
    journal.append([ev(1, EventKind.EXECUTION_STARTED, data={"flow": "f"}, execution_id="b", at=10.0)])
    journal.append([ev(1, EventKind.EXECUTION_STARTED, data={"flow": "f"}, execution_id="a", at=20.0)])
    journal.append([ev(2, EventKind.EXECUTION_SUSPENDED, execution_id="b", at=30.0)])
    assert [r.execution_id for r in journal.list_executions()] == ["b", "a"]
    assert [r.execution_id for r in journal.list_executions("running")] == ["a"]
    assert [r.execution_id for r in journal.list_executions("suspended")] == ["b"]
    assert journal.list_executions("completed") == []


def test_content_put_get_info_and_dedupe(journal: JournalStore) -> None:
    data = b'{"big":"blob"}'
    digest = digest_bytes(data)
    assert journal.get_content(digest) is None
    assert journal.content_info(digest) is None
    journal.append([started()], [ContentBlob(digest, data, "application/json", tainted=True)])
    assert journal.get_content(digest) == data
    assert journal.content_info(digest) == (len(data), "application/json", True)
    # the same digest again (even with other metadata) is a no-op, not an error; the first write wins
    journal.append([ev(2, EventKind.WARNING)], [ContentBlob(digest, data, "text/plain", tainted=False)])
    journal.append([], [ContentBlob(digest, data)])
    assert journal.content_info(digest) == (len(data), "application/json", True)
    other = b"\x00\x01binary"
    journal.append([], [ContentBlob(digest_bytes(other), other, "application/octet-stream")])
    assert journal.get_content(digest_bytes(other)) == other
    assert journal.content_info(digest_bytes(other)) == (len(other), "application/octet-stream", False)
    assert [e.seq for e in journal.read("e1")] == [1, 2]


# -- DuckDB specifics ---------------------------------------------------------------------------------
def test_migrations_are_recorded_and_idempotent_on_reopen(tmp_path: Path) -> None:
    path = tmp_path / "j.duckdb"
    names = [name for name, _ in MIGRATIONS]
    assert names and names[0] == "m001_initial"
    first = DuckDBJournal(path)
    assert first.applied_migrations() == names
    first.append([started()])
    first.close()
    again = DuckDBJournal(path)
    try:
        assert again.applied_migrations() == names
        rows = again.connection.execute("SELECT name, count(*) FROM schema_migrations GROUP BY name").fetchall()
        assert sorted(rows) == [(n, 1) for n in sorted(names)]
        assert shape(again.read("e1")) == shape([started()])
        tables = {r[0] for r in again.connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"events", "executions", "content", "schema_migrations"} <= tables
    finally:
        again.close()


def test_events_table_has_the_contract_columns(tmp_path: Path) -> None:
    j = DuckDBJournal(tmp_path / "j.duckdb")
    try:
        cols = [r[0] for r in j.connection.execute("DESCRIBE events").fetchall()]
        assert cols == ["execution_id", "seq", "kind", "step_id", "at", "data"]
        j.append([started()])
        (data,) = j.connection.execute("SELECT data FROM events").fetchone()
        assert data == canonical_json({"flow": "f", "input": None})
    finally:
        j.close()


def test_extension_autoload_and_autoinstall_are_off() -> None:
    j = DuckDBJournal(":memory:")
    try:
        settings = dict(
            j.connection.execute(
                "SELECT name, value FROM duckdb_settings() "
                "WHERE name IN ('autoload_known_extensions', 'autoinstall_known_extensions')"
            ).fetchall()
        )
        assert settings == {"autoload_known_extensions": "false", "autoinstall_known_extensions": "false"}
    finally:
        j.close()


def test_read_only_journal_reads_but_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "j.duckdb"
    writer = DuckDBJournal(path)
    writer.append([started()])
    writer.close()
    reader = DuckDBJournal(path, read_only=True)
    try:
        assert [e.seq for e in reader.read("e1")] == [1]
        with pytest.raises(JournalError, match="read-only"):
            reader.append([ev(2, EventKind.WARNING)])
    finally:
        reader.close()


def test_same_process_read_only_beside_read_write_is_a_journal_error(tmp_path: Path) -> None:
    path = tmp_path / "j.duckdb"
    writer = DuckDBJournal(path)
    try:
        with pytest.raises(JournalError, match="already has it open") as info:
            DuckDBJournal(path, read_only=True)
        assert not isinstance(info.value, duckdb.Error)
    finally:
        writer.close()


def test_close_is_idempotent(tmp_path: Path) -> None:
    j = DuckDBJournal(tmp_path / "j.duckdb")
    j.close()
    j.close()


def test_in_memory_journal_payloads_are_copies(journal: JournalStore) -> None:
    data: dict[str, object] = {"list": [1, 2]}
    journal.append([ev(1, EventKind.WARNING, data=data)])
    data["list"] = "mutated"
    assert journal.read("e1")[0].data == {"list": [1, 2]}
    assert json.loads(canonical_json(journal.read("e1")[0].data)) == {"list": [1, 2]}
