"""A chain of killed processes over one run, many times: the run is killed, then up to two
recovering processes are killed too, each at a seeded moment, and a last one recovers undisturbed.

Usage::

    python tests/crash/kill_chain.py <directory> <seed> <iterations>

Iteration ``i`` works in ``<directory>/<i>`` on ``crash_flow``'s order flow (its DuckDB journal
``journal.duckdb`` and its fsynced effect log ``effects.log``, a line per invocation). Every process
of a chain is a fork of this one (so 50 chains take seconds, not minutes of interpreter start-up)
and runs ``crash_flow.run``: the first starts the run, the others recover it and answer its gates
(the approval with ``approved``, an ``InDoubt`` gate with ``happened``: nobody answers
``run_again``). A killed process dies one of three ways, chosen by the seed: after its k-th
committed event (``CrashingJournal``), inside an effect after its log line (the effect happened,
its outcome was never journaled), or by a real ``SIGKILL`` from this parent after a seeded delay.

A recovering process that finds no execution (the run was killed before its first commit) starts
it, as a person would run the cell again. Prints one JSON line: each chain's kills and how each
process ended (``exit:<code>`` or ``signal:<n>``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from loom_nb.errors import UsageError

KILLS = ("commit", "effect", "signal")


def plan(rng: random.Random, effects: list[str]) -> list[list[Any]]:
    """The kills of one chain: the run's, then 0 to 2 recovering processes' (``[kind, arg]``)."""
    kills: list[list[Any]] = []
    for _ in range(1 + rng.randint(0, 2)):
        kind = rng.choice(KILLS)
        if kind == "commit":
            kills.append([kind, rng.randint(1, 14)])
        elif kind == "effect":
            kills.append([kind, rng.choice(effects)])
        else:
            kills.append([kind, round(rng.uniform(0.0, 0.08), 3)])
    return kills


def child(where: Path, mode: str, kill: list[Any] | None) -> None:
    """One process of the chain (never returns)."""
    from tests.crash import crash_flow

    journal, log = str(where / "journal.duckdb"), str(where / "effects.log")
    crash_after = kill[1] if kill and kill[0] == "commit" else None
    crash_in = kill[1] if kill and kill[0] == "effect" else None
    code = 0
    try:
        if mode == "create":
            from loom_nb.journal import DuckDBJournal

            DuckDBJournal(journal).close()
            os._exit(0)
        try:
            result = asyncio.run(crash_flow.run(journal, log, crash_after, mode, crash_in))
        except UsageError:
            if mode != "recover":
                raise
            result = asyncio.run(crash_flow.run(journal, log, crash_after, "start", crash_in))
        (where / "result.json").write_text(json.dumps(result), encoding="utf-8")
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def stage(where: Path, mode: str, kill: list[Any] | None) -> str:
    """Fork a process of the chain, kill it as ``kill`` says, and say how it ended."""
    pid = os.fork()
    if pid == 0:
        child(where, mode, kill)
    if kill and kill[0] == "signal":
        time.sleep(kill[1])
        os.kill(pid, signal.SIGKILL)  # not reaped yet, so the pid is still the child's (a no-op once it exited)
    _, status = os.waitpid(pid, 0)
    return f"signal:{os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit:{os.WEXITSTATUS(status)}"


def main(argv: list[str]) -> int:
    """Entry point: ``<directory> <seed> <iterations>``."""
    from tests.crash import crash_flow

    root, seed, iterations = Path(argv[0]), int(argv[1]), int(argv[2])
    effects = sorted(crash_flow.EFFECTS)
    chains = []
    for i in range(iterations):
        rng = random.Random(seed * 100_003 + i)
        where = root / str(i)
        where.mkdir(parents=True)
        stage(
            where, "create", None
        )  # the journal exists before the run (a kill while DuckDB creates it is another fault)
        kills = plan(rng, effects)
        ended = [stage(where, "start" if n == 0 else "recover", kill) for n, kill in enumerate(kills)]
        ended.append(stage(where, "recover", None))
        chains.append({"dir": str(where), "kills": kills, "ended": ended})
    print(json.dumps({"chains": chains}))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.crash import kill_chain

    sys.exit(kill_chain.main(sys.argv[1:]))
