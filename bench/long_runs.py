"""Long runs stay flat: the per-turn cost at the end of a 10,000-turn run against its turn 100.

One agent run of ``--turns`` turns on the peers' workload (``bench/agent.py``: ~300 B of text and
one ~200 B tool call per model turn, a ~500 B tool result), with the defaults a user gets:
``stream=True`` and ``ScriptedModel``'s own usage estimate (no usage in the script). Each tool call
records ``time.perf_counter()``; the per-turn cost is the difference between consecutive calls. The
figure is the median per-turn cost over the last 100 turns against the median over turns 100-199 of
the same run (the baseline), and the process's RSS growth from turn 100 to the end. On a DuckDB
file, and on PostgreSQL when ``--postgres URL`` is given (a fresh schema, dropped after).

Run: ``.venv/bin/python bench/long_runs.py [--turns 10000] [--postgres postgresql://...]``
"""

from __future__ import annotations

import argparse
import itertools
import resource
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import loom_nb as loom
from loom_nb.agent import TranscriptGrowthWarning
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse

TEXT = ("I looked at the previous result and will now call the tool again with the next batch. " * 4)[:300]
ARG = "x" * 170
RESULT = "r" * 480
TARGET = 1.2
RSS_TARGET_MB = 50

warnings.simplefilter("ignore", TranscriptGrowthWarning)


def rss_mb() -> float:
    """The resident set size now, in MB (Linux: /proc/self/statm)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * resource.getpagesize() / 1e6
    except OSError:  # pragma: no cover - not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def long_run(turns: int, runtime: loom.Runtime) -> dict[str, float]:
    """Run ``turns`` turns on ``runtime``; the per-turn figures and RSS."""
    stamps: list[float] = []
    rss: dict[int, float] = {}
    state = {"turn": 0}

    def respond(request: ModelRequest) -> ModelResponse:
        turn = state["turn"]
        state["turn"] += 1
        if turn >= turns - 1:
            return ModelResponse.text("All batches are done.")
        return ModelResponse.tool_calls([("work", {"turn": turn, "batch": ARG})], text=TEXT)

    @loom.tool(idempotent=True)
    def work(turn: int, batch: str) -> str:
        """Process one batch."""
        stamps.append(time.perf_counter())
        if turn in (100, turns - 2):
            rss[turn] = rss_mb()
        if turn % 1000 == 0:
            print(f"  turn {turn}", file=sys.stderr, flush=True)
        return f"batch {turn} done: {RESULT}"

    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[work], name="long", max_turns=turns + 1)
    run = agent.start("Process every batch.", runtime=runtime, execution_id="long-1")
    assert run.status == "completed", run
    costs = [(b - a) * 1000 for a, b in itertools.pairwise(stamps)]
    early = statistics.median(costs[100:200])
    late = statistics.median(costs[-100:])
    return {"early_ms": early, "late_ms": late, "ratio": late / early, "rss_growth_mb": rss[turns - 2] - rss[100]}


def report(label: str, turns: int, r: dict[str, float]) -> None:
    print(
        f"{label}: {turns} turns, per turn at the end {r['late_ms']:.2f} ms vs turn 100 {r['early_ms']:.2f} ms: "
        f"{r['ratio']:.2f}x (target <= {TARGET}x); RSS growth {r['rss_growth_mb']:.1f} MB (target <= {RSS_TARGET_MB})"
    )


def main() -> None:
    """Run the long run on DuckDB (and PostgreSQL) and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (a fresh schema is used)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rt = loom.Runtime.open(str(Path(tmp) / "long.duckdb"), flows=FlowRegistry())
        try:
            report("DuckDB file", args.turns, long_run(args.turns, rt))
        finally:
            rt.close()
    if args.postgres:
        import psycopg

        schema = f"loom_long_{time.time_ns()}"
        with psycopg.connect(args.postgres, autocommit=True) as con:
            con.execute(f"CREATE SCHEMA {schema}")
        try:
            sep = "&" if "?" in args.postgres else "?"
            rt = loom.Runtime.open(f"{args.postgres}{sep}options=-csearch_path%3D{schema}", flows=FlowRegistry())
            try:
                report("PostgreSQL", args.turns, long_run(args.turns, rt))
            finally:
                rt.close()
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as con:
                con.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
