"""Per-turn cost of run k of an agent session against run 1.

A session of N runs (default 100) of one agent on a DuckDB FILE journal (default durability). Each
run is two model turns: the scripted model calls one tool (about 200 B of arguments, 500 B of
result), then answers (about 300 B). Run k continues the conversation of runs 1..k-1 by reference
(a carry item), so its start reads the earlier runs from the journal and rebuilds their
conversation; the model is sent the whole conversation every turn, as any chat is.

For k in 1, 10, 50 and N it reports (median over ``--repeats`` sessions, each on a fresh file):

- per-turn time of run k: wall time of the run / 2, and its ratio to run 1;
- the carry resolution alone, cold (``carry.conversation`` of the previous run on a journal the
  process-wide cache of finished runs has not seen, as after a kernel restart: it reads every
  earlier run once) and how many executions it read; within one process the loop finds the earlier
  runs' conversations in that cache and reads only the previous run;
- journal bytes of run k's own events (sum of ``len(data JSON)``), and its ratio to run 2 (the first
  run with a carry item): flat means the log stays linear across runs.

Run: ``.venv/bin/python bench/sessions.py [--runs 100] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import loom_nb as loom
from loom_nb.agent.carry import conversation, last_model_node
from loom_nb.journal import DuckDBJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.testing import JournalProxy

TEXT = ("I looked at the result and this is my answer, keeping the earlier turns in mind. " * 4)[:300]
ARG = "x" * 170
RESULT_PAD = "r" * 480


def respond(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].role == "user":
        return ModelResponse.tool_calls([("work", {"batch": ARG})], text="Working on it.")
    return ModelResponse.text(TEXT)


@loom.tool(idempotent=True)
def work(batch: str) -> str:
    """Do one batch of work.

    Args:
        batch: The batch.
    """
    return RESULT_PAD + str(len(batch))


def one_session(path: Path, runs: int, marks: list[int]) -> dict[int, dict[str, float]]:
    rt = loom.Runtime(DuckDBJournal(path), flows=FlowRegistry())
    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[work], name="bench", system="Be brief.")
    session = agent.session("s", runtime=rt)
    out: dict[int, dict[str, float]] = {}
    try:
        for k in range(1, runs + 1):
            t0 = time.perf_counter()
            session.start(f"message {k}: next batch please", view=False)
            seconds = time.perf_counter() - t0
            eid = session.execution_id(k - 1)
            events = rt.journal.read(eid)
            assert rt.journal.get_execution(eid).status == "completed"  # type: ignore[union-attr]
            if k in marks or k == 2:
                carry_ms, reads = 0.0, 0
                if k > 1:
                    prev = session.execution_id(k - 2)
                    node = last_model_node(rt.journal.read(prev))
                    assert node is not None
                    cold = JournalProxy(rt.journal)  # a journal the carry cache has not seen: a restart
                    c0 = time.perf_counter()
                    conversation(cold, prev, node)
                    carry_ms = (time.perf_counter() - c0) * 1000
                    reads = cold.reads
                out[k] = {
                    "per_turn_ms": seconds * 1000 / 2,
                    "carry_ms": carry_ms,
                    "cold_reads": float(reads),
                    "bytes": float(sum(len(json.dumps(e.data, separators=(",", ":"))) for e in events)),
                }
    finally:
        rt.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    marks = sorted(m for m in {1, 10, 50, args.runs} if m <= args.runs)
    samples: list[dict[int, dict[str, float]]] = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            samples.append(one_session(Path(tmp) / "s.duckdb", args.runs, marks))

    def med(k: int, key: str) -> float:
        return statistics.median(s[k][key] for s in samples)

    base, base_bytes = med(1, "per_turn_ms"), med(2, "bytes")
    print(f"session of {args.runs} runs x 2 turns, median of {args.repeats} sessions (DuckDB file journal)")
    head = f"{'run k':>6} {'per-turn ms':>12} {'x run 1':>8} {'cold carry ms':>14} {'reads':>6}"
    print(head + f" {'run bytes':>10} {'x run 2':>8}")
    for k in marks:
        row: dict[str, Any] = {
            "per": med(k, "per_turn_ms"),
            "carry": med(k, "carry_ms"),
            "reads": med(k, "cold_reads"),
            "bytes": med(k, "bytes"),
        }
        print(
            f"{k:>6} {row['per']:>12.2f} {row['per'] / base:>8.2f} {row['carry']:>14.2f} {row['reads']:>6.0f} "
            f"{row['bytes']:>10.0f} {row['bytes'] / base_bytes:>8.2f}"
        )


if __name__ == "__main__":
    main()
