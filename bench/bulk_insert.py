"""Where a commit's events should move as one Arrow table instead of six bound lists
(``loom_nb.journal.duckdb_store.ARROW_ROWS``): one committed insert of ``n`` turn-sized events into a
DuckDB file journal's ``events`` table, both ways, alternating, median of ``--repeats``.

DuckDB converts a bound list value by value; an Arrow table it reads as it is, but building one and
handing it over has a fixed cost. The ratio column is Arrow / lists (below 1: Arrow is cheaper).

A third column times DuckDB's appender (``con.appender("events")``, ``append_rows``, ``flush``; not
the journal's way), fed the same rows with ``at`` as a ``datetime`` (a TIMESTAMP it appends takes
no integer), as ``appender / lists``. Its instruction counts against the journal's two ways are in
docs/performance.md ("What we tried and why it lost"): in CPU it only beats the lists.

A second table shows where one small commit's time goes: a ``SELECT 1`` on the journal's
connection, the journal's two-row insert committed and the same insert rolled back (no WAL flush,
no fsync), and a bare 1 KB ``write`` + ``fsync`` on the same disk.

Run: ``.venv/bin/python bench/bulk_insert.py [--repeats 60] [--rows 4,32,64,96,128,256]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import agent as peers

from loom_nb.journal import DuckDBJournal, Event, EventKind, duckdb_store


def events(start: int, n: int) -> list[Event]:
    """``n`` events of 64 executions, each a completed step holding a turn's payload."""
    data = {"output": {"text": peers.TEXT, "args": peers.ARG}}
    return [Event(f"run-{i % 64}", start + i, EventKind.STEP_COMPLETED, f"s{start + i}", 1.0, data) for i in range(n)]


_EPOCH = datetime(1970, 1, 1)


def by_appender(con: Any, columns: list[list[Any]]) -> None:
    """The six columns' rows through DuckDB's appender (``at`` as a naive UTC ``datetime``)."""
    appender = con.appender("events")
    ats = [_EPOCH + timedelta(microseconds=us) for us in columns[4]]
    appender.append_rows(zip(columns[0], columns[1], columns[2], columns[3], ats, columns[5], strict=True))
    appender.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--rows", default="4,32,64,96,128,256")
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    threshold = duckdb_store.ARROW_ROWS
    times: dict[tuple[int, str], list[float]] = {}
    journal_insert = duckdb_store._insert_events  # lists or Arrow, by ARROW_ROWS
    with tempfile.TemporaryDirectory(prefix="loom-bulk-") as name:
        journal = DuckDBJournal(Path(name) / "bulk.duckdb")
        seq = 1
        for _ in range(args.repeats):
            for n in sizes:
                for way, rows, insert in (
                    ("lists", 10**9, journal_insert),
                    ("arrow", 1, journal_insert),
                    ("appender", 10**9, by_appender),
                ):
                    batch = events(seq, n)
                    seq += n
                    duckdb_store.ARROW_ROWS = rows  # force one way
                    duckdb_store._insert_events = insert
                    began = time.perf_counter()
                    journal.append(batch)
                    times.setdefault((n, way), []).append(time.perf_counter() - began)
        duckdb_store.ARROW_ROWS, duckdb_store._insert_events = threshold, journal_insert
        small = statement_costs(journal, Path(name), seq, args.repeats * 4)
        journal.close()
    print(f"# one committed insert of n events, median of {args.repeats} (ARROW_ROWS = {threshold})\n")
    print("| rows | bound lists | Arrow table | Arrow / lists | appender / lists |\n|---|---|---|---|---|")
    for n in sizes:
        spent = {way: statistics.median(times[(n, way)]) for way in ("lists", "arrow", "appender")}
        print(
            f"| {n} | {spent['lists'] * 1000:.3f} ms | {spent['arrow'] * 1000:.3f} ms "
            f"| {spent['arrow'] / spent['lists']:.2f} | {spent['appender'] / spent['lists']:.2f} |"
        )
    print(f"\n# one small commit, median of {args.repeats * 4}\n")
    print("| what | time |\n|---|---|")
    for what, spent in small.items():
        print(f"| {what} | {spent * 1000:.3f} ms |")


def statement_costs(journal: DuckDBJournal, folder: Path, seq: int, repeats: int) -> dict[str, float]:
    """Median seconds of each part of one small commit (see the module's docstring)."""
    con = journal.connection
    fd = os.open(folder / "fsync-probe", os.O_WRONLY | os.O_CREAT)
    times: dict[str, list[float]] = {}

    def rolled_back(batch: list[Event]) -> None:
        con.execute("BEGIN")
        journal.append(batch)
        con.execute("ROLLBACK")

    def synced() -> None:
        os.write(fd, b"x" * 1024)
        os.fsync(fd)

    try:
        for _ in range(repeats):
            committed, discarded = events(seq, 2), events(seq + 2, 2)
            seq += 4
            for what, run in (
                ("SELECT 1", lambda: con.execute("SELECT 1").fetchall()),
                ("two-row insert, committed", partial(journal.append, committed)),
                ("two-row insert, rolled back", partial(rolled_back, discarded)),
                ("1 KB write + fsync", synced),
            ):
                began = time.perf_counter()
                run()
                times.setdefault(what, []).append(time.perf_counter() - began)
    finally:
        os.close(fd)
    return {what: statistics.median(spent) for what, spent in times.items()}


if __name__ == "__main__":
    main()
