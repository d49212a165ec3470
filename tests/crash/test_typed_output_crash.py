"""The kill matrix of a typed-output run (``docs/design.md``, section 6.15): a real process running a
``loom.Agent(output_type=Trip)`` over a DuckDB file is killed after every commit of the run (a failed
answer sent back, then a valid one), and a fresh process recovers it. The recovered process makes
ONLY the remaining calls, the typed result equals the uninterrupted run's, and nothing committed
changes. ``tests/crash/typed_output_crash_flow.py`` describes the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import EventKind
from tests.crash import typed_output_crash_flow as flow
from tests.crash.harness import CrashScript, completed, in_flight

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("typed_output_crash_flow.py"), flow.EXECUTION_ID)
#: Events committed after each commit of an uninterrupted run (checked by test_uninterrupted_run).
COMMITS = [2, 4, 8, 10]  # the idempotent lookup rides the next model commit (design.md, section 4)
STEPS = {"#turn:0": "model", "#turn:0:tool:0": "tool", "#turn:1": "model", "#turn:2": "model"}


def calls_made(tmp: Path) -> list[tuple[str, str]]:
    return [(what, SCRIPT.step_of(key)) for what, key, _ in SCRIPT.calls(tmp)]


def test_uninterrupted_run(uninterrupted: dict[str, Any]) -> None:
    result = uninterrupted["result"]
    assert result["status"] == "completed" and result["typed"] == "Trip"
    assert result["output"] == {
        "city": "Rome",
        "weather": "Rome: sunny, 21C",
        "celsius": 21,
        "note": "- celsius: Field required",
    }
    assert result["commits"] == COMMITS, "the flow or the kernel's commit batching changed: update COMMITS"
    assert [(w, SCRIPT.step_of(k)) for w, k, _ in uninterrupted["calls"]] == [(k, s) for s, k in STEPS.items()]
    # The failed attempt is journaled: turn 2's delta holds its error result.
    started = {e.step_id: e.data for e in uninterrupted["events"] if e.kind == EventKind.STEP_STARTED}
    (sent_back,) = [a["msg"] for a in started["#turn:2"]["input"]["add"] if "msg" in a]
    assert sent_back["is_error"] and "celsius: Field required" in sent_back["text"]


@pytest.mark.parametrize("crash", COMMITS, ids=[f"after-{n}-events" for n in COMMITS])
def test_recovery_makes_only_the_remaining_calls_and_gives_the_same_typed_result(
    tmp_path: Path, crash: int, uninterrupted: dict[str, Any]
) -> None:
    died = SCRIPT.run(tmp_path, crash, "start")
    assert died.returncode == flow.CRASH_EXIT_CODE, died.stderr
    at_crash = SCRIPT.events(tmp_path)
    assert len(at_crash) == crash
    before = calls_made(tmp_path)
    done, cut = completed(at_crash), set(in_flight(at_crash))

    recovered = SCRIPT.run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None and recovered.result["status"] == "completed"
    assert recovered.result["typed"] == "Trip"
    assert recovered.result["output"] == uninterrupted["result"]["output"]

    after = calls_made(tmp_path)[len(before) :]
    assert after == [(kind, sid) for sid, kind in STEPS.items() if sid not in done]
    assert not {sid for _, sid in after} & done  # nothing completed was called again
    final = SCRIPT.events(tmp_path)
    assert [(e.seq, e.kind, e.step_id, e.data) for e in final[:crash]] == [
        (e.seq, e.kind, e.step_id, e.data) for e in at_crash
    ]
    for sid in cut:
        attempts = [e.data.get("attempt", 1) for e in final if e.kind == EventKind.STEP_STARTED and e.step_id == sid]
        assert attempts == [1, 2]
