"""The PostgreSQL journal's connections on the real server: the NOTIFY channel's name fits
PostgreSQL's 63 bytes whatever the schema's letters, and after the server ends the pool's
connections (``pg_terminate_backend``) the next call gets a live one, not a dead one."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest

from loom_nb.journal import Event, EventKind
from loom_nb.journal.postgres_store import PostgresJournal, channel_name
from tests import stores


@pytest.fixture(autouse=True)
def _server(_postgres_server: str) -> Iterator[None]:
    yield
    stores.drop_schemas()


def schema_named(name: str) -> str:
    """A fresh schema called ``name``; the URL whose search path is it."""
    with psycopg.connect(stores.POSTGRES, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{name}"')
    stores.schemas.append(f'"{name}"')
    return stores.url_of(quote(f'"{name}"'))


def started(eid: str) -> list[Event]:
    return [Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {"flow": "f", "input": 1, "principal": None})]


def test_a_schema_of_cyrillic_letters_gets_a_channel_within_63_bytes_and_appends_notify_it() -> None:
    name = "журнал_исполнений_агентов_продажи"  # 33 letters, 65 bytes: "loom_nb_" + it is 73 bytes
    journal = PostgresJournal(schema_named(name[:31]))  # PostgreSQL keeps 63 bytes of a schema's name
    listener = journal.listener()
    try:
        assert len(journal.channel.encode("utf-8")) <= 63, journal.channel
        journal.append(started("run-1"))  # failed before: "channel name too long"
        notes = list(listener.notifies(timeout=5, stop_after=1))
        assert [(n.channel, n.payload) for n in notes] == [(journal.channel, "run-1")]
    finally:
        listener.close()
        journal.close()


def test_channel_names_are_cut_by_bytes_with_a_digest_so_long_schemas_stay_apart() -> None:
    assert channel_name("t_0123abcd") == "loom_nb_t_0123abcd"  # a name that fits is kept as it is
    long_a, long_b = "я" * 27 + "а", "я" * 27 + "б"
    a, b = channel_name(long_a), channel_name(long_b)
    assert a != b and all(len(c.encode("utf-8")) <= 63 for c in (a, b))
    assert a == channel_name(long_a)  # stable: every process of the journal computes the same name
    a.encode("utf-8").decode("utf-8")  # cut at a character's boundary


def backend_pids(journal: PostgresJournal) -> list[int]:
    """The server processes of the pool's two connections (both checked out at once)."""
    with journal.pool.connection() as one, journal.pool.connection() as two:
        return [one.info.backend_pid, two.info.backend_pid]


def test_after_the_server_ends_the_pools_connections_the_next_call_gets_a_live_one() -> None:
    journal = PostgresJournal(stores.new_schema("terminate"), min_size=2, max_size=2)
    try:
        journal.append(started("run-1"))
        pids = backend_pids(journal)
        assert len(pids) == 2
        with psycopg.connect(stores.POSTGRES, autocommit=True) as admin:
            ended = admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids]).fetchall()
        assert all(row[0] for row in ended)
        # Every call after it works: the pool checks a connection before handing it out.
        for _ in range(3):
            record = journal.get_execution("run-1")
            assert record is not None and record.status == "running"
        journal.append([Event("run-1", 2, EventKind.WARNING, None, 2.0, {"code": "x", "message": "after"})])
        assert [e.seq for e in journal.read("run-1")] == [1, 2]
        assert not set(backend_pids(journal)) & set(pids)
    finally:
        journal.close()
