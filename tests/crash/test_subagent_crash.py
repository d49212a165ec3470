"""A lead agent and its sub-agent (a child execution) killed at every commit, then recovered in a
fresh process: the same result as the uninterrupted run, and no call whose step completed (in the
parent or in the child) made again.

``tests/crash/subagent_crash_flow.py`` runs the two agents; its docstring describes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import stores
from tests.crash import subagent_crash_flow as flow
from tests.crash.harness import CrashScript, completed, read_journal_file

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("subagent_crash_flow.py"), flow.EXECUTION_ID)
#: Events committed (parent and child together) after each commit of the uninterrupted run.
COMMITS = [2, 3, 5, 7, 11, 16]


def done_keys(where: Path) -> set[str]:
    """Idempotency keys (``<execution>:<step>``) of the steps completed in both executions."""
    keys: set[str] = set()
    for eid in (flow.EXECUTION_ID, flow.CHILD_ID):
        keys |= {f"{eid}:{sid}" for sid in completed(read_journal_file(stores.target(where), eid))}
    return keys


def test_uninterrupted_run(uninterrupted: dict[str, Any]) -> None:
    result = uninterrupted["result"]
    assert result["status"] == "completed" and result["child"] == "completed"
    assert result["output"]["output"] == "lead: [\"researcher: ['Rome: sunny']\"]"
    assert result["commits"] == COMMITS, "the flow or the kernel's commit batching changed: update COMMITS"


@pytest.mark.parametrize("crash", COMMITS, ids=[f"after-{n}-events" for n in COMMITS])
def test_recovery_descends_into_the_child_and_makes_only_the_remaining_calls(
    tmp_path: Path, crash: int, uninterrupted: dict[str, Any]
) -> None:
    died = SCRIPT.run(tmp_path, crash, "start")
    assert died.returncode == flow.EXIT_CODE, died.stderr
    before = SCRIPT.calls(tmp_path)
    done = done_keys(tmp_path)

    recovered = SCRIPT.run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None
    assert recovered.result["status"] == "completed" and recovered.result["child"] == "completed"
    assert recovered.result["output"] == uninterrupted["result"]["output"]
    after = SCRIPT.calls(tmp_path)[len(before) :]
    assert not {key for _, key, _ in after} & done  # nothing completed was called again
    # Every call of the uninterrupted run was made, before the crash or after it.
    assert {(w, k) for w, k, _ in uninterrupted["calls"]} == {(w, k) for w, k, _ in before + after}
