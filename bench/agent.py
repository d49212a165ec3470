"""The agent loop's durable overhead on the peers' scripted workload.

Each turn is one model call (about 300 B of text and one tool call with about 200 B of arguments)
and one tool call (about 500 B of result); no sleeps; a ``ScriptedModel`` calls the tool for N-1
turns then answers. The journal is a DuckDB FILE with the default durability (``docs/design.md``,
section 4): the bench's tool is idempotent, so one commit per turn. For N = 10, 50 and 200 turns it reports:

- per-turn overhead: wall time of the whole run / N (median of 3 runs, each on a fresh file);
- journal bytes per turn: the sum of ``len(data JSON)`` of the execution's events as stored (their
  canonical JSON: what ``read`` returns is what was written, in either event format) / N, and the
  ``.duckdb`` file size after ``CHECKPOINT`` / N (raw, and net of an empty journal file), each
  beside the payload per turn (text + arguments + result) as a ratio;
- the same N = 200 run without the durable stream, and written in event format 1 (the format
  before versioning: a copy of each tool input, digests, keys, durable chunks), for a before/after
  in the same process;
- the growth exponent between N = 50 and N = 200: ``log(bytes200 / bytes50) / log(4)``;
- kill at N/2: a subprocess runs N = 200 behind ``CrashingJournal`` and dies after about half the
  events; a fresh process then times ``recover()`` to the first NEW model or tool call (measured
  inside the effect with ``time.perf_counter`` relative to just before ``recover()``) and counts the
  completed calls it made again.

Run: ``.venv/bin/python bench/agent.py [--runs 3] [--sizes 10 50 200]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.agent import TranscriptGrowthWarning
from loom_nb.journal import DuckDBJournal, Event
from loom_nb.journal.event_format import CURRENT_FORMAT
from loom_nb.kernel import EffectContext, FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import CrashingJournal

TEXT = (
    "I looked at the previous result and will now call the tool again with the next batch of "
    "work, keeping the running tally in mind and checking that every item was accounted for. "
    "Nothing unusual so far; the numbers line up with the earlier turns, so I continue."
)[:300]
ARG = "x" * 170  # with the key names and the turn number, about 200 B of arguments
RESULT_PAD = "r" * 480
EXECUTION_ID = "bench-1"
KILL_TURNS = 200
TARGETS = {"per_turn_ms": 2.5, "bytes_ratio": 1.4, "exponent": 1.05, "first_call_ms": 50.0}

warnings.simplefilter("ignore", TranscriptGrowthWarning)  # the journal keeps its warning event


def respond_for(turns: int) -> Any:
    def respond(request: ModelRequest) -> ModelResponse:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn >= turns - 1:
            return ModelResponse.text("All batches are done.")
        return ModelResponse.tool_calls([("work", {"turn": turn, "batch": ARG})], text=TEXT)

    return respond


def work_result(turn: int) -> str:
    return f"batch {turn} done: " + RESULT_PAD


def payload_per_turn() -> int:
    """Text + arguments (as JSON) + result of one tool turn."""
    args = json.dumps({"turn": 100, "batch": ARG}, separators=(",", ":"))
    return len(TEXT) + len(args) + len(work_result(100))


class KeyedModel:
    """The ``ScriptedModel`` behind a provider that also sees the call's idempotency key."""

    name = "scripted"

    def __init__(self, turns: int, on_call: Any) -> None:
        self.inner = loom.ScriptedModel(respond_for(turns))
        self.on_call = on_call

    async def complete(
        self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        self.on_call("model", idempotency_key or "?")
        return await self.inner.complete(request, on_delta=on_delta)


def build_agent(turns: int, on_call: Any = None, *, stream: bool = True) -> loom.Agent:
    @loom.tool(idempotent=True)
    def work(turn: int, batch: str, ctx: EffectContext) -> str:
        """Process one batch."""
        if on_call is not None:
            on_call("tool", ctx.idempotency_key)
        return work_result(turn)

    model: Any = loom.ScriptedModel(respond_for(turns)) if on_call is None else KeyedModel(turns, on_call)
    return loom.Agent(model=model, tools=[work], name="bench", max_turns=turns + 1, stream=stream)


def open_runtime(path: Path, crash_after: int | None = None, *, event_format: int = CURRENT_FORMAT) -> loom.Runtime:
    journal: Any = DuckDBJournal(path)
    if crash_after is not None:
        journal = CrashingJournal(journal, crash_after)
    rt = loom.Runtime(journal, flows=FlowRegistry())
    rt.event_format = event_format
    return rt


def file_size_after_checkpoint(path: Path) -> int:
    con = DuckDBJournal(path)
    con.connection.execute("CHECKPOINT")
    con.close()
    return path.stat().st_size


def one_run(turns: int, tmp: Path, *, stream: bool = True, event_format: int = CURRENT_FORMAT) -> dict[str, float]:
    path = tmp / f"run-{turns}-{time.perf_counter_ns()}.duckdb"
    agent = build_agent(turns, stream=stream)
    rt = open_runtime(path, event_format=event_format)
    began = time.perf_counter()
    run = agent.start("Process every batch.", runtime=rt, execution_id=EXECUTION_ID)
    wall = time.perf_counter() - began
    assert run.status == "completed" and run.result is not None and run.result.turns == turns, run
    events = rt.journal.read(EXECUTION_ID)
    data = sum(len(json.dumps(e.data, separators=(",", ":"), ensure_ascii=False)) for e in events)
    rt.close()
    return {"wall": wall, "data": data, "file": file_size_after_checkpoint(path), "events": len(events)}


def commit_floor_ms(tmp: Path, commits: int = 400) -> float:
    """The storage floor of one turn: one DuckDB commit (the model step's completion carries the
    idempotent tool's start and outcome), timed alone with turn-sized events."""
    journal = DuckDBJournal(tmp / "floor.duckdb")
    journal.append([Event("floor", 1, "execution_started", None, 0.0, {"flow": "floor"})])
    seq, times = 2, []
    for i in range(commits):
        done = {"output": {"text": TEXT, "args": ARG}}
        nxt = {"input": {"batch": ARG}, "digest": "sha256:" + "0" * 64}
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


def empty_file_size(tmp: Path) -> int:
    path = tmp / "empty.duckdb"
    DuckDBJournal(path).close()
    return file_size_after_checkpoint(path)


# -- kill at N/2 ---------------------------------------------------------------------------------------------
def child_start(path: Path, crash_after: int) -> None:
    agent = build_agent(KILL_TURNS)
    rt = open_runtime(path, crash_after)
    agent.start("Process every batch.", runtime=rt, execution_id=EXECUTION_ID)
    raise SystemExit("the crash switch did not fire")


def child_recover(path: Path) -> None:
    reader = DuckDBJournal(path, read_only=True)
    done = {f"{EXECUTION_ID}:{e.step_id}" for e in reader.read(EXECUTION_ID) if e.kind == "step_completed"}
    reader.close()
    made: list[tuple[str, str, float]] = []
    t0 = 0.0

    def on_call(kind: str, key: str) -> None:
        made.append((kind, key, time.perf_counter() - t0))

    agent = build_agent(KILL_TURNS, on_call)
    rt = open_runtime(path)
    agent.register(rt)
    t0 = time.perf_counter()
    results = rt.recover_sync()
    total = time.perf_counter() - t0
    rt.close()
    remade = [key for _, key, _ in made if key in done]
    print(
        json.dumps(
            {
                "status": [r.status for r in results],
                "completed_before": len(done),
                "first_call_ms": made[0][2] * 1000 if made else None,
                "first_call": made[0][:2] if made else None,
                "calls": len(made),
                "remade": len(remade),
                "recover_total_ms": total * 1000,
            }
        )
    )


def kill_at_half(tmp: Path, total_events: int) -> dict[str, Any]:
    path = tmp / "kill.duckdb"
    crash_after = total_events // 2
    died = subprocess.run(
        [sys.executable, __file__, "--child", "start", str(path), str(crash_after)],
        capture_output=True,
        text=True,
        check=False,
    )
    if died.returncode != 86:
        raise SystemExit(f"the crashing child exited {died.returncode}: {died.stderr}")
    back = subprocess.run(
        [sys.executable, __file__, "--child", "recover", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if back.returncode != 0:
        raise SystemExit(f"the recovering child failed: {back.stderr}")
    out: dict[str, Any] = json.loads(back.stdout.strip().splitlines()[-1])
    out["crash_after"] = crash_after
    return out


# -- report --------------------------------------------------------------------------------------------------
def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, path = args.child[0], Path(args.child[1])
        if mode == "start":
            child_start(path, int(args.child[2]))
        else:
            child_recover(path)
        return

    payload = payload_per_turn()
    rows: dict[str, dict[str, float]] = {}  # by label: "N", "N, stream=False", "N, event format 1"
    with tempfile.TemporaryDirectory(prefix="loom-bench-") as name:
        tmp = Path(name)
        baseline = empty_file_size(tmp)
        floor = commit_floor_ms(tmp)
        one_run(10, tmp)  # warm-up (imports, first DuckDB file)
        top = max(args.sizes)
        variants = [(str(n), n, True, CURRENT_FORMAT) for n in args.sizes]
        variants += [(f"{top}, stream=False", top, False, CURRENT_FORMAT), (f"{top}, event format 1", top, True, 1)]
        for label, n, stream, event_format in variants:
            runs = [one_run(n, tmp, stream=stream, event_format=event_format) for _ in range(args.runs)]
            rows[label] = {
                "n": n,
                "per_turn_ms": statistics.median(r["wall"] for r in runs) / n * 1000,
                "data": runs[0]["data"] / n,
                "file": runs[0]["file"] / n,
                "file_net": (runs[0]["file"] - baseline) / n,
                "events": runs[0]["events"],
            }
        kill = kill_at_half(tmp, int(rows["200"]["events"])) if "200" in rows else None

    report(args.runs, payload, baseline, rows, kill, floor)


def report(
    runs: int,
    payload: int,
    baseline: int,
    rows: dict[str, dict[str, float]],
    kill: dict[str, Any] | None,
    floor: float,
) -> None:
    """Print the markdown tables, targets beside the figures."""
    limit, ratio_limit, exp_limit = TARGETS["per_turn_ms"], TARGETS["bytes_ratio"], TARGETS["exponent"]
    print(f"# agent loop bench: DuckDB file journal, default durability, {runs} runs (median)\n")
    print(
        f"payload per turn (text + args + result): {payload} B; empty journal file after CHECKPOINT: "
        f"{baseline:,} B (DuckDB allocates its file in 256 KiB blocks: at these sizes the file columns "
        "measure block allocation more than bytes)"
    )
    print(f"storage floor per turn on this machine: one DuckDB commit = {floor:.3f} ms (median)\n")
    print("| N | per-turn ms | data B/turn | ratio | file B/turn | ratio | file-net B/turn | ratio | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, r in rows.items():
        n = int(r["n"])
        ratio = r["data"] / payload
        target = f"data <= {ratio_limit}x ({verdict(ratio <= ratio_limit)})"
        if n == 200:
            target = f"<= {limit} ms ({verdict(r['per_turn_ms'] <= limit)}); {target}"
        cells = [
            label,
            f"{r['per_turn_ms']:.3f}",
            f"{r['data']:.0f}",
            f"{ratio:.2f}x",
            f"{r['file']:.0f}",
            f"{r['file'] / payload:.2f}x",
            f"{r['file_net']:.0f}",
            f"{r['file_net'] / payload:.2f}x",
            target,
        ]
        print("| " + " | ".join(cells) + " |")
    if "50" in rows and "200" in rows:
        print("\n| growth exponent N=50 -> 200 | value | target |\n|---|---|---|")
        for name, column in (
            ("data bytes", "data"),
            ("file bytes", "file"),
            ("file bytes net of empty", "file_net"),
        ):
            exponent = math.log((rows["200"][column] * 200) / (rows["50"][column] * 50)) / math.log(4)
            same_blocks = column != "data" and exponent == 0
            judged = "n/a: the same number of DuckDB blocks" if same_blocks else verdict(exponent <= exp_limit)
            print(f"| {name} | {exponent:.3f} | <= {exp_limit} ({judged}) |")
    if kill is not None:
        first = kill["first_call_ms"]
        within = first is not None and first <= TARGETS["first_call_ms"]
        what = kill["first_call"][0] if kill["first_call"] else "-"
        print(
            f"\n| kill at N/2 (N=200, crash after {kill['crash_after']} of {int(rows['200']['events'])} "
            "events) | value | target |\n|---|---|---|"
        )
        print(f"| completed calls before the crash | {kill['completed_before']} | |")
        print(f"| completed calls re-made | {kill['remade']} | 0 ({verdict(kill['remade'] == 0)}) |")
        print(f"| recover() -> first new call ({what}) | {first:.1f} ms | <= 50 ms ({verdict(within)}) |")
        print(f"| recover() total (the remaining {kill['calls']} calls) | {kill['recover_total_ms']:.1f} ms | |")
        print(f"| recovered status | {', '.join(kill['status'])} | completed |")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
