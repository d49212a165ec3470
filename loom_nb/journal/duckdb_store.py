"""``DuckDBJournal``: the embedded default journal, one DuckDB file (or ``:memory:``).

Appends are one autocommitted multi-row INSERT when only events are written (one fsync), and one
explicit transaction when content blobs or projection changes come along. DuckDB allows one
writing process per file; a second process gets ``JournalLockedError``, never DuckDB's raw error.
"""

from __future__ import annotations

import array
import functools
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from threading import RLock
from typing import Any

import duckdb

import loom_nb.journal.same_file as same_file
import loom_nb.journal.versions as versions
from loom_nb.errors import JournalCorruptError, JournalError, JournalLockedError, JournalReadError, UsageError
from loom_nb.journal.canonical import canonical_json
from loom_nb.journal.events import ContentBlob, Event, ExecutionRecord
from loom_nb.journal.hints import fix_for
from loom_nb.journal.ids import journal_id, journal_ids, journal_step_id
from loom_nb.journal.migrations import CREATE_MIGRATIONS_TABLE, MIGRATIONS
from loom_nb.journal.store import check_on_loop, projection_changes, projection_rows, write_error

_NO_NETWORK = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
#: The journal's database touches no file but its own: no COPY TO, no read_text / read_csv, no
#: ATTACH, not even through a cursor an analysis query runs on.
_OWN_FILE_ONLY = {**_NO_NETWORK, "enable_external_access": False}
# Commits run on one thread: a small commit is 15-25% cheaper than with DuckDB's worker pool
# (measured in docs/performance.md). Analysis queries raise it with ``parallel_reads()``.
_WRITE_THREADS = 1
_INSERT_EVENTS = (
    "INSERT INTO events SELECT unnest($1::VARCHAR[]), unnest($2::BIGINT[]), unnest($3::VARCHAR[]), "
    "unnest($4::VARCHAR[]), make_timestamp(unnest($5::BIGINT[])), unnest($6::VARCHAR[])"
)
_INSERT_EXECUTIONS = (
    "INSERT INTO executions SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), unnest($3::VARCHAR[]), "
    "make_timestamp(unnest($4::BIGINT[])), make_timestamp(unnest($5::BIGINT[]))"
)
#: From this many events a commit moves them as one Arrow table, whose columns DuckDB reads as they
#: are; below it, six bound lists cost less than the table's fixed cost (DuckDB converts a bound
#: list value by value). One committed insert (``bench/bulk_insert.py``, quiet): 4 rows 2.38 ms as
#: lists against 2.66 ms as Arrow, 64 rows 3.08 against 3.19, 96 rows 3.88 against 3.77, 256 rows
#: (64 runs' turns in one group commit) 5.73 against 5.13.
ARROW_ROWS = 96
_UPDATE_EXECUTIONS = (
    "UPDATE executions SET status = moved.status, updated_at = make_timestamp(moved.at) FROM "
    "(SELECT unnest($1::VARCHAR[]) AS execution_id, unnest($2::VARCHAR[]) AS status, unnest($3::BIGINT[]) AS at) "
    "AS moved WHERE executions.execution_id = moved.execution_id"
)
_PID = re.compile(r"\(PID (\d+)\)")


def _insert_events(con: Any, columns: list[list[Any]]) -> None:
    """Insert the events given as six columns (``append``'s): as bound lists, or from
    ``ARROW_ROWS`` rows on as one Arrow table (the same rows either way)."""
    arrow = _arrow() if len(columns[0]) >= ARROW_ROWS else None
    table = None if arrow is None else arrow.table(columns)
    if table is None:
        con.execute(_INSERT_EVENTS, columns)
        return
    con.from_arrow(table).insert_into("events")


