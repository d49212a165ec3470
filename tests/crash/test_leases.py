"""Many processes on one PostgreSQL journal: leases decide who drives an execution.

Four real processes recover the same 40 crashed executions at once: each completes exactly once,
with no duplicate seq and no repeated side effect. In one process, two engines show the rules:
a live lease is left alone, and a process that lost its lease stops with ``LeaseLostError``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loom_nb.errors import LeaseLostError
from loom_nb.journal.events import EventKind
from loom_nb.journal.postgres_store import PostgresJournal
from loom_nb.kernel import EffectContext, Engine, ExecutionContext, FlowRegistry
from tests import stores
from tests.crash import lease_flow

ONE_STORE = "leases are the PostgreSQL journal's (a DuckDB file has one process)"
SCRIPT = Path(lease_flow.__file__)
N = 40


@pytest.mark.slow
def test_four_processes_recover_forty_crashed_executions_each_exactly_once(
    _postgres_server: str, tmp_path: Path
) -> None:
    url = stores.new_schema("leases")
    log = tmp_path / "effects.log"
    seeded = subprocess.run(
        [sys.executable, str(SCRIPT), url, str(log), "seed", str(N)], capture_output=True, text=True, timeout=120
    )
    assert seeded.returncode == lease_flow.CRASH_EXIT_CODE, seeded.stderr
    journal = PostgresJournal(url)
    try:
        assert len(journal.list_executions("running")) == N
        procs = [
            subprocess.Popen(
                [sys.executable, str(SCRIPT), url, str(log), "recover"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        outs = [p.communicate(timeout=180) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
        done = [json.loads(out.strip().splitlines()[-1])["completed"] for out, _ in outs]
        completed = [eid for per_process in done for eid in per_process]
        assert sorted(completed) == [f"job-{i:03d}" for i in range(N)]  # each exactly once, by one process
        assert {r.status for r in journal.list_executions()} == {"completed"}
        for i in range(N):
            events = journal.read(f"job-{i:03d}")
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            assert [e.kind for e in events].count(EventKind.EXECUTION_COMPLETED) == 1
        calls = Counter(tuple(line.split(" ")[:2]) for line in log.read_text().splitlines())
        assert {eid for (effect, eid) in calls if effect == "prep"} == {f"job-{i:03d}" for i in range(N)}
        # the non-idempotent call: exactly once per execution, across the seed and the four recoverers
        assert Counter(eid for (effect, eid), n in calls.items() for _ in range(n) if effect == "charge") == Counter(
            {f"job-{i:03d}": 1 for i in range(N)}
        )
        assert journal.lease_owner("job-000") is None  # every lease given back
        print("completed per process:", [len(d) for d in done])
    finally:
        journal.close()


def _engine(url: str, flows: FlowRegistry, calls: list[str]) -> Engine:
    rt = Engine(PostgresJournal(url), flows=flows)

    def charge(value: Any, ctx: EffectContext) -> Any:
        calls.append(ctx.execution_id)
        return value

    rt.effects.register("charge", charge)
    return rt


async def test_a_live_lease_is_left_alone_and_a_lost_one_stops_the_run(_postgres_server: str) -> None:
    url = stores.new_schema("lost")
    flows = FlowRegistry()
    go = asyncio.Event()

    async def body(ctx: ExecutionContext, inp: Any) -> Any:
        await ctx.execute("charge", 1)
        await go.wait()
        await ctx.execute("charge", 2)
        return "done"

    flows.register(body, name="slow")
    calls_a: list[str] = []
    calls_b: list[str] = []
    a, b = _engine(url, flows, calls_a), _engine(url, flows, calls_b)
    a.lease_seconds = 0.3
    try:
        run_a = asyncio.create_task(a.start("slow", None, execution_id="x"))
        while not calls_a:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # past the lease's first term: the heartbeat keeps it
        assert await b.recover() == []  # a live lease: B leaves it alone
        assert a.journal.lease_owner("x") == a.lease_owner
        # B takes the lease over (as after an expiry); A notices at its next heartbeat
        assert b.journal.take_over_lease("x", b.lease_owner, a.lease_owner, 30)  # type: ignore[attr-defined]
        await asyncio.sleep(0.3)
        written = len(a.journal.read("x"))
        go.set()
        with pytest.raises(LeaseLostError, match="lost the lease of execution 'x'"):
            await run_a
        assert len(a.journal.read("x")) == written  # A wrote nothing more
        assert calls_a == ["x"] and calls_b == []  # the non-idempotent second call never ran
    finally:
        a.close()
        b.close()
