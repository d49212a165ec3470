"""The write path's targets (one commit per turn, group commit, long runs flat), as ratios measured in
one run of this script on the peers' scripted workload of ``bench/agent.py`` (one model call and one
tool call per turn, DuckDB file journal):

- ``insert``: one committed DuckDB insert of a turn's events (two rows, ~1 KB), median of 400;
- idempotent tool: per-turn time of an N = 200 run (median of ``--runs`` runs, each on a fresh file)
  / ``insert``; the same with a non-idempotent tool;
- 64 concurrent runs of N = 50 on one runtime: aggregate turns/s / one run's turns/s (the same run
  alone on the same kind of runtime, median of ``--runs``); beside it the same 64 runs on
  ``HeadersOnly`` (about no journal cost): DuckDB / that is what the journal costs the 64 runs,
  and that / one DuckDB run is the ratio's ceiling at the loop's present cost (a faster journal
  cannot pass it by much, only a cheaper loop or a slower single commit);
- a 2,000-turn run: per-turn time around turn 2,000 (median of turns 1,950-1,999) / around turn 100
  (median of turns 75-124), and the process's RSS growth over the run (VmRSS after / before); the
  same ratio on an in-memory journal (the loop's own growth: the disk's latency drifts under load);
- kill at N/2: ``bench/agent.py``'s kill (a process running N = 200 dies after half the events; a fresh
  one recovers) and the completed calls the recovery made again.

The disk's fsync latency drifts while other processes run, so each ratio is taken between
measurements made next to each other (a run and the inserts timed just before and after it; one run
alone and 64 together, pair by pair), and the median of the runs' ratios is printed.

Run: ``.venv/bin/python bench/write_path.py [--runs 5] [--long 2000] [--concurrent 64]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.agent import TranscriptGrowthWarning
from loom_nb.journal import DuckDBJournal, Event, InMemoryJournal
from loom_nb.journal.events import STATUS_OF_KIND
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse, Usage

sys.path.insert(0, str(Path(__file__).parent))
import agent as peers

warnings.simplefilter("ignore", TranscriptGrowthWarning)
TARGETS = {"idempotent": 1.6, "non_idempotent": 2.6, "concurrent": 8.0, "long": 1.2, "rss_mb": 20.0}


USAGE = Usage(input_tokens=1000, output_tokens=100)


def respond_for(turns: int) -> Any:
    """The peers' scripted model: a tool call per turn for ``turns - 1`` turns, then an answer. The
    turn is read from the request's length (user message, then an assistant and a tool message per
    turn) and the usage is given, so the fake model's own cost does not grow with the transcript.
    Each response is built once, with its usage (until 2026-12-04 it was built, then copied with
    the usage: a ``model_copy`` per turn, the fake's own cost, not the loop's)."""

    def respond(request: ModelRequest) -> ModelResponse:
        turn = (len(request.messages) - 1) // 2
        if turn >= turns - 1:
            return ModelResponse.text("All batches are done.", usage=USAGE)
        return ModelResponse.tool_calls([("work", {"turn": turn, "batch": peers.ARG})], text=peers.TEXT, usage=USAGE)

    return respond


class Scripted:
    """``ScriptedModel`` without its request history (``ScriptedModel.history`` keeps every request,
    each holding the whole transcript: memory that grows with the square of the turns, the fake's
    own, not the loop's)."""

    name = "scripted"

    def __init__(self, turns: int) -> None:
        self.inner = loom.ScriptedModel(respond_for(turns))

    async def complete(
        self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        """Answer from the script and forget the request."""
        response = await self.inner.complete(request, on_delta=on_delta)
        self.inner.history.clear()
        return response


def build(turns: int, *, idempotent: bool = True, marks: list[float] | None = None) -> loom.Agent:
    """The bench agent; ``marks`` receives ``perf_counter()`` at every tool call."""

    @loom.tool(idempotent=idempotent)
    async def work(turn: int, batch: str) -> str:
        """Process one batch."""
        if marks is not None:
            marks.append(time.perf_counter())
        return peers.work_result(turn)

    return loom.Agent(model=Scripted(turns), tools=[work], name="bench", max_turns=turns + 1)


def fresh(tmp: Path, name: str) -> loom.Runtime:
    return loom.Runtime(DuckDBJournal(tmp / f"{name}-{time.perf_counter_ns()}.duckdb"), flows=FlowRegistry())


def insert_ms(tmp: Path, commits: int = 400) -> float:
    """One committed insert of a turn's two rows (a completion and a start, turn-sized)."""
    journal = DuckDBJournal(tmp / f"insert-{time.perf_counter_ns()}.duckdb")
    journal.append([Event("floor", 1, "execution_started", None, 0.0, {"flow": "floor"})])
    seq, times = 2, []
    for i in range(commits):
        done = {"output": {"text": peers.TEXT, "args": peers.ARG}}
        nxt = {"input": {"batch": peers.ARG}, "digest": "sha256:" + "0" * 64}
        evs = [
            Event("floor", seq, "step_completed", f"s{i}", 0.0, done),
            Event("floor", seq + 1, "step_started", f"s{i + 1}", 0.0, nxt),
        ]
        began = time.perf_counter()
        journal.append(evs)
        times.append(time.perf_counter() - began)
        seq += 2
    journal.close()
    return statistics.median(times) * 1000


def one_run_ms(tmp: Path, turns: int, *, idempotent: bool) -> float:
    """Per-turn wall time (ms) of one run on a fresh file."""
    rt = fresh(tmp, "run")
    agent = build(turns, idempotent=idempotent)
    began = time.perf_counter()
    run = agent.start("Process every batch.", runtime=rt, execution_id="bench-1")
    wall = time.perf_counter() - began
    assert run.status == "completed" and run.result is not None and run.result.turns == turns, run
    rt.close()
    return wall / turns * 1000


async def _concurrent(rt: loom.Runtime, agent: loom.Agent, runs: int) -> None:
    agent.register(rt)
    results = await asyncio.gather(
        *(rt.start(agent.flow_name, "Process every batch.", execution_id=f"c-{i}") for i in range(runs))
    )
    assert {r.status for r in results} == {"completed"}, results


class HeadersOnly(InMemoryJournal):
    """An in-memory journal that keeps each step event's header without its payload (status
    events whole, for the executions projection): no payload encoded or parsed (an empty object
    each), nothing written, so about what a journal costing nothing would leave the loop. The
    ceiling's journal; a live run never reads its steps' payloads back."""

    def append(self, events: Sequence[Event], contents: Sequence[Any] = ()) -> None:
        """Keep the headers (and the status events whole)."""
        kept = [
            e if e.kind in STATUS_OF_KIND else Event(e.execution_id, e.seq, e.kind, e.step_id, e.at, {}, "{}")
            for e in events
        ]
        super().append(kept, contents)


def turns_per_second(tmp: Path, turns: int, runs: int, *, free: bool = False) -> float:
    """Aggregate turns/s of ``runs`` concurrent runs of ``turns`` turns on one runtime (on a DuckDB
    file, or with ``free`` on ``HeadersOnly``: about no journal cost at all)."""
    rt = loom.Runtime(HeadersOnly(), flows=FlowRegistry()) if free else fresh(tmp, "concurrent")
    agent = build(turns)
    began = time.perf_counter()
    asyncio.run(_concurrent(rt, agent, runs))
    wall = time.perf_counter() - began
    rt.close()
    return runs * turns / wall


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def long_run(tmp: Path, turns: int, *, memory: bool = False) -> dict[str, float]:
    marks: list[float] = []
    rt = loom.Runtime(InMemoryJournal(), flows=FlowRegistry()) if memory else fresh(tmp, "long")
    agent = build(turns, marks=marks)
    before = rss_mb()
    run = agent.start("Process every batch.", runtime=rt, execution_id="long-1")
    after = rss_mb()
    assert run.status == "completed", run
    rt.close()
    per_turn = [(b - a) * 1000 for a, b in itertools.pairwise(marks)]
    early = statistics.median(per_turn[75:125])
    late = statistics.median(per_turn[turns - 51 : turns - 1])
    return {"early": early, "late": late, "rss": after - before}


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=64)
    parser.add_argument("--concurrent-turns", type=int, default=50)
    parser.add_argument("--long", type=int, default=2000)
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args()
    n, k, kt = args.turns, args.concurrent, args.concurrent_turns
    with tempfile.TemporaryDirectory(prefix="loom-write-path-") as name:
        tmp = Path(name)
        one_run_ms(tmp, 10, idempotent=True)  # warm-up
        # The disk's latency drifts under load (other processes on the machine): each ratio is taken
        # between measurements made next to each other, and the median of the runs' ratios is shown.
        insert = insert_ms(tmp)
        idem_runs, non_runs, idem_ratios, non_ratios = [], [], [], []
        for _ in range(args.runs):
            for idempotent, runs, ratios in ((True, idem_runs, idem_ratios), (False, non_runs, non_ratios)):
                before = insert_ms(tmp, 100)
                runs.append(one_run_ms(tmp, n, idempotent=idempotent))
                ratios.append(runs[-1] / statistics.mean([before, insert_ms(tmp, 100)]))
        idem, non = statistics.median(idem_runs), statistics.median(non_runs)
        triples = [
            (turns_per_second(tmp, kt, 1), turns_per_second(tmp, kt, k), turns_per_second(tmp, kt, k, free=True))
            for _ in range(args.runs)
        ]
        alone = statistics.median(a for a, _, _ in triples)
        together = statistics.median(t for _, t, _ in triples)
        no_journal = statistics.median(m for _, _, m in triples)
        concurrent_ratio = statistics.median(t / a for a, t, _ in triples)
        # What the ratio could reach if the journal cost the 64 runs about nothing: 64 runs' turns/s
        # on ``HeadersOnly`` (the loop's own cost) against one DuckDB run's.
        ceiling = statistics.median(m / a for a, _, m in triples)
        journal_share = statistics.median(t / m for _, t, m in triples)
        long = long_run(tmp, args.long)
        flat = long_run(tmp, args.long, memory=True)
        kill = None
        if not args.no_kill:
            rt = fresh(tmp, "count")
            build(peers.KILL_TURNS).start("Process every batch.", runtime=rt, execution_id=peers.EXECUTION_ID)
            events = len(rt.journal.read(peers.EXECUTION_ID))
            rt.close()
            kill = peers.kill_at_half(tmp, events)

    print(f"# write path bench: DuckDB file journal, {args.runs} runs (median), one process\n")
    print(
        f"one committed DuckDB insert of a turn's two rows: {insert:.3f} ms (median of 400; the per-turn "
        "ratios divide each run by the mean of 100-insert medians taken just before and after it, and "
        "show the median of the runs' ratios)\n"
    )
    print("| figure | measured | ratio | target |\n|---|---|---|---|")
    rows = [
        (
            f"per-turn, idempotent tool, N={n}",
            f"{idem:.3f} ms",
            statistics.median(idem_ratios),
            TARGETS["idempotent"],
            "<=",
        ),
        (
            f"per-turn, non-idempotent tool, N={n}",
            f"{non:.3f} ms",
            statistics.median(non_ratios),
            TARGETS["non_idempotent"],
            "<=",
        ),
        (
            f"{k} concurrent runs (N={kt}) aggregate / one run",
            f"{together:.0f} / {alone:.0f} turns/s",
            concurrent_ratio,
            TARGETS["concurrent"],
            ">=",
        ),
        (
            f"per-turn at turn {args.long} / at turn 100",
            f"{long['late']:.3f} / {long['early']:.3f} ms",
            long["late"] / long["early"],
            TARGETS["long"],
            "<=",
        ),
    ]
    for label, measured, ratio, target, op in rows:
        ok = ratio <= target if op == "<=" else ratio >= target
        print(f"| {label} | {measured} | {ratio:.2f}x | {op} {target}x ({verdict(ok)}) |")
    print(
        f"| {k} concurrent runs with about no journal cost (headers kept in memory): DuckDB / that "
        f"| {together:.0f} / {no_journal:.0f} turns/s | {journal_share:.2f}x | (the journal's cost to {k} runs) |"
    )
    print(
        f"| the {k}-run ratio's ceiling at this loop cost: {k} runs at about no journal cost / one run on "
        f"DuckDB | {no_journal:.0f} / {alone:.0f} turns/s | {ceiling:.2f}x | (no journal could beat it by much) |"
    )
    ratio = flat["late"] / flat["early"]
    print(
        f"| the same, in-memory journal (the loop's own growth, no disk) | {flat['late']:.3f} / "
        f"{flat['early']:.3f} ms | {ratio:.2f}x | <= {TARGETS['long']}x ({verdict(ratio <= TARGETS['long'])}) |"
    )
    rss_ok = long["rss"] <= TARGETS["rss_mb"]
    print(
        f"| RSS growth over the {args.long}-turn run | {long['rss']:.1f} MB | | "
        f"<= {TARGETS['rss_mb']:.0f} MB ({verdict(rss_ok)}) |"
    )
    if kill is not None:
        print(
            f"| completed calls re-made after a kill at N/2 (N={peers.KILL_TURNS}, crash after "
            f"{kill['crash_after']} events; {kill['completed_before']} completed before) | {kill['remade']} | | "
            f"0 ({verdict(kill['remade'] == 0)}) |"
        )


if __name__ == "__main__":
    main()