class _ArrowEvents:
    """Makes the Arrow table of ``append``'s six columns (``at`` in microseconds since the epoch)
    without ``pyarrow.array``, which imports pandas into the process the first time it is called
    (to ask whether its input is a pandas object): the text columns go through pyarrow's string
    builder, the integer ones are handed over as one buffer each. The kernel never imports pandas
    (``journal/test_bulk_rows.py`` runs 64 runs' group commits in a fresh process to check)."""

    __slots__ = ("_columns", "_pa", "_schema", "_text")

    def __init__(self, pa: Any, text_builder: Any) -> None:
        self._pa, self._text = pa, text_builder
        text = pa.string()
        self._schema = pa.schema(
            [
                ("execution_id", text),
                ("seq", pa.int64()),
                ("kind", text),
                ("step_id", text),
                ("at", pa.timestamp("us")),
                ("data", text),
            ]
        )
        #: Each column's type and whether it holds text (else 64-bit integers: ``seq``, ``at``).
        self._columns = tuple((field.type, field.type == text) for field in self._schema)

    def table(self, columns: list[list[Any]]) -> Any:
        """The table of ``columns``; None when a number does not fit 64 bits or a text column
        would pass Arrow's 2 GiB (the commit then binds lists, so DuckDB reports it, or writes it,
        as it does for a small commit)."""
        pa = self._pa
        arrays = []
        try:
            for column, (kind, is_text) in zip(columns, self._columns, strict=True):
                if is_text:
                    builder = self._text()
                    builder.append_values(column)  # None is a null
                    arrays.append(builder.finish())
                else:
                    data = pa.py_buffer(array.array("q", column))
                    arrays.append(pa.Array.from_buffers(kind, len(column), [None, data]))
        except (OverflowError, pa.ArrowException):  # a number beyond 64 bits; 2 GiB of text in a column
            return None
        return pa.Table.from_arrays(arrays, schema=self._schema)


@functools.cache
def _arrow() -> _ArrowEvents | None:
    """The maker of large commits' Arrow tables, made once, on the first large commit (pyarrow's
    import costs about 0.2 s); None where pyarrow or its string builder cannot be imported (a
    dependency of loom_nb, so a broken environment) or the machine is big-endian (the integer
    buffers are the machine's): large commits then bind lists like small ones, slower but the same
    rows."""
    try:
        import pyarrow as pa
        from pyarrow.lib import StringBuilder
    except ImportError:
        return None
    if sys.byteorder != "little":
        return None
    return _ArrowEvents(pa, StringBuilder)


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def holder_path(path: str | Path) -> Path:
    """The lock record beside a journal file: who holds it read-write (``<file>.holder.json``)."""
    p = Path(path)
    return p.with_name(p.name + ".holder.json")


def _opened_by() -> str:
    """What opens the journal, for the lock record: the notebook (Jupyter names it to its kernel in
    ``JPY_SESSION_NAME``) or the command line."""
    notebook = os.environ.get("JPY_SESSION_NAME")
    return f"notebook {notebook}" if notebook else "command " + " ".join(sys.argv)[:300]


