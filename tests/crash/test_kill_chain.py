"""The kill chain: the run and up to two recovering processes killed at seeded moments (after a
commit, inside an effect, or by a real SIGKILL), 60 times, then the invariants on every final journal.

Each chain ends in a process that recovers undisturbed. It must complete the run (answering the
approval and any ``InDoubt`` gate with ``happened``): no ``seq`` gap, no step completed twice, the
non-idempotent charge invoked at most once (nobody answered ``run_again``), the order's output, and
a replay that reproduces. The one other allowed end is the bound on attempts: a step cut on all
``DEFAULT_ATTEMPT_LIMIT`` attempts fails the run with ``RetriesExhaustedError``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import DuckDBJournal, EventKind
from loom_nb.kernel import Engine
from loom_nb.kernel.context import DEFAULT_ATTEMPT_LIMIT
from tests.crash import crash_flow
from tests.crash.harness import JOURNAL, CrashScript, run_script

ONE_STORE = "a chain of kills of one DuckDB file journal (its lock and WAL); the crash matrices run on both stores"

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("kill_chain.py"), crash_flow.EXECUTION_ID, log="effects.log")
CHAINS = 60
SEED = 20261202
CHARGE = {"amount": 24, "receipt": "rcpt-A-1-24"}


def _check_chain(chain: dict[str, Any]) -> str:
    """Assert the invariants of one chain's final journal; return how the run ended."""
    where = Path(chain["dir"])
    assert chain["ended"][-1] == "exit:0", chain
    events = SCRIPT.events(where)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), f"seq gap: {chain}"
    completions = Counter(e.step_id for e in events if e.kind == EventKind.STEP_COMPLETED)
    assert all(n == 1 for n in completions.values()), f"a step completed twice: {completions} {chain}"
    calls = SCRIPT.calls(where)
    charges = [c for c in calls if c[0] == "payments.charge"]
    assert len(charges) <= 1, f"the charge ran {len(charges)} times without a run_again answer: {chain}"
    assert all(e.data.get("payload", {}).get("action") != "run_again" for e in events if e.kind == "gate_resolved")
    result = json.loads((where / "result.json").read_text(encoding="utf-8"))
    last = events[-1]
    if last.kind == EventKind.EXECUTION_FAILED:
        assert last.data["error"]["type"] == "loom_nb.errors:RetriesExhaustedError", chain
        (failed,) = [e for e in events if e.kind == EventKind.STEP_FAILED]
        started = [e for e in events if e.kind == EventKind.STEP_STARTED and e.step_id == failed.step_id]
        assert len(started) == DEFAULT_ATTEMPT_LIMIT, chain
        return "failed"
    assert (last.kind, result["status"]) == (EventKind.EXECUTION_COMPLETED, "completed"), chain
    output = last.data["output"]
    assert (output["shipped"], output["carrier"], output["charge"]) == (True, "post", CHARGE), chain
    rt = Engine(DuckDBJournal(where / JOURNAL, read_only=True), flows=crash_flow.FLOWS)
    try:
        report = rt.replay_sync(crash_flow.EXECUTION_ID)
    finally:
        rt.close()
    assert report.reproduced, (report.message, chain)
    return "completed"


def test_a_run_and_its_recoveries_killed_at_random_moments_lose_nothing_and_run_nothing_twice(tmp_path: Path) -> None:
    outcome = run_script(SCRIPT.script, str(tmp_path / "chains"), str(SEED), str(CHAINS))
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.result is not None
    chains: list[dict[str, Any]] = outcome.result["chains"]
    assert len(chains) == CHAINS
    ends = Counter(_check_chain(chain) for chain in chains)
    assert ends["completed"] >= CHAINS - 5, ends
    killed = Counter(end for chain in chains for end in chain["ended"][:-1])
    # The chain really killed: crash exits, real SIGKILLs (how many land before a process ends on its
    # own depends on the machine's speed; delays are short so most do), and chains of three kills.
    assert killed[f"exit:{crash_flow.CRASH_EXIT_CODE}"] >= 20 and killed["signal:9"] >= 5, killed
    assert sum(1 for chain in chains if len(chain["kills"]) == 3) >= 10
