"""A session's second run killed at every commit (every event boundary the kernel writes), then
recovered in a fresh process: the same result as the uninterrupted run, only the remaining calls
made, no completed call made again, and the conversation carried from the first run rebuilt exactly.

``tests/crash/session_crash_flow.py`` runs the session; its docstring describes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.crash import session_crash_flow as flow
from tests.crash.harness import CrashScript, completed, in_flight

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("session_crash_flow.py"), flow.EXECUTION_ID)
#: Events committed by the second run's process after each of its commits (uninterrupted).
COMMITS = [2, 4, 8]  # the idempotent tool rides the last model commit (design.md, section 4)
#: The second run's model and tool steps.
STEPS = {"#turn:0": "model", "#turn:0:tool:0": "tool", "#turn:1": "model"}
OUTPUT = "asked ['weather in Paris?', 'and Rome?']; found ['Paris: sunny', 'Rome: sunny']"


def second_run_calls(where: Path) -> list[tuple[str, str]]:
    """``(model|tool, step id)`` of every call the second run made, in order."""
    prefix = f"{flow.EXECUTION_ID}:"
    return [(what, key.removeprefix(prefix)) for what, key, _ in SCRIPT.calls(where) if key.startswith(prefix)]


def test_uninterrupted_second_run(uninterrupted: dict[str, Any]) -> None:
    result = uninterrupted["result"]
    assert result["status"] == "completed" and result["output"]["output"] == OUTPUT
    assert result["commits"] == COMMITS, "the flow or the kernel's commit batching changed: update COMMITS"
    started = uninterrupted["events"][0]
    assert started.data["input"]["session"] == {"id": "s", "previous": flow.FIRST, "index": 1}


@pytest.mark.parametrize("crash", COMMITS, ids=[f"after-{n}-events" for n in COMMITS])
def test_recovery_of_a_session_run_makes_only_the_remaining_calls(
    tmp_path: Path, crash: int, uninterrupted: dict[str, Any]
) -> None:
    died = SCRIPT.run(tmp_path, crash, "start")
    assert died.returncode == flow.EXIT_CODE, died.stderr
    at_crash = SCRIPT.events(tmp_path)
    assert len(at_crash) == crash
    before = second_run_calls(tmp_path)
    first_run_calls = len(SCRIPT.calls(tmp_path)) - len(before)
    done, cut = completed(at_crash), set(in_flight(at_crash))

    recovered = SCRIPT.run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None and recovered.result["status"] == "completed"
    assert recovered.result["output"] == uninterrupted["result"]["output"]
    after = second_run_calls(tmp_path)[len(before) :]
    assert after == [(kind, sid) for sid, kind in STEPS.items() if sid not in done]
    assert not {sid for _, sid in after} & done  # nothing completed was called again
    assert len(SCRIPT.calls(tmp_path)) - len(second_run_calls(tmp_path)) == first_run_calls  # run 0 untouched
    final = SCRIPT.events(tmp_path)
    assert [(e.seq, e.kind, e.step_id, e.data) for e in final[:crash]] == [
        (e.seq, e.kind, e.step_id, e.data) for e in at_crash
    ]
    assert len(cut) <= 1
