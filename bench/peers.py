"""loom_nb beside LangGraph + SQLite on the peers' workload, in one invocation, interleaved.

The workload is ``bench/agent.py``'s: per turn one instant fake model reply (about 300 B of text
and one tool call of about 200 B of arguments) and one tool result (about 500 B), N-1 tool turns
then an answer. LangGraph's side is ``bench/langgraph_workload.py`` (model node + prebuilt
``ToolNode``, messages in a ``DeltaChannel``, SQLite checkpointer on a file, ``durability="sync"``);
loom_nb's is ``bench/agent.py``'s ``build_agent`` on a fresh DuckDB file journal
(``loom.Runtime(DuckDBJournal(path), flows=FlowRegistry())``, the default durability). Every figure
comes from a fresh process per measurement (it builds its agent, runs ``--warmup`` turns on a
separate file untimed, then the timed run on a fresh file, and prints JSON); the repetitions are
interleaved (one process of each system per round, the order rotating each round) so every system
sees the same load on the machine.

1. One run of ``--turns`` N (200): ms per turn (wall time of the run / N, median of ``--runs``
   processes) for LangGraph sync (``SqliteSaver``, ``graph.invoke``), loom_nb ``stream=True`` (the
   default) and loom_nb ``stream=False``; the ratio loom/LangGraph for each loom variant (target
   from issue 30: <= 0.8x). Bytes per turn: LangGraph's checkpoint blobs (``checkpoints``'
   checkpoint + metadata, ``writes``' value) / N and its SQLite file after a WAL checkpoint / N;
   loom_nb's events' canonical JSON / N and its DuckDB file after ``CHECKPOINT`` / N (as
   ``bench/agent.py`` computes them).
2. Many runs: C concurrent runs of ``--many-turns`` (20) turns, for each C in ``--concurrency``
   (64 256 1024): turns/s = C * turns / the wall time from just before the first run starts to all
   done (median of ``--many-runs`` processes): LangGraph async (one ``AsyncSqliteSaver`` file,
   C ``graph.ainvoke`` gathered with asyncio) and loom_nb (``agent.map`` of C inputs with
   ``concurrency=C`` on one runtime, as ``bench/batch.py`` runs many; stream=True). The ratio
   loom/LangGraph (target: >= 5x at C = 64).

Every process is bounded by ``--timeout`` seconds (300); one that exceeds it is reported as such.
The load average before and after is printed: the figures are of a shared machine.
Needs the ``bench`` extra (``pip install -c constraints.txt -e '.[bench]'``).

Run: ``PYTHONPATH=. .venv/bin/python bench/peers.py [--turns 200] [--runs 5] [--concurrency 64 256 1024]
[--many-turns 20] [--many-runs 3] [--warmup 10] [--timeout 300]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import agent as workload  # bench/agent.py: the same turns

HERE = Path(__file__).resolve().parent
LANGGRAPH_SCRIPT = str(HERE / "langgraph_workload.py")
ONE_SYSTEMS = ("langgraph", "loom", "loom-nostream")
LABELS = {
    "langgraph": "LangGraph sync (SqliteSaver, DeltaChannel)",
    "loom": "loom_nb stream=True (default)",
    "loom-nostream": "loom_nb stream=False",
    "langgraph-many": "LangGraph async (AsyncSqliteSaver)",
    "loom-many": "loom_nb agent.map",
}
ONE_TARGET = 0.8
MANY_TARGET = 5.0


# -- loom_nb's children ---------------------------------------------------------------------------------------
def loom_one(path: Path, turns: int, stream: bool, warmup: int) -> dict[str, Any]:
    """One loom_nb run of ``turns`` on a fresh DuckDB file (after ``warmup`` turns on another)."""
    import loom_nb as loom
    from loom_nb.journal import DuckDBJournal
    from loom_nb.kernel import FlowRegistry

    def run(at: Path, n: int) -> tuple[float, int]:
        agent = workload.build_agent(n, stream=stream)
        rt = loom.Runtime(DuckDBJournal(at), flows=FlowRegistry())
        try:
            began = time.perf_counter()
            done = agent.start("Process every batch.", runtime=rt, execution_id=workload.EXECUTION_ID)
            wall = time.perf_counter() - began
            assert done.status == "completed" and done.result is not None and done.result.turns == n, done
            events = rt.journal.read(workload.EXECUTION_ID)
        finally:
            rt.close()
        data = sum(len(json.dumps(e.data, separators=(",", ":"), ensure_ascii=False)) for e in events)
        return wall, data

    if warmup:
        run(path.with_name(path.stem + "-warmup.duckdb"), warmup)
    wall, data = run(path, turns)
    return {"wall": wall, "turns": turns, "data_bytes": data, "file_bytes": workload.file_size_after_checkpoint(path)}


def loom_many(path: Path, concurrency: int, turns: int, warmup: int) -> dict[str, Any]:
    """``concurrency`` loom_nb runs of ``turns`` at once (``agent.map``) on one fresh DuckDB file."""
    import loom_nb as loom
    from loom_nb.journal import DuckDBJournal
    from loom_nb.kernel import FlowRegistry

    def run(at: Path, n: int, c: int) -> float:
        agent = workload.build_agent(n)
        rt = loom.Runtime(DuckDBJournal(at), flows=FlowRegistry())
        try:
            inputs = [f"Process every batch. ({i})" for i in range(c)]
            began = time.perf_counter()
            batch = agent.map(inputs, concurrency=c, runtime=rt, view=False, progress=False)
            wall = time.perf_counter() - began
            assert batch.done == c, batch
            results = [item.result for item in batch.items]
            assert all(r is not None and r.turns == n for r in results), results[:3]
            return wall
        finally:
            rt.close()

    if warmup:
        run(path.with_name(path.stem + "-warmup.duckdb"), warmup, 1)
    return {"wall": run(path, turns, concurrency), "turns": concurrency * turns}


# -- the parent -----------------------------------------------------------------------------------------------
def command(system: str, path: Path, args: argparse.Namespace, concurrency: int = 0) -> list[str]:
    """The child process's argv for one measurement of ``system``."""
    warmup = str(args.warmup)
    if system == "langgraph":
        return [sys.executable, LANGGRAPH_SCRIPT, "one", str(path), str(args.turns), warmup]
    if system == "langgraph-many":
        return [sys.executable, LANGGRAPH_SCRIPT, "many", str(path), str(concurrency), str(args.many_turns), warmup]
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    if system in ("loom", "loom-nostream"):
        return [*me, "one", str(path), str(args.turns), str(system == "loom"), warmup]
    return [*me, "many", str(path), str(concurrency), str(args.many_turns), warmup]


