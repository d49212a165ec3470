"""``PostgresJournal``: the shared journal, one PostgreSQL database (or schema) many processes use.

The same event model, tables and guarantees as ``DuckDBJournal``: an append is one transaction
(events, content blobs and the executions projection together), durable when it returns. Event
payloads are stored as the canonical JSON text itself (``TEXT``, not ``jsonb``, which would reorder
keys and refuse ``\\u0000``), so the bytes a digest was computed on are the bytes read back.

It is also a ``LeasingStore``: a process drives an execution only while it holds the execution's
lease (``leases`` table, migration ``m002_leases``), read on the database server's clock, so
processes on several machines agree on expiry.

Connections come from a ``psycopg_pool.ConnectionPool`` (autocommit; explicit transactions for
appends). Choose the schema with the URL (``?options=-csearch_path%3Dmy_schema``).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import loom_nb.journal.versions as versions
from loom_nb.errors import JournalError, JournalReadError, UsageError
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.events import ContentBlob, Event, ExecutionRecord
from loom_nb.journal.hints import fix_for
from loom_nb.journal.ids import journal_id, journal_ids, journal_step_id
from loom_nb.journal.migrations import CREATE_MIGRATIONS_TABLE, for_dialect
from loom_nb.journal.store import check_on_loop, projection_changes, projection_rows, write_error

#: psycopg and its pool, imported by the first ``PostgresJournal`` (``load_driver``): ``import loom_nb``
#: stays free of them (about 60 ms), and a user without the ``postgres`` extra loses nothing.
psycopg: Any = None
ConnectionPool: Any = None


def load_driver() -> bool:
    """Import psycopg 3 and psycopg-pool (once); False when the ``postgres`` extra is not installed."""
    global psycopg, ConnectionPool
    if psycopg is None:
        try:
            import psycopg as driver
            import psycopg.errors
            import psycopg.sql
            from psycopg_pool import ConnectionPool as pool
        except ImportError:  # pragma: no cover - the extra is not installed
            return False
        psycopg, ConnectionPool = driver, pool
    return True


#: Microseconds since the epoch -> TIMESTAMP, exactly (integers below 2^53 multiply exactly).
_TS = "(TIMESTAMP '1970-01-01' + %s::bigint * INTERVAL '1 microsecond')"
_EPOCH_US = "(extract(epoch FROM {col}) * 1000000)::bigint"
#: The database server's clock, in UTC whatever the session's time zone: every process compares
#: lease expiry on it, never on its own clock.
_NOW = "(clock_timestamp() AT TIME ZONE 'UTC')"
_ROW = f"(%s, %s, %s, %s, {_TS}, %s)"
#: Serializes migrations of one database across processes (``pg_advisory_xact_lock``).
_MIGRATION_LOCK = zlib.crc32(b"loom_nb.migrations")
_SCHEMES = ("postgresql://", "postgres://")
#: ``PostgresJournal.change_marker``'s query: executions, and the sum of each one's last seq (an index
#: probe per execution on the ``(execution_id, seq)`` key).
CHANGE_MARKER_SQL = (
    "SELECT count(*), coalesce(sum((SELECT max(e.seq) FROM events e WHERE e.execution_id = x.execution_id)), 0) "
    "FROM executions x"
)


#: PostgreSQL's longest identifier, in bytes (``NAMEDATALEN - 1``): a channel name too.
_MAX_NAME_BYTES = 63


def channel_name(schema: str) -> str:
    """The NOTIFY channel of the journal in ``schema``: ``loom_nb_<schema>`` when it fits in 63 bytes
    of UTF-8, else cut at a character's boundary and ended with 8 hex digits of the schema's
    SHA-256 (two long schemas sharing a beginning stay apart; every process computes the same)."""
    name = f"loom_nb_{schema}"
    if len(name.encode("utf-8")) <= _MAX_NAME_BYTES:
        return name
    suffix = "_" + hashlib.sha256(schema.encode("utf-8")).hexdigest()[:8]
    head = name.encode("utf-8")[: _MAX_NAME_BYTES - len(suffix)].decode("utf-8", "ignore")
    return head + suffix


def is_postgres_url(target: str) -> bool:
    """True when ``target`` names a PostgreSQL database (``postgresql://...``)."""
    return target.startswith(_SCHEMES)


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _no_nul(value: str, what: str, location: str) -> str:
    """``value`` when PostgreSQL can store it as text (no NUL character)."""
    if "\x00" in value:
        raise UsageError(
            f"{what} {value!r} holds a NUL character (\\x00), which a PostgreSQL journal ({location}) cannot "
            "store in a text column: use an id without it (nothing was written)"
        )
    return value


def redacted_url(url: str) -> str:
    """``url`` without a password, for messages and records (libpq finds it in ``PGPASSWORD`` or
    ``~/.pgpass``)."""
    head, sep, tail = url.partition("://")
    if "@" not in tail:
        return url
    auth, _, rest = tail.rpartition("@")
    user = auth.split(":", 1)[0]
    return f"{head}{sep}{user}@{rest}"


class PostgresJournal:
    """A ``JournalStore`` (and ``LeasingStore``) in a PostgreSQL database.

    Args:
        url: ``postgresql://user@host:port/db`` (libpq's URL; the search path may name a schema).
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most.

    Raises:
        UsageError: the ``postgres`` extra (psycopg) is not installed.
        JournalReadError: the server cannot be reached or refuses the connection.
    """

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 4) -> None:
        if not load_driver():
            raise UsageError("a PostgreSQL journal needs psycopg 3 and psycopg-pool: pip install 'loom_nb[postgres]'")
        self.url = url
        self.location = redacted_url(url)
        self._closed = True
        #: The last change marker and the server snapshot it was read under (``change_marker``).
        self._marker: tuple[str, tuple[int, int]] | None = None
        #: How many times ``change_marker`` probed the executions (the snapshot had changed).
        self.marker_probes = 0
        try:
            self.pool: Any = ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                # A connection the server ended (restart, pg_terminate_backend, a dropped network)
                # is found at checkout and replaced, never handed out: one round trip per checkout.
                check=ConnectionPool.check_connection,
                open=False,
                name="loom_nb-journal",
            )
            self.pool.open(wait=True, timeout=10)
        except Exception as exc:
            raise JournalReadError(
                f"cannot connect to the PostgreSQL journal {self.location}: {type(exc).__name__}: {exc}. "
                "Check that the server runs and the URL (user, host, port, database) is right; "
                "or use a DuckDB file (loom.Runtime.open('loom.duckdb'))."
            ) from exc
        self._closed = False
        try:
            self._migrate()
            schema = self._fetch("read its schema", "SELECT current_schema()")[0][0]
            #: The channel every append NOTIFYs (payload: the execution id) and ``listen`` LISTENs on:
            #: one per journal schema, so journals in other schemas of the database stay apart.
            self.channel = channel_name(schema)
        except BaseException:
            self.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------------
    @contextmanager
    def _conn(self, doing: str) -> Iterator[Any]:
        check_on_loop(self.location)
        if self._closed:
            raise JournalReadError(f"the journal {self.location} is closed and could not {doing}: open it again")
        try:
            with self.pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            fix = fix_for(exc, "Check the server and the error above")
            raise JournalReadError(
                f"the journal {self.location} could not {doing}: {type(exc).__name__}: {exc}. {fix}; the pool "
                "replaces a dropped connection at the next call."
            ) from exc

    def _fetch(self, doing: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._conn(doing) as conn:
            return list(conn.execute(sql, params).fetchall())

    # -- schema -----------------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self._conn("be migrated") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_MIGRATION_LOCK])
            conn.execute(CREATE_MIGRATIONS_TABLE)
            applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations").fetchall()}
            versions.refuse_unknown_migrations(self.location, applied)  # before this code changes anything
            for name, statements in for_dialect("postgresql"):
                if name in applied:
                    continue
                for sql in statements:
                    conn.execute(sql)
                conn.execute(f"INSERT INTO schema_migrations VALUES (%s, {_TS})", [name, 0])
            formats = [row[0] for row in conn.execute(versions.newest_formats_sql("postgresql")).fetchall()]
            versions.refuse_newer_formats(self.location, formats)

    def applied_migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        return [r[0] for r in self._fetch("list its migrations", "SELECT name FROM schema_migrations ORDER BY name")]

    # -- writes -----------------------------------------------------------------------------------
    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Atomically append events and content, updating the executions projection.

        Raises:
            JournalWriteError: the commit failed (nothing of it was written); psycopg's error is
                its cause.
            UsageError: a payload or id cannot be journaled (nothing was written), or the call
                came from a synchronous tool's worker thread.
        """
        check_on_loop(self.location)
        params: list[Any] = []
        for e in events:
            eid, step = journal_id(e.execution_id), journal_step_id(e.step_id)
            text = canonical_json(e.data) if e.data_json is None else e.data_json
            params += [eid, e.seq, str(e.kind), step, _us(e.at), text]
        changes = projection_changes(events)
        for _, _, flow, _ in changes:
            if flow is not None:
                _no_nul(flow, "flow name", self.location)
        if self._closed:
            raise write_error(self.location, events, JournalError("the journal is closed"))
        try:
            with self.pool.connection() as conn, conn.transaction():
                self._write(conn, events, contents, params, changes)
        except psycopg.errors.UniqueViolation as exc:
            why = "A duplicate seq or execution: another process drives this execution (its lease was lost)?"
            raise write_error(self.location, events, exc, why=why) from exc
        except psycopg.Error as exc:
            raise write_error(self.location, events, exc) from exc

    def _write(
        self,
        conn: Any,
        events: Sequence[Event],
        contents: Sequence[ContentBlob],
        params: list[Any],
        changes: list[tuple[str, str, str | None, float]],
    ) -> None:
        at = _us(events[0].at) if events else 0
        for blob in contents:
            conn.execute(
                f"INSERT INTO content VALUES (%s, %s, %s, %s, %s, {_TS}) ON CONFLICT DO NOTHING",
                [blob.digest, len(blob.data), blob.media_type, blob.data, blob.tainted, at],
            )
        if events:
            conn.execute("INSERT INTO events VALUES " + ", ".join([_ROW] * len(events)), params)
        for execution_id in dict.fromkeys(e.execution_id for e in events):
            # Delivered at commit, only if it commits: a follower (``listen``) wakes on it.
            conn.execute("SELECT pg_notify(%s, %s)", [self.channel, journal_id(execution_id)])
        # One statement each for the executions the commit starts and those it moves on.
        rows = projection_rows(changes)
        if rows.created:
            conn.execute(
                "INSERT INTO executions SELECT id, flow, status, "
                + _TS.replace("%s", "created")
                + ", "
                + _TS.replace("%s", "updated")
                + " FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::bigint[]) "
                "AS c(id, flow, status, created, updated)",
                rows.created_columns(_us),
            )
        if rows.updated:
            conn.execute(
                "UPDATE executions SET status = moved.status, updated_at = "
                + _TS.replace("%s", "moved.at")
                + " FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS moved(id, status, at) "
                "WHERE executions.execution_id = moved.id",
                rows.updated_columns(_us),
            )

    # -- reads ------------------------------------------------------------------------------------
    def read(self, execution_id: str) -> list[Event]:
        """Return an execution's events in order."""
        return self._events_after(execution_id, 0)  # seqs count from 1

    def read_after(self, execution_id: str, seq: int) -> list[Event]:
        """Return an execution's events after ``seq``, in order (``TailReader``)."""
        return self._events_after(execution_id, seq)

    def _events_after(self, execution_id: str, seq: int) -> list[Event]:
        eid = journal_id(execution_id)
        rows = self._fetch(
            f"read execution {execution_id!r}" + (f" after event {seq}" if seq else ""),
            f"SELECT seq, kind, step_id, {_EPOCH_US.format(col='at')}, data FROM events "
            "WHERE execution_id = %s AND seq > %s ORDER BY seq",
            [eid, seq],
        )
        return [Event(eid, n, kind, step, us / 1e6, json.loads(data)) for n, kind, step, us, data in rows]

    _RECORD = (
        f"SELECT execution_id, flow, status, {_EPOCH_US.format(col='created_at')}, "
        f"{_EPOCH_US.format(col='updated_at')} FROM executions"
    )

    def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Return one execution's projection row."""
        eid = journal_id(execution_id)
        rows = self._fetch(f"read execution {execution_id!r}", self._RECORD + " WHERE execution_id = %s", [eid])
        return None if not rows else _record(rows[0])

    def get_executions(self, execution_ids: Sequence[str]) -> dict[str, ExecutionRecord]:
        """The projection rows of the executions that exist among ``execution_ids``, by stored id
        (``journal_id``), in one query (``BatchedLookup``: many runs starting together)."""
        ids = journal_ids(execution_ids)
        rows = self._fetch(f"read {len(ids)} executions", self._RECORD + " WHERE execution_id = ANY(%s)", [ids])
        return {row[0]: _record(row) for row in rows}

    def list_executions(self, status: str | None = None) -> list[ExecutionRecord]:
        """Return executions, oldest first."""
        sql, params = self._RECORD, []
        if status is not None:
            sql += " WHERE status = %s"
            params.append(status)
        rows = self._fetch("list its executions", sql + " ORDER BY created_at, execution_id", params)
        return [_record(r) for r in rows]

    def get_content(self, digest: str) -> bytes | None:
        """Return stored bytes, or None."""
        rows = self._fetch(f"read content {digest}", "SELECT bytes FROM content WHERE digest = %s", [digest])
        return None if not rows else bytes(rows[0][0])

    def content_info(self, digest: str) -> tuple[int, str, bool] | None:
        """Return size, media type and taint of stored content."""
        rows = self._fetch(
            f"read content {digest}", "SELECT size, media_type, tainted FROM content WHERE digest = %s", [digest]
        )
        return None if not rows else (int(rows[0][0]), str(rows[0][1]), bool(rows[0][2]))

    def change_marker(self) -> tuple[int, int]:
        """A cheap value that changes whenever events are appended, so a reader (``loom.frames``)
        can tell whether to load the journal again: the number of executions and the sum of each
        one's last seq. Events are append-only with rising seqs, and an execution's row is written
        in the commit of its first event, so every commit changes it. Each last seq is read from
        the ``(execution_id, seq)`` key's index (one backward probe per execution), never by a scan
        of ``events``: the cost follows the executions, not the events.

        Before that, one look at the server's transaction snapshot (``pg_current_snapshot()``): when
        it is the one the last marker was computed under, no transaction that wrote anything has
        committed since (on the whole server), so the last marker is returned without the probes.
        Read-only transactions (other readers) do not change it; any write on the server does, and
        then the probes run."""
        with self._conn("read its change marker") as conn:
            snapshot = conn.execute("SELECT pg_current_snapshot()::text").fetchone()[0]
            if self._marker is not None and self._marker[0] == snapshot:
                return self._marker[1]
            row = conn.execute(f"SELECT pg_current_snapshot()::text, m.* FROM ({CHANGE_MARKER_SQL}) m").fetchone()
        marker = (int(row[1]), int(row[2]))
        self.marker_probes += 1
        self._marker = (str(row[0]), marker)  # the snapshot the marker was read under, exactly
        return marker

    def arrow_changes(self, last_seqs: Mapping[str, int], content_rows: int) -> dict[str, Any]:
        """What was appended since a reader's copy, as ``pyarrow.Table`` s read in one repeatable-read
        transaction (a consistent cut) through the ADBC PostgreSQL driver: ``events`` holds only the
        events after ``last_seqs`` (each execution's last seq in the copy; an execution not in it:
        all of its events), ``executions`` the whole table (one row per execution, updated in
        place), and ``content`` the whole table only when it no longer holds ``content_rows`` rows
        (it is absent otherwise). What ``loom.frames()`` appends to its copy when the change marker
        moved, instead of moving every event again.

        Each execution's last seq on the server is read from the ``(execution_id, seq)`` key's
        index (one backward probe per execution); the events of the executions that moved are read
        by a range of that index each. Events are append-only with rising seqs per execution, so
        the rows after a copy's last seq are exactly the ones it lacks.

        Raises:
            UsageError: the ADBC driver or pyarrow is not installed (the ``postgres`` extra).
            JournalReadError: the server refused the read.
        """
        with self._arrow_cursor() as cur:
            cur.execute(
                "SELECT x.execution_id, (SELECT max(e.seq) FROM events e WHERE e.execution_id = x.execution_id) "
                "FROM executions x"
            )
            server = cur.fetch_arrow_table()
            moved = [
                (eid, last_seqs.get(eid, -1))
                for eid, last in zip(server.column(0).to_pylist(), server.column(1).to_pylist(), strict=True)
                if last is not None and last > last_seqs.get(eid, -1)
            ]
            out: dict[str, Any] = {}
            quote = psycopg.sql.quote
            if moved:
                ids = ", ".join(quote(eid) for eid, _ in moved)  # stored ids: no NUL (journal_id)
                seqs = ", ".join(str(int(seq)) for _, seq in moved)
                cur.execute(
                    f"SELECT e.* FROM unnest(ARRAY[{ids}]::text[], ARRAY[{seqs}]::bigint[]) AS w(execution_id, seq) "
                    "JOIN events e ON e.execution_id = w.execution_id AND e.seq > w.seq"
                )
                out["events"] = cur.fetch_arrow_table()
            else:
                cur.execute("SELECT * FROM events WHERE false")
                out["events"] = cur.fetch_arrow_table()
            cur.execute("SELECT * FROM executions")
            out["executions"] = cur.fetch_arrow_table()
            cur.execute("SELECT count(*) FROM content")
            if int(cur.fetchone()[0]) != content_rows:
                cur.execute("SELECT * FROM content")
                out["content"] = cur.fetch_arrow_table()
            return out

    @contextmanager
    def _arrow_cursor(self) -> Iterator[Any]:
        """An ADBC cursor in a repeatable-read, read-only transaction (rolled back after)."""
        check_on_loop(self.location)
        try:
            import adbc_driver_postgresql.dbapi as adbc
        except ImportError as exc:
            raise UsageError(
                "reading a PostgreSQL journal as frames needs adbc-driver-postgresql and pyarrow: "
                "pip install 'loom_nb[postgres]'"
            ) from exc
        try:
            with adbc.connect(self.url) as conn, conn.cursor() as cur:
                cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                yield cur
                conn.rollback()
        except (UsageError, JournalReadError):
            raise
        except Exception as exc:
            raise JournalReadError(
                f"the journal {self.location} could not be read as Arrow tables: {type(exc).__name__}: {exc}"
            ) from exc

    def arrow_tables(self, tables: Sequence[str] = ("events", "executions", "content")) -> dict[str, Any]:
        """The journal's tables as ``pyarrow.Table`` s, read in one repeatable-read transaction
        (a consistent cut) through the ADBC PostgreSQL driver: rows move as Arrow, never as
        Python objects (what ``loom.frames()`` loads into DuckDB).

        Raises:
            UsageError: the ADBC driver or pyarrow is not installed (the ``postgres`` extra).
            JournalReadError: the server refused the read.
        """
        with self._arrow_cursor() as cur:
            out = {}
            for table in tables:
                cur.execute(f"SELECT * FROM {table}")
                out[table] = cur.fetch_arrow_table()
            return out

    # -- leases (``LeasingStore``) ----------------------------------------------------------------
    def claim_lease(self, execution_id: str, owner: str, ttl: float) -> bool:
        """Take the lease when it is free, expired or already ``owner``'s (one statement, so two
        processes racing for it cannot both win)."""
        rows = self._fetch(
            f"claim the lease of execution {execution_id!r}",
            f"INSERT INTO leases VALUES (%s, %s, {_NOW}, {_NOW} + %s * INTERVAL '1 second') "
            "ON CONFLICT (execution_id) DO UPDATE SET owner = EXCLUDED.owner, "
            "heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at "
            f"WHERE leases.owner = EXCLUDED.owner OR leases.expires_at < {_NOW} RETURNING owner",
            [journal_id(execution_id), owner, ttl],
        )
        return bool(rows)

    def take_over_lease(self, execution_id: str, owner: str, dead_owner: str, ttl: float) -> bool:
        """Take the lease from ``dead_owner`` (one statement: of processes racing for it, one wins)."""
        rows = self._fetch(
            f"take over the lease of execution {execution_id!r}",
            f"UPDATE leases SET owner = %s, heartbeat_at = {_NOW}, expires_at = {_NOW} + %s * INTERVAL '1 second' "
            "WHERE execution_id = %s AND owner = %s RETURNING owner",
            [owner, ttl, journal_id(execution_id), dead_owner],
        )
        return bool(rows)

    def renew_lease(self, execution_id: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s lease; False when it no longer holds it (taken over, or released)."""
        rows = self._fetch(
            f"renew the lease of execution {execution_id!r}",
            f"UPDATE leases SET heartbeat_at = {_NOW}, expires_at = {_NOW} + %s * INTERVAL '1 second' "
            "WHERE execution_id = %s AND owner = %s RETURNING owner",
            [ttl, journal_id(execution_id), owner],
        )
        return bool(rows)

    def release_lease(self, execution_id: str, owner: str) -> None:
        """Give the lease up (a no-op when ``owner`` does not hold it)."""
        with self._conn(f"release the lease of execution {execution_id!r}") as conn:
            conn.execute("DELETE FROM leases WHERE execution_id = %s AND owner = %s", [journal_id(execution_id), owner])

    def lease_owner(self, execution_id: str) -> str | None:
        """Who holds a live lease on the execution, or None."""
        rows = self._fetch(
            f"read the lease of execution {execution_id!r}",
            f"SELECT owner FROM leases WHERE execution_id = %s AND expires_at >= {_NOW}",
            [journal_id(execution_id)],
        )
        return None if not rows else str(rows[0][0])

    # -- the queue (workers) --------------------------------------------------------------------
    def claim_queued(self, owner: str, ttl: float, limit: int, flows: Sequence[str] | None = None) -> list[str]:
        """Take up to ``limit`` queued executions for ``owner``, oldest first: in one transaction
        their rows are locked (``FOR UPDATE SKIP LOCKED``: rows another worker is taking are
        skipped, never waited for), set ``running``, and leased to ``owner`` for ``ttl`` seconds.
        Two workers never take the same execution. ``flows``: only executions of these flows (the
        ones the worker has: the rest stay queued for a worker that has them). Returns their ids."""
        if limit < 1 or (flows is not None and not flows):
            return []
        only = "" if flows is None else "AND flow = ANY(%s) "
        with self._conn("take queued executions") as conn, conn.transaction():
            rows = conn.execute(
                f"SELECT execution_id FROM executions WHERE status = 'queued' {only}"
                "ORDER BY created_at, execution_id LIMIT %s FOR UPDATE SKIP LOCKED",
                [limit] if flows is None else [list(flows), limit],
            ).fetchall()
            ids = [str(r[0]) for r in rows]
            for eid in ids:
                conn.execute("UPDATE executions SET status = 'running' WHERE execution_id = %s", [eid])
                conn.execute(
                    f"INSERT INTO leases VALUES (%s, %s, {_NOW}, {_NOW} + %s * INTERVAL '1 second') "
                    "ON CONFLICT (execution_id) DO UPDATE SET owner = EXCLUDED.owner, "
                    "heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at",
                    [eid, owner, ttl],
                )
            return ids

    def expired_running(self, limit: int = 100, flows: Sequence[str] | None = None) -> list[str]:
        """Running executions nobody holds a live lease on (their worker died): ``recover`` them.
        ``flows``: only executions of these flows."""
        if flows is not None and not flows:
            return []
        only = "" if flows is None else "AND e.flow = ANY(%s) "
        rows = self._fetch(
            "list running executions without a live lease",
            "SELECT e.execution_id FROM executions e LEFT JOIN leases l ON l.execution_id = e.execution_id "
            f"WHERE e.status = 'running' AND (l.execution_id IS NULL OR l.expires_at < {_NOW}) {only}"
            "ORDER BY e.updated_at LIMIT %s",
            [limit] if flows is None else [list(flows), limit],
        )
        return [str(r[0]) for r in rows]

    def waiting_flows(self, flows: Sequence[str]) -> dict[str, int]:
        """How many executions wait (queued, or running without a live lease) by flow, for the flows
        NOT in ``flows``: what a worker that has only ``flows`` leaves for others."""
        rows = self._fetch(
            "count the executions waiting for other flows",
            "SELECT e.flow, count(*) FROM executions e LEFT JOIN leases l ON l.execution_id = e.execution_id "
            "WHERE (e.status = 'queued' OR (e.status = 'running' AND "
            f"(l.execution_id IS NULL OR l.expires_at < {_NOW}))) "
            "AND NOT (e.flow = ANY(%s)) GROUP BY e.flow ORDER BY e.flow",
            [list(flows)],
        )
        return {str(flow): int(n) for flow, n in rows}

    def listener(self) -> Any:
        """A new connection (outside the pool, autocommit) LISTENing on ``channel``: iterate
        ``conn.notifies(timeout=...)`` to be woken by appends (the payload is the execution id).
        Close it when done."""
        conn = psycopg.connect(self.url, autocommit=True)
        conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self.channel)))
        return conn

    async def async_listener(self) -> Any:
        """``listener`` for an event loop: a new ``psycopg.AsyncConnection`` LISTENing on
        ``channel`` (``async for note in conn.notifies()``). Close it when done."""
        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self.channel)))
        return conn

    # -- lifecycle --------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the pool (idempotent)."""
        if not self._closed:
            self._closed = True
            self.pool.close()

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self._closed

    def __repr__(self) -> str:
        return f"PostgresJournal({self.location!r})"


def _record(row: tuple[Any, ...]) -> ExecutionRecord:
    return ExecutionRecord(row[0], row[1], row[2], row[3] / 1e6, row[4] / 1e6)
