"""How fast ``loom.frames()`` turns a large DuckDB journal into DataFrames.

One real agent run (``ScriptedModel``, routed turns with logged propensities, tool calls, approval
gates, streamed text; on a fake clock) is recorded, and its events become a template. The journal is
then filled with copies of that run (execution id, idempotency keys and texts varied per copy) by one
``INSERT INTO events SELECT ... FROM range(n) CROSS JOIN template`` (never ``executemany``) until it
holds ``--events`` events. Each frame is then read into pandas ``--repeat`` times through one
``Frames`` (views already created); the median is reported. ``steps()`` is the target: under 2 s
for 1M events.

With ``--postgres URL`` the same rows are then copied (psycopg ``COPY``) into a fresh schema of that
PostgreSQL server, and the frames are read through ``loom.Runtime.open(URL)``: the first ``steps()``
(cold: every table moved as Arrow through the ADBC driver into DuckDB, then the view) and the
repeated one (warm: the journal did not change, so only the change check runs and the frame read
last time is copied), the change check alone (``PostgresJournal.change_marker``, which every
``frames()`` call runs), ``steps()`` after one more execution was committed (only its events move:
``PostgresJournal.arrow_changes``) and, in the same run, a fresh ``frames()``'s cold ``steps()``
(every table moved again: what each change cost before). Target: under 3 s for 1M events, cold.

Run: ``.venv/bin/python bench/frames.py [--events 1000000] [--repeat 3] [--memory] [--postgres URL]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

import loom_nb as loom
from loom_nb.journal import Event, InMemoryJournal
from loom_nb.journal.canonical import canonical_json
from loom_nb.kernel import Decision
from loom_nb.messages import ModelRequest
from loom_nb.testing import FakeClock, SequentialIds

TURNS = 12
TEMPLATE_ID = "exec-1"
FRAMES = ("steps", "executions", "turns", "tool_calls", "gates", "decisions", "usage", "log_growth")


@loom.tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file.
    """
    return f"contents of {path}: " + "lorem ipsum dolor sit amet " * 8


@loom.tool(needs_approval=True)
def write_file(path: str, text: str) -> str:
    """Write a file.

    Args:
        path: The file.
        text: What to write.
    """
    return f"wrote {len(text)} characters to {path}"


def _respond(request: ModelRequest) -> loom.ModelResponse:
    n = sum(1 for m in request.messages if m.role == "assistant")
    usage = loom.Usage(input_tokens=300 + 120 * n, output_tokens=60, cost=0.0004)
    if n >= TURNS - 1:
        return loom.ModelResponse.text("All files are updated. " * 4, usage=usage)
    calls: list[tuple[str, dict[str, Any]]] = [("read_file", {"path": f"/src/module_{n}.py"})]
    if n % 3 == 2:
        calls.append(("write_file", {"path": f"/src/module_{n}.py", "text": "fixed " * 20}))
    text = f"Step {n}: reading module {n} to check it. " * 2
    return loom.ModelResponse.tool_calls(calls, text=text, usage=usage)


def _route(models: Sequence[str], request: ModelRequest, turn: int) -> Decision:
    probabilities = [0.7, 0.3]
    return Decision(choice=models[turn % 2], probabilities=probabilities)


async def record_template() -> list[Event]:
    """Record one agent run and return its events."""
    rt = loom.Runtime(InMemoryJournal(), clock=FakeClock(tick=0.05), ids=SequentialIds())
    model = loom.ScriptedModel(_respond)
    agent = loom.Agent(
        tools=[read_file, write_file],
        system="You maintain a code base. " * 10,
        routes=loom.Routes(models=["model.small", "model.large"], policy=_route, name="router"),
        models={"model.small": model, "model.large": model},
        max_turns=TURNS + 2,
    )
    run = agent.start("Fix every module under /src.", runtime=rt)
    while True:
        await run.wait(until="paused")
        if run.status != "suspended":
            break
        for gate in run.gates:
            gate.approve("looks fine")
    await run
    return rt.journal.read(run.id)