def measure(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run one child; its JSON line, or ``{"error": ...}`` (timed out, failed)."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {out.returncode}: {tail[:200]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def rounds(systems: list[str], runs: int, one_round: Any) -> dict[str, list[dict[str, Any]]]:
    """``runs`` rounds of one measurement per system, the order rotating each round."""
    got: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    for r in range(runs):
        shift = r % len(systems)
        for system in systems[shift:] + systems[:shift]:
            got[system].append(one_round(system))
    return got


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def version(name: str) -> str:
    """An installed distribution's version, or "not installed"."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def median_of(samples: list[dict[str, Any]], key: str) -> float | None:
    """The median of ``key`` over the samples that have it (None when none does)."""
    values = [s[key] for s in samples if key in s]
    return statistics.median(values) if values else None


def errors(samples: list[dict[str, Any]]) -> str:
    """The distinct errors among the samples, or ''."""
    seen = sorted({s["error"] for s in samples if "error" in s})
    return "; ".join(seen)


def langgraph_installed() -> bool:
    """Whether the ``bench`` extra's LangGraph and its SQLite checkpointer are importable."""
    try:
        metadata.version("langgraph")
        metadata.version("langgraph-checkpoint-sqlite")
    except metadata.PackageNotFoundError:
        return False
    return True


def main() -> None:
    """Parse the arguments; run a child measurement, or the whole comparison and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[64, 256, 1024])
    parser.add_argument("--many-turns", type=int, default=20)
    parser.add_argument("--many-runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.child and not langgraph_installed():
        print("bench/peers.py: LangGraph is not installed: pip install -c constraints.txt -e '.[bench]'")
        return
    if args.child:
        mode, path, *rest = args.child
        if mode == "one":
            out = loom_one(Path(path), int(rest[0]), rest[1] == "True", int(rest[2]))
        else:
            out = loom_many(Path(path), int(rest[0]), int(rest[1]), int(rest[2]))
        print(json.dumps(out))
        return

    began, load_before = time.perf_counter(), load()
    counter = iter(range(10**9))
    with tempfile.TemporaryDirectory(prefix="loom-peers-") as name:
        tmp = Path(name)

        def fresh(system: str) -> Path:
            suffix = ".sqlite" if system.startswith("langgraph") else ".duckdb"
            return tmp / f"{system}-{next(counter)}{suffix}"

        one = rounds(
            list(ONE_SYSTEMS),
            args.runs,
            lambda s: measure(command(s, fresh(s), args), args.timeout),
        )
        many: dict[int, dict[str, list[dict[str, Any]]]] = {}
        for c in args.concurrency:
            many[c] = rounds(
                ["langgraph-many", "loom-many"],
                args.many_runs,
                lambda s, c=c: measure(command(s, fresh(s), args, c), args.timeout),
            )
    report(args, one, many, load_before, load(), time.perf_counter() - began)


def report(
    args: argparse.Namespace,
    one: dict[str, list[dict[str, Any]]],
    many: dict[int, dict[str, list[dict[str, Any]]]],
    load_before: str,
    load_after: str,
    took: float,
) -> None:
    """Print the markdown tables, the ratios and the targets beside the figures."""
    n = args.turns
    print("# peers bench: LangGraph + SQLite beside loom_nb + DuckDB, bench/agent.py's workload\n")
    print(
        f"langgraph {version('langgraph')}, langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}, "
        f"aiosqlite {version('aiosqlite')}, loom_nb {version('loom_nb')}, duckdb {version('duckdb')}; "
        f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs"
    )
    print(
        "LangGraph: model node + prebuilt ToolNode, messages in a DeltaChannel (_messages_delta_reducer), "
        'durability="sync", checkpointer on a file. loom_nb: DuckDB file journal, default durability.'
    )
    print(f"payload per turn (text + args + result): {workload.payload_per_turn()} B")
    print(f"load average (1, 5, 15 min) before: {load_before}\n")

    print(f"## one run of N = {n} turns: median of {args.runs} fresh processes (after a {args.warmup}-turn warm-up)\n")
    print("| system | ms/turn | per process (ms/turn) | loom/LangGraph | store B/turn | file B/turn | target |")
    print("|---|---|---|---|---|---|---|")
    base = median_of(one["langgraph"], "wall")
    for system in ONE_SYSTEMS:
        samples = one[system]
        wall = median_of(samples, "wall")
        if wall is None:
            print(f"| {LABELS[system]} | failed: {errors(samples)} | | | | | |")
            continue
        each = ", ".join(f"{s['wall'] / n * 1e3:.2f}" for s in samples if "wall" in s)
        store = samples[0].get("blob_bytes", samples[0].get("data_bytes", 0)) / n
        ratio, target = "1.00x (baseline)", ""
        if system != "langgraph" and base is not None:
            r = wall / base
            ratio, target = f"{r:.2f}x", f"<= {ONE_TARGET}x ({'ok' if r <= ONE_TARGET else 'MISSED'})"
        failed = f" ({errors(samples)})" if errors(samples) else ""
        cells = [LABELS[system], f"{wall / n * 1e3:.3f}{failed}", each, ratio, f"{store:,.0f}"]
        print("| " + " | ".join([*cells, f"{samples[0]['file_bytes'] / n:,.0f}", target]) + " |")
    print(
        "\nstore B/turn: LangGraph's checkpoint blobs (checkpoints.checkpoint + metadata, writes.value) / N; "
        "loom_nb's events' canonical JSON / N. file B/turn: the SQLite file after a WAL checkpoint / N; "
        "the DuckDB file after CHECKPOINT / N (256 KiB blocks)."
    )

    print(
        f"\n## many runs: C concurrent runs of {args.many_turns} turns, turns/s = C * {args.many_turns} / wall, "
        f"median of {args.many_runs} fresh processes\n"
    )
    print("| C | LangGraph async turns/s | per process | loom_nb turns/s | per process | loom/LangGraph | target |")
    print("|---|---|---|---|---|---|---|")
    for c, got in many.items():
        cells = [str(c)]
        rates: list[float | None] = []
        for system in ("langgraph-many", "loom-many"):
            ok = [s["turns"] / s["wall"] for s in got[system] if "wall" in s]
            rate = statistics.median(ok) if ok else None
            rates.append(rate)
            failed = f" ({errors(got[system])})" if errors(got[system]) else ""
            cells += [
                f"{rate:,.0f}{failed}" if rate else f"failed: {errors(got[system])}",
                ", ".join(f"{x:,.0f}" for x in ok),
            ]
        lg, lm = rates
        if lg and lm:
            r = lm / lg
            target = f">= {MANY_TARGET}x ({'ok' if r >= MANY_TARGET else 'MISSED'})" if c == 64 else "(report)"
            cells += [f"{r:.2f}x", target]
        else:
            cells += ["-", ""]
        print("| " + " | ".join(cells) + " |")
    print(f"\nload average (1, 5, 15 min) after: {load_after}; the whole bench took {took:.0f} s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
