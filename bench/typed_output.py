"""What a typed answer costs over a text one (``Agent(output_type=...)``).

Two one-turn agents on a ``ScriptedModel`` over an in-memory journal: one answers with text, the other
through ``final_result`` with a five-field pydantic model (validated, dumped to the journal as JSON).
For each, R runs of N sequential agent runs; it reports the median wall time per agent run and the
ratio typed / text, and the median time of ``OutputSpec.validate_call`` alone.

Run: ``.venv/bin/python bench/typed_output.py [--runs 5] [--n 200]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from pydantic import BaseModel

import loom_nb as loom
from loom_nb.agent.output import FINAL_RESULT_TOOL, OutputSpec
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.messages import ToolCall
from loom_nb.testing import FakeClock, SequentialIds


class Report(BaseModel):
    """A five-field answer."""

    title: str
    score: float
    tags: list[str]
    done: bool
    count: int


ANSWER = {"title": "Quarterly report", "score": 0.93, "tags": ["a", "b", "c"], "done": True, "count": 12}


async def timed(typed: bool, n: int) -> float:
    rt = loom.Runtime(InMemoryJournal(), clock=FakeClock(tick=0.001), ids=SequentialIds(), flows=FlowRegistry())
    if typed:
        model = loom.ScriptedModel(lambda r: loom.ModelResponse.tool_calls([(FINAL_RESULT_TOOL, ANSWER)]))
        agent: Any = loom.Agent(model, output_type=Report, name="typed", stream=False)
    else:
        model = loom.ScriptedModel(lambda r: loom.ModelResponse.text(str(ANSWER)))
        agent = loom.Agent(model, name="text", stream=False)
    start = time.perf_counter()
    for _ in range(n):
        await agent.run("Report?", runtime=rt)
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    text = statistics.median(asyncio.run(timed(False, args.n)) for _ in range(args.runs))
    typed = statistics.median(asyncio.run(timed(True, args.n)) for _ in range(args.runs))
    spec = OutputSpec(Report)
    call = ToolCall(id="c", name=FINAL_RESULT_TOOL, arguments=ANSWER)
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(10_000):
            spec.validate_call(call)
        samples.append((time.perf_counter() - start) / 10_000)
    print(f"text agent run:  {text * 1e3:.3f} ms (median of {args.runs} x {args.n})")
    print(f"typed agent run: {typed * 1e3:.3f} ms (ratio typed/text {typed / text:.2f})")
    print(f"validate_call:   {statistics.median(samples) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