def build(rt: loom.Runtime, template: list[Event], n_events: int) -> tuple[int, int, float]:
    """Fill ``rt``'s journal with copies of ``template``; returns (executions, events, seconds)."""
    con = rt.journal.connection  # type: ignore[attr-defined]
    base = template[0].at
    tpl = pd.DataFrame(
        {
            "seq": [e.seq for e in template],
            "kind": [str(e.kind) for e in template],
            "step_id": pd.Series([e.step_id for e in template], dtype=object),
            "offset_us": [round((e.at - base) * 1e6) for e in template],
            "data": [canonical_json(e.data) for e in template],
        }
    )
    copies = -(-n_events // len(template))
    began = time.perf_counter()
    con.register("loom_template", tpl)
    con.execute(
        """
        INSERT INTO events
        SELECT 'run-' || r.i, t.seq, t.kind, t.step_id,
               make_timestamp(1767225600000000 + r.i * 60000000 + t.offset_us),
               CAST(replace(replace(t.data, $tid, 'run-' || r.i), 'module_', 'mod' || (r.i % 97) || '_')
                    AS JSON)
        FROM range($n) AS r(i) CROSS JOIN loom_template AS t
        WHERE (r.i * $per + t.seq) <= $total
        """,
        {"tid": TEMPLATE_ID, "n": copies, "per": len(template), "total": n_events},
    )
    con.execute(
        """
        INSERT INTO executions
        SELECT execution_id, 'agent:agent', 'completed', min("at"), max("at")
        FROM events GROUP BY execution_id
        """
    )
    con.execute("CHECKPOINT")
    con.unregister("loom_template")
    seconds = time.perf_counter() - began
    total = con.execute("SELECT count(*), count(DISTINCT execution_id) FROM events").fetchone()
    return int(total[1]), int(total[0]), seconds


def postgres_copy(rt: loom.Runtime, url: str) -> tuple[str, float]:
    """Copy ``rt``'s journal tables into a fresh schema of ``url``; its URL and the seconds taken."""
    import psycopg

    schema = f"bench_frames_{os.getpid()}"
    con = rt.journal.connection  # type: ignore[attr-defined]
    began = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in url else "?"
    target = f"{url}{sep}options=-csearch_path%3D{schema}"
    loom.Runtime.open(target).close()  # the tables, by the journal's own migrations
    with psycopg.connect(target) as pg:
        for table, select in (
            ("events", 'SELECT execution_id, seq, kind, step_id, "at", CAST(data AS VARCHAR) FROM events'),
            ("executions", "SELECT * FROM executions"),
            ("content", "SELECT * FROM content"),
        ):
            reader = con.sql(select).to_arrow_reader(100_000)
            with pg.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                for batch in reader:
                    for row in zip(*(col.to_pylist() for col in batch.columns), strict=True):
                        copy.write_row(row)
        pg.commit()
    return target, time.perf_counter() - began


def append_execution(target: str, execution_id: str) -> None:
    """Commit a copy of one execution's events (and its row) under ``execution_id`` on ``target``:
    what a run finishing elsewhere adds while a notebook reads frames."""
    import psycopg

    with psycopg.connect(target) as pg:
        source = pg.execute("SELECT min(execution_id) FROM executions").fetchone()[0]
        pg.execute(
            "INSERT INTO executions SELECT %s, flow, status, created_at, updated_at FROM executions "
            "WHERE execution_id = %s",
            [execution_id, source],
        )
        pg.execute(
            'INSERT INTO events SELECT %s, seq, kind, step_id, "at", data FROM events WHERE execution_id = %s',
            [execution_id, source],
        )


def drop_schema(url: str, target: str) -> None:
    """Drop the schema ``postgres_copy`` made."""
    import psycopg

    schema = target.rsplit("%3D", 1)[1]
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def timed(fn: Any, repeat: int) -> tuple[float, int]:
    """Median seconds of ``repeat`` calls, and the rows of the last result."""
    times, rows = [], 0
    for _ in range(repeat):
        began = time.perf_counter()
        rows = len(fn())
        times.append(time.perf_counter() - began)
    return statistics.median(times), rows


def main() -> None:
    """Build the journal, time the frames, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="an in-memory DuckDB journal instead of a file")
    parser.add_argument("--postgres", metavar="URL", help="also time the frames over a PostgreSQL journal")
    args = parser.parse_args()
    pg_rows: list[tuple[str, float, int]] = []

    template = asyncio.run(record_template())
    with tempfile.TemporaryDirectory() as tmp:
        path = ":memory:" if args.memory else os.path.join(tmp, "bench.duckdb")
        with loom.Runtime.open(path) as rt:
            executions, events, build_s = build(rt, template, args.events)
            size = os.path.getsize(path) if path != ":memory:" else 0
            f = loom.frames(rt)
            began = time.perf_counter()
            f.sql("SELECT 1")
            views_s = time.perf_counter() - began
            rows: list[tuple[str, float, int]] = []
            for name in FRAMES:
                median, n = timed(getattr(f, name), args.repeat)
                rows.append((f"`{name}()`", median, n))
            f.close()
            if args.postgres:
                target, copy_s = postgres_copy(rt, args.postgres)
                try:
                    with loom.Runtime.open(target) as pg_rt:
                        pf = loom.frames(pg_rt)
                        began = time.perf_counter()
                        n = len(pf.steps())
                        pg_rows.append(("`steps()` cold (Arrow transfer + view)", time.perf_counter() - began, n))
                        median, n = timed(pf.steps, args.repeat)
                        pg_rows.append((f"`steps()` warm (median of {args.repeat})", median, n))
                        marker = pg_rt.journal.change_marker
                        median, _ = timed(lambda: [marker()], args.repeat)
                        pg_rows.append((f"change check `change_marker()` (median of {args.repeat})", median, 1))
                        appended: list[float] = []
                        for i in range(args.repeat):
                            append_execution(target, f"appended-{i}")
                            began = time.perf_counter()
                            n = len(pf.steps())
                            appended.append(time.perf_counter() - began)
                        pg_rows.append(
                            (
                                f"`steps()` after one execution was appended: only its events moved "
                                f"(median of {args.repeat})",
                                statistics.median(appended),
                                n,
                            )
                        )
                        pf.close()
                        whole: list[float] = []
                        for _ in range(args.repeat):
                            with loom.frames(pg_rt) as fresh:
                                began = time.perf_counter()
                                n = len(fresh.steps())
                                whole.append(time.perf_counter() - began)
                        pg_rows.append(
                            (
                                f"`steps()` with every table moved again (a fresh `frames()`, cold; what "
                                f"each change cost before; median of {args.repeat})",
                                statistics.median(whole),
                                n,
                            )
                        )
                finally:
                    drop_schema(args.postgres, target)
                print(f"PostgreSQL: copied in {copy_s:.1f} s (COPY, not timed below)")

    print(
        f"journal: {events:,} events, {executions:,} executions ({len(template)} events each), "
        f"{'in memory' if args.memory else f'{size / 2**20:.0f} MiB file'}; "
        f"bulk insert {build_s:.2f} s; views created in {views_s * 1e3:.1f} ms; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}\n"
    )
    print(f"| frame | rows | median of {args.repeat} (s) |")
    print("|---|---:|---:|")
    for name, median, n in rows:
        print(f"| {name} | {n:,} | {median:.3f} |")
    steps_s = rows[0][1]
    verdict = "meets" if steps_s < 2.0 else "MISSES"
    print(f"\n`steps()` {verdict} the target (< 2 s for 1M events): {steps_s:.3f} s")
    if pg_rows:
        print("\n| over PostgreSQL | rows | s |\n|---|---:|---:|")
        for name, seconds, n in pg_rows:
            print(f"| {name} | {n:,} | {seconds:.3f} |")
        verdict = "meets" if pg_rows[0][1] < 3.0 else "MISSES"
        print(f"\n`steps()` over PostgreSQL, cold, {verdict} the target (< 3 s for 1M events): {pg_rows[0][1]:.3f} s")


if __name__ == "__main__":
    main()