def _write_holder(path: str) -> None:
    record = {
        "pid": os.getpid(),
        "opened_by": _opened_by(),
        "opened_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with suppress(OSError):  # the record only improves a message; the journal works without it
        holder_path(path).write_text(json.dumps(record), encoding="utf-8")


def _remove_holder(path: str) -> None:
    with suppress(OSError, ValueError):
        record = json.loads(holder_path(path).read_text(encoding="utf-8"))
        if record.get("pid") == os.getpid():
            holder_path(path).unlink()


def _holder_text(path: str, pid: str | None) -> str:
    """``process N (notebook x.ipynb, opened at ...)`` from DuckDB's pid and the lock record."""
    if pid is None:
        return "another process"
    try:
        record = json.loads(holder_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"process {pid}"
    if str(record.get("pid")) != pid:
        return f"process {pid}"  # a record left by an earlier holder
    return f"process {pid} ({record.get('opened_by')}, opened {record.get('opened_at')})"


def _lock_error(path: str, exc: BaseException) -> JournalLockedError:
    match = _PID.search(str(exc))
    holder = _holder_text(path, match.group(1) if match else None)
    return JournalLockedError(
        f"the journal {path} is held by {holder}: DuckDB allows one process per file and refuses even a "
        "read-only open beside it. Close that kernel or process first, or in it run "
        "runtime.snapshot('copy.duckdb') or %loom snapshot copy.duckdb; then open the copy "
        "(or loom-nb journal snapshot SRC DST once nobody holds it). "
        "To share runs live, use a PostgreSQL journal (LOOM_JOURNAL=postgresql://...)."
    )


_DAMAGE = ("not a valid duckdb database file", "could not read enough bytes", "checksum", "corrupt")


def read_error(location: str, exc: BaseException, doing: str) -> JournalReadError:
    """The ``JournalError`` for a DuckDB error raised while opening or reading the journal file
    (every read goes through ``DuckDBJournal.reading``): what went wrong, the file, and the fix."""
    text = str(exc)
    if "not a valid duckdb database file" in text.lower():
        return JournalCorruptError(
            f"the journal {location} is not a DuckDB file (another kind of file, or a journal whose header was "
            f"overwritten) and could not {doing}: give the path of a .duckdb journal, or a new path for a new one. "
            "If it was a journal: Move the file aside and restore it from a copy."
        )
    folder = os.path.dirname(os.path.abspath(location))
    if location != ":memory:" and not os.path.isdir(folder):
        return JournalReadError(
            f"the journal {location} could not {doing}: its folder {folder} does not exist. "
            "Create the folder first, or give a path in a folder that exists."
        )
    if any(marker in text.lower() for marker in _DAMAGE):
        return JournalCorruptError(
            f"the journal {location} is damaged (truncated, overwritten or not a DuckDB file) and could "
            f"not {doing}: {text}. Move the file aside and open a new journal there, or restore it from a "
            "copy; a run in it cannot be recovered until then."
        )
    if "closed" in text.lower():
        return JournalReadError(
            f"the journal {location} is closed and could not {doing}: open it again (loom.Runtime.open)."
        )
    fix = fix_for(exc, "If it persists, close the runtime and open the file again")
    return JournalReadError(f"the journal {location} could not {doing}: {type(exc).__name__}: {text}. {fix}.")


class DuckDBJournal:
    """A ``JournalStore`` in a DuckDB file.

    Args:
        path: A file path, or ``":memory:"``.
        read_only: Open the file read-only (no writer may hold it then).
    """

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False) -> None:
        self.location = str(path)
        self.read_only = read_only
        self._closed = True  # until connected
        #: Held by every commit and by ``snapshot``, so a copy never sees half a checkpoint.
        self._write_lock = RLock()
        #: The keys of the file this journal holds (``same_file``); none for ``:memory:``.
        self._held: list[same_file.FileKey] = []
        if self.location != ":memory:":
            if read_only:
                same_file.refuse_read_only_beside_writer(self.location)
            else:
                self._held = same_file.hold(self.location, self)
        try:
            self._connect()
        except BaseException:
            self._release()
            raise

    def _connect(self) -> None:
        read_only = self.read_only
        try:
            self.connection: Any = duckdb.connect(
                self.location, read_only=read_only, config={**_OWN_FILE_ONLY, "threads": _WRITE_THREADS}
            )
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise _lock_error(self.location, exc) from None
            raise read_error(self.location, exc, "be opened") from exc
        except duckdb.ConnectionException as exc:
            raise JournalError(
                f"cannot open the journal {self.location} "
                f"{'read-only' if read_only else 'read-write'}: this process already has it open "
                f"the other way ({exc}). Use the runtime that is already open."
            ) from exc
        except duckdb.Error as exc:
            raise read_error(self.location, exc, "be opened") from exc
        self._closed = False
        if self._held:
            self._held = same_file.hold_created(self.location, self, self._held)
            _write_holder(self.location)
        try:
            with self.reading("be opened"):
                if read_only:
                    self._check_versions()
                else:
                    self._migrate()
        except BaseException:
            self._closed = True
            self.connection.close()
            if self._held:
                _remove_holder(self.location)
            raise

    @contextmanager
    def reading(self, doing: str) -> Iterator[None]:
        """The one boundary of every read: a DuckDB error inside the block becomes the
        ``JournalReadError`` (or ``JournalCorruptError``) ``read_error`` builds, its cause kept.

        Args:
            doing: What was being done, for the message ("read execution 'x'").

        Raises:
            UsageError: called from a synchronous tool's worker thread (``check_on_loop``).
        """
        check_on_loop(self.location)
        try:
            yield
        except duckdb.Error as exc:
            raise read_error(self.location, exc, doing) from exc

    # -- schema ---------------------------------------------------------------------------------
    def _migrate(self) -> None:
        con = self.connection
        con.execute(CREATE_MIGRATIONS_TABLE)
        applied = {row[0] for row in con.execute("SELECT name FROM schema_migrations").fetchall()}
        versions.refuse_unknown_migrations(self.location, applied)  # before this code changes anything
        for name, statements in MIGRATIONS:
            if name in applied:
                continue
            con.execute("BEGIN")
            try:
                for sql in statements:
                    con.execute(sql)
                con.execute("INSERT INTO schema_migrations VALUES (?, make_timestamp(?))", [name, 0])
                con.execute("COMMIT")
            except BaseException as exc:
                self._rollback(exc)
                raise

        versions.refuse_newer_formats(self.location, self._newest_formats())

    def _check_versions(self) -> None:
        """``_migrate``'s checks, for a read-only open (a file without tables is left to fail later)."""
        tables = {row[0] for row in self.connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if "schema_migrations" in tables:
            applied = [row[0] for row in self.connection.execute("SELECT name FROM schema_migrations").fetchall()]
            versions.refuse_unknown_migrations(self.location, applied)
        if {"events", "executions"} <= tables:
            versions.refuse_newer_formats(self.location, self._newest_formats())

    def _newest_formats(self) -> list[Any]:
        rows = self.connection.execute(versions.newest_formats_sql("duckdb")).fetchall()
        return [row[0] for row in rows]

    def applied_migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        with self.reading("list its migrations"):
            rows = self.connection.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
        return [r[0] for r in rows]

    # -- writes ---------------------------------------------------------------------------------

    def append(self, events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
        """Atomically append events and content, updating the executions projection.

        Raises:
            JournalWriteError: the commit failed (nothing of it was written); DuckDB's error is its
                cause, never masked by the rollback.
            UsageError: a payload cannot be journaled (nothing was written), or the call came from a
                synchronous tool's worker thread (``check_on_loop``).
        """
        check_on_loop(self.location)
        if self.read_only:
            raise JournalError(f"the journal {self.location} is open read-only; open it read-write to write")
        # One list per column, unnested by one statement: binding six lists costs the same for 2
        # rows or 500 (a group commit's), where a VALUES row per event binds six parameters each.
        params: list[Any] = [
            [journal_id(e.execution_id) for e in events],
            [e.seq for e in events],
            [str(e.kind) for e in events],
            [journal_step_id(e.step_id) for e in events],
            [_us(e.at) for e in events],
            [canonical_json(e.data) if e.data_json is None else e.data_json for e in events],
        ]
        try:
            with self._write_lock:
                self._write(events, contents, params)
        except duckdb.ConstraintException as exc:
            why = "A duplicate seq or execution: is another runtime writing this execution?"
            raise write_error(self.location, events, exc, why=why) from exc
        except duckdb.Error as exc:
            raise write_error(self.location, events, exc) from exc

    def _write(self, events: Sequence[Event], contents: Sequence[ContentBlob], params: list[Any]) -> None:
        changes = projection_changes(events)
        con = self.connection
        if not contents and not changes:
            if events:
                _insert_events(con, params)
            return
        at = _us(events[0].at) if events else 0
        con.execute("BEGIN")
        try:
            for blob in contents:
                con.execute(
                    "INSERT INTO content VALUES (?, ?, ?, ?, ?, make_timestamp(?)) ON CONFLICT DO NOTHING",
                    [blob.digest, len(blob.data), blob.media_type, blob.data, blob.tainted, at],
                )
            if events:
                _insert_events(con, params)
            # One statement each for the executions the commit starts and those it moves on (64
            # runs finishing in one group commit: two statements, not 64).
            rows = projection_rows(changes)
            if rows.created:
                con.execute(_INSERT_EXECUTIONS, rows.created_columns(_us))
            if rows.updated:
                con.execute(_UPDATE_EXECUTIONS, rows.updated_columns(_us))
            con.execute("COMMIT")
        except BaseException as exc:
            self._rollback(exc)
            raise

    def _rollback(self, cause: BaseException) -> None:
        """Roll back the transaction ``cause`` broke, if one is still open; a failing rollback is
        a note on ``cause``, never a replacement for it."""
        try:
            self.connection.execute("ROLLBACK")
        except duckdb.Error as exc:  # no transaction is active (a failed COMMIT ends it), or the file is gone
            cause.add_note(f"(the rollback after it did not run either: {exc})")

    @contextmanager
    def parallel_reads(self) -> Iterator[None]:
        """Let DuckDB use every core for the (analysis) queries run inside the block."""
        with self.reading("set up a parallel read"):
            self.connection.execute(f"SET threads TO {os.cpu_count() or 1}")
        try:
            yield
        finally:
            if not self._closed:
                self.connection.execute(f"SET threads TO {_WRITE_THREADS}")

    # -- reads ----------------------------------------------------------------------------------
    def read(self, execution_id: str) -> list[Event]:
        """Return an execution's events in order."""
        return self._events_after(execution_id, 0)  # seqs count from 1

    def read_after(self, execution_id: str, seq: int) -> list[Event]:
        """Return an execution's events after ``seq``, in order (``TailReader``)."""
        return self._events_after(execution_id, seq)

    def _events_after(self, execution_id: str, seq: int) -> list[Event]:
        eid = journal_id(execution_id)
        after = f" after event {seq}" if seq else ""
        with self.reading(f"read execution {execution_id!r}{after}"):
            rows = self.connection.execute(
                'SELECT seq, kind, step_id, epoch_us("at"), data FROM events WHERE execution_id = ? AND seq > ? '
                "ORDER BY seq",
                [eid, seq],
            ).fetchall()
        return [Event(eid, n, kind, step, us / 1e6, json.loads(data)) for n, kind, step, us, data in rows]

    def _record(self, row: tuple[Any, ...]) -> ExecutionRecord:
        return ExecutionRecord(row[0], row[1], row[2], row[3] / 1e6, row[4] / 1e6)

    def get_execution(self, execution_id: str) -> ExecutionRecord | None:
        """Return one execution's projection row."""
        with self.reading(f"read execution {execution_id!r}"):
            row = self.connection.execute(
                "SELECT execution_id, flow, status, epoch_us(created_at), epoch_us(updated_at) "
                "FROM executions WHERE execution_id = ?",
                [journal_id(execution_id)],
            ).fetchone()
        return None if row is None else self._record(row)

    def get_executions(self, execution_ids: Sequence[str]) -> dict[str, ExecutionRecord]:
        """The projection rows of the executions that exist among ``execution_ids``, by stored id
        (``journal_id``), in one query (``BatchedLookup``: many runs starting together)."""
        ids = journal_ids(execution_ids)
        with self.reading(f"read {len(ids)} executions"):
            rows = self.connection.execute(
                "SELECT execution_id, flow, status, epoch_us(created_at), epoch_us(updated_at) "
                "FROM executions WHERE execution_id IN (SELECT unnest($1::VARCHAR[]))",
                [ids],
            ).fetchall()
        return {row[0]: self._record(row) for row in rows}

    def list_executions(self, status: str | None = None) -> list[ExecutionRecord]:
        """Return executions, oldest first."""
        sql = "SELECT execution_id, flow, status, epoch_us(created_at), epoch_us(updated_at) FROM executions"
        params: list[Any] = []
        if status is not None:
            sql += " WHERE status = ?"
            params.append(status)
        with self.reading("list its executions"):
            rows = self.connection.execute(sql + " ORDER BY created_at, execution_id", params).fetchall()
        return [self._record(r) for r in rows]

    def get_content(self, digest: str) -> bytes | None:
        """Return stored bytes, or None."""
        with self.reading(f"read content {digest}"):
            row = self.connection.execute("SELECT bytes FROM content WHERE digest = ?", [digest]).fetchone()
        return None if row is None else bytes(row[0])

    def content_info(self, digest: str) -> tuple[int, str, bool] | None:
        """Return size, media type and taint of stored content."""
        with self.reading(f"read content {digest}"):
            row = self.connection.execute(
                "SELECT size, media_type, tainted FROM content WHERE digest = ?", [digest]
            ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), bool(row[2]))

    def snapshot(self, path: str | Path, *, overwrite: bool = False) -> SnapshotInfo:
        """Write a consistent single-file copy of the journal to ``path``, while it is in use.

        Every committed event, the executions projection, the content and the applied migrations are
        in the copy; events staged but not yet committed are not. Commits wait while the copy is
        made (a checkpoint, then a file copy). The copy opens with ``Runtime.open(path)``.

        Args:
            path: The new file.
            overwrite: Replace ``path`` if it exists.

        Raises:
            UsageError: ``path`` exists (and ``overwrite`` is false), is this journal, is held open,
                or this journal is in memory.
            JournalError: the checkpoint or the copy failed (the journal itself is unchanged).
        """
        target = Path(path)
        if self._closed:
            raise JournalReadError(f"the journal {self.location} is closed: open it again to snapshot it")
        if self.location == ":memory:":
            raise UsageError(
                "an in-memory journal (':memory:') has no file to snapshot: open a file journal "
                "(loom.Runtime.open('loom.duckdb')) to keep a copy"
            )
        if set(same_file.file_keys(str(target))) & set(same_file.file_keys(self.location)):
            raise UsageError(f"cannot snapshot the journal {self.location} onto itself: give another path")
        if same_file.holder_of(str(target)) is not None:
            raise UsageError(f"cannot snapshot onto {target}: a journal open in this process holds it; close it first")
        if target.exists() and not overwrite:
            raise UsageError(
                f"{target} already exists: give a new path, or replace it with overwrite=True "
                "(--overwrite in loom-nb journal snapshot and %loom snapshot)"
            )
        partial = target.with_name(f".{target.name}.partial")
        try:
            _wal(partial).unlink(missing_ok=True)  # a WAL a crashed snapshot left must not be folded in
            with self._write_lock:
                with self.reading(f"be checkpointed for a snapshot to {target}"):
                    if not self.read_only:
                        self.connection.execute("CHECKPOINT")
                self._copy_files(partial)
            _fold_wal(partial)
            info = SnapshotInfo.of(partial, target)
            os.replace(partial, target)
        except (OSError, duckdb.Error) as exc:
            raise JournalError(
                f"could not snapshot the journal {self.location} to {target}: {type(exc).__name__}: {exc}. "
                "The journal is unchanged; check the target folder (space, permissions) and try again."
            ) from exc
        finally:
            for leftover in (partial, _wal(partial)):
                leftover.unlink(missing_ok=True)
        return info

    def _copy_files(self, partial: Path) -> None:
        """Copy the file, and its WAL when one has data (a read-only journal cannot checkpoint it)."""
        shutil.copyfile(self.location, partial)
        wal = _wal(Path(self.location))
        if wal.exists() and wal.stat().st_size > 0:
            shutil.copyfile(wal, _wal(partial))

    def close(self) -> None:
        """Checkpoint, then close the connection (idempotent); the file may be opened again in
        this process. After it the file holds everything on its own (no ``.wal`` left to copy)."""
        if not self._closed:
            with self._write_lock:
                if not self.read_only:
                    # a failed checkpoint loses nothing: the WAL holds every commit, replayed at the next open
                    with suppress(duckdb.Error):
                        self.connection.execute("CHECKPOINT")
                self._closed = True
                self.connection.close()
                if not self.read_only and self.location != ":memory:":
                    _remove_holder(self.location)
            self._release()

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran (or the file could not be opened)."""
        return self._closed

    def _release(self) -> None:
        same_file.release(self._held, self)
        self._held = []


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _fold_wal(path: Path) -> None:
    """Fold a copied WAL into its copied file, so the copy is one self-contained file."""
    if _wal(path).exists():
        con = duckdb.connect(str(path), config={**_OWN_FILE_ONLY})
        try:
            con.execute("CHECKPOINT")
        finally:
            con.close()


@dataclass(frozen=True, kw_only=True)
class SnapshotInfo:
    """What ``DuckDBJournal.snapshot`` wrote, counted in the copy itself."""

    #: The copy.
    path: Path
    #: Events in the copy.
    events: int
    #: Executions (rows of the executions projection) in the copy.
    executions: int
    #: Content blobs in the copy.
    contents: int
    #: The copy's size in bytes.
    size: int

    @classmethod
    def of(cls, written: Path, path: Path) -> SnapshotInfo:
        """Count what the file ``written`` holds (it will be renamed to ``path``)."""
        con = duckdb.connect(str(written), read_only=True, config={**_OWN_FILE_ONLY})
        try:
            row = con.execute(
                "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM executions), "
                "(SELECT count(*) FROM content)"
            ).fetchone()
        finally:
            con.close()
        assert row is not None
        return cls(path=path, events=row[0], executions=row[1], contents=row[2], size=written.stat().st_size)

    def __str__(self) -> str:
        return (
            f"wrote {self.path}: {self.events} events, {self.executions} executions, "
            f"{self.contents} content blobs, {self.size} bytes"
        )
