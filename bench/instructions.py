"""The loop's cost per turn, in two units that do not depend on the disk:

- **instructions per turn** (``--callgrind``): ``valgrind --tool=callgrind`` counts the instructions
  of a process running the bench agent of ``bench/write_path.py`` on an ``InMemoryJournal``, once
  with ``--turns`` + 20 turns and once with 20; the difference divided by ``--turns`` is the cost of
  one turn, without the process's start (imports, the first run). The count is repeatable for the
  same code whatever else the machine does, so it compares two versions of the code on a loaded
  machine; each process takes about a minute under valgrind.
- **process CPU per turn** (always): ``time.process_time()`` around a run of ``--turns`` turns on an
  ``InMemoryJournal`` in this process, the median of ``--runs`` runs. A wall-clock figure: read it on
  a quiet machine.

Run: ``.venv/bin/python bench/instructions.py [--turns 200] [--runs 5] [--callgrind] [--non-idempotent]``
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import write_path as wp

import loom_nb as loom
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry

#: Turns of the short run whose count is subtracted (the process's fixed cost, the run's start).
BASE_TURNS = 20


def one_run(turns: int, *, idempotent: bool) -> float:
    """Process CPU seconds of one run of ``turns`` turns on an in-memory journal."""
    rt = loom.Runtime(InMemoryJournal(), flows=FlowRegistry())
    agent = wp.build(turns, idempotent=idempotent)
    began = time.process_time()
    run = agent.start("Process every batch.", runtime=rt, execution_id="b")
    spent = time.process_time() - began
    assert run.status == "completed" and run.result is not None and run.result.turns == turns, run
    rt.close()
    return spent


def instructions(turns: int, *, idempotent: bool) -> int:
    """The instructions callgrind counts for a process running one ``turns``-turn run."""
    argv = [sys.executable, __file__, "--child", str(turns)] + ([] if idempotent else ["--non-idempotent"])
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected\s*:\s*([\d,]+)", done.stderr) or re.search(r"I\s+refs:\s*([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--non-idempotent", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    idempotent = not args.non_idempotent
    if args.child is not None:  # the process valgrind counts: one run, nothing printed
        one_run(args.child, idempotent=idempotent)
        return
    kind = "idempotent" if idempotent else "non-idempotent"
    one_run(10, idempotent=idempotent)  # warm-up
    spent = [one_run(args.turns, idempotent=idempotent) / args.turns * 1000 for _ in range(args.runs)]
    print(f"# the loop's cost per turn, {kind} tool, in-memory journal\n")
    print(
        f"process CPU per turn: {statistics.median(spent):.3f} ms (median of {args.runs} runs of "
        f"{args.turns} turns; range {min(spent):.3f} to {max(spent):.3f})"
    )
    if args.callgrind:
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is not installed: apt-get install valgrind")
        long = instructions(args.turns + BASE_TURNS, idempotent=idempotent)
        short = instructions(BASE_TURNS, idempotent=idempotent)
        print(
            f"instructions per turn: {(long - short) // args.turns:,} "
            f"((I({args.turns + BASE_TURNS}) - I({BASE_TURNS})) / {args.turns}; callgrind)"
        )


if __name__ == "__main__":
    main()
