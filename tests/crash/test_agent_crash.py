"""The agent loop's crash matrix (``docs/design.md``, sections 6.2 and 7): a real process running an
agent over a DuckDB file is killed after every commit of the run, and a fresh process recovers it.
The recovered process makes ONLY the remaining model and tool calls (counted from the calls log),
the final result equals the uninterrupted run's, and nothing committed changes.

``tests/crash/agent_crash_flow.py`` runs the agent; its docstring describes the run. The commits are the
crash points (``docs/design.md``, section 4, durability rules): a fresh run's first model start; each
model completion, with the start of the tool it called (and, for an idempotent tool, that tool's
completion riding the next model step's commit); the non-idempotent ``book``'s start before it runs
and its completion right after (with the next model start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import EventKind
from tests.crash import agent_crash_flow as flow
from tests.crash.harness import CrashScript, completed, in_flight

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("agent_crash_flow.py"), flow.EXECUTION_ID)
#: Events committed after each commit of an uninterrupted run (checked by test_uninterrupted_run).
COMMITS = [2, 4, 7, 14, 16, 18]
#: Every model and tool step of the run (step id -> model|tool).
STEPS = {
    "#turn:0": "model",
    "#turn:0:tool:0": "tool",
    "#turn:1": "model",
    "#turn:1:tool:0": "tool",
    "#turn:1:tool:1": "tool",
    "#turn:2": "model",
    "#turn:2:tool:0": "tool",
    "#turn:3": "model",
}
NOT_IDEMPOTENT = {"#turn:2:tool:0"}  # book


# The harness's verbs under this suite's names.
run, journal_events = SCRIPT.run, SCRIPT.events


def called(calls: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """``(model|tool, step id)`` of each call."""
    return [(what, SCRIPT.step_of(key)) for what, key, _ in calls]


def calls_made(tmp: Path) -> list[tuple[str, str]]:
    """``(model|tool, step id)`` of every call, in order."""
    return called(SCRIPT.calls(tmp))


def test_uninterrupted_run(uninterrupted: dict[str, Any]) -> None:
    result = uninterrupted["result"]
    assert result["status"] == "completed"
    assert result["output"]["output"] == (
        "Plan: Paris: sunny, 21C; Rome: sunny, 21C; 10.0 EUR = 11.00 USD; booked Rome (ref BK-ROME)"
    )
    assert result["commits"] == COMMITS, "the flow or the kernel's commit batching changed: update COMMITS"
    assert called(uninterrupted["calls"]) == [(kind, sid) for sid, kind in STEPS.items()]


@pytest.mark.parametrize("crash", COMMITS, ids=[f"after-{n}-events" for n in COMMITS])
def test_recovery_makes_only_the_remaining_calls_and_ends_as_the_uninterrupted_run(
    tmp_path: Path, crash: int, uninterrupted: dict[str, Any]
) -> None:
    died = run(tmp_path, crash, "start")
    assert died.returncode == flow.CRASH_EXIT_CODE, died.stderr
    at_crash = journal_events(tmp_path)
    assert len(at_crash) == crash
    before = calls_made(tmp_path)
    done, cut = completed(at_crash), set(in_flight(at_crash))
    assert len(cut) <= 1
    # Before the crash, each step was called once, in the uninterrupted order.
    assert before == called(uninterrupted["calls"])[: len(before)]

    recovered = run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None
    assert recovered.result["status"] == "completed"
    assert recovered.result["output"] == uninterrupted["result"]["output"]

    after = calls_made(tmp_path)[len(before) :]
    remaining = [(kind, sid) for sid, kind in STEPS.items() if sid not in done and sid not in (cut & NOT_IDEMPOTENT)]
    assert after == remaining  # ONLY the remaining calls, each once, in order
    assert not {sid for _, sid in after} & done  # nothing completed was called again
    final = journal_events(tmp_path)
    assert [(e.seq, e.kind, e.step_id, e.data) for e in final[:crash]] == [
        (e.seq, e.kind, e.step_id, e.data) for e in at_crash
    ]
    if cut & NOT_IDEMPOTENT:
        # A booking cut in flight is never made twice: the run parked in doubt and a person said it happened.
        assert recovered.result["resolved"] == ["#turn:2:tool:0:in_doubt"]
    else:
        assert recovered.result["resolved"] == []
    for sid in cut - NOT_IDEMPOTENT:
        # An idempotent step cut in flight (every model turn) runs again as its next attempt, same key.
        attempts = [e.data.get("attempt", 1) for e in final if e.kind == EventKind.STEP_STARTED and e.step_id == sid]
        # (its key, <execution_id>:<step_id>, is derived in event format 2: the calls log shows it)
        assert attempts == [1, 2]
    assert not any(
        e.kind == EventKind.STEP_IN_DOUBT and (e.step_id or "") in STEPS.keys() - NOT_IDEMPOTENT for e in final
    )


def test_a_crash_between_a_model_step_started_and_its_completion_re_runs_just_that_turn(
    tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    """The process dies INSIDE the model call of turn 2: the call was made, its answer lost. An
    idempotent model step is committed with its outcome, and turn 1's idempotent tool calls ride that
    commit: none of them is in the journal, so recovery makes them again (same keys), then the rest;
    nothing the journal holds as completed is called again."""
    assert run(tmp_path, "inside:#turn:2", "start").returncode == flow.CRASH_EXIT_CODE
    at_crash = journal_events(tmp_path)
    assert "#turn:2" not in {e.step_id for e in at_crash}
    assert not in_flight(at_crash)  # turn 1's tools, started and done, wait for the model #turn:2 commit
    before = calls_made(tmp_path)
    assert before == called(uninterrupted["calls"])[:6] and before[-1] == ("model", "#turn:2")

    recovered = run(tmp_path, None, "recover")
    assert recovered.result is not None and recovered.result["output"] == uninterrupted["result"]["output"]
    after = calls_made(tmp_path)[len(before) :]
    assert after == [
        ("tool", "#turn:1:tool:0"),
        ("tool", "#turn:1:tool:1"),
        ("model", "#turn:2"),
        ("tool", "#turn:2:tool:0"),
        ("model", "#turn:3"),
    ]
    assert not {sid for _, sid in after} & completed(at_crash)
    final = journal_events(tmp_path)
    starts = [(e.step_id, e.data.get("attempt", 1)) for e in final if e.kind == EventKind.STEP_STARTED]
    # No trace of the cut calls, so each is attempt 1 again: the same key, never in doubt.
    assert [a for sid, a in starts if sid in {"#turn:1:tool:0", "#turn:1:tool:1", "#turn:2"}] == [1, 1, 1]
    assert recovered.result["resolved"] == []


@pytest.mark.parametrize(
    ("step", "again"),
    [("#turn:1:tool:0", True), ("#turn:2:tool:0", False)],
    ids=["idempotent-lookup", "non-idempotent-book"],
)
def test_a_crash_inside_a_tool_call(tmp_path: Path, uninterrupted: dict[str, Any], step: str, again: bool) -> None:
    assert run(tmp_path, f"inside:{step}", "start").returncode == flow.CRASH_EXIT_CODE
    before = calls_made(tmp_path)
    assert before[-1] == ("tool", step)

    recovered = run(tmp_path, None, "recover")
    assert recovered.result is not None and recovered.result["output"] == uninterrupted["result"]["output"]
    after = calls_made(tmp_path)[len(before) :]
    rest = [(kind, sid) for sid, kind in list(STEPS.items())[list(STEPS).index(step) + 1 :]]
    if again:  # idempotent: run again with the same key
        assert after == [("tool", step), *rest]
        assert recovered.result["resolved"] == []
    else:  # not idempotent: never made twice; a person says it happened
        assert after == rest
        assert recovered.result["resolved"] == [f"{step}:in_doubt"]
