"""Crash matrix: kill a real process after every committed event, recover in a fresh one.

``tests/crash/crash_flow.py`` runs a flow (idempotent fetch -> decide -> NON-idempotent charge -> approval
gate -> idempotent ship) over a DuckDB file behind ``CrashingJournal``. For every N in 1..E-1 (E:
events of an uninterrupted run) the start process dies after the commit reaching N events, and a
second process recovers. The run must finish with the uninterrupted output, nothing committed may
change, no completed step may run again, an idempotent step cut in flight runs again with the same
idempotency key and the next attempt, and a non-idempotent one parks on an ``InDoubt`` gate.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import EventKind
from loom_nb.kernel import Engine
from tests import stores
from tests.crash import crash_flow
from tests.crash.harness import CrashScript, in_flight
from tests.journal.support import shape

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("crash_flow.py"), crash_flow.EXECUTION_ID, log="invocations.log")
#: Events of an uninterrupted run (checked by ``test_uninterrupted_run``; update it with the flow).
EVENTS = 15
# The harness's verbs under this suite's names.
run, journal_events, invocations, step_of = SCRIPT.run, SCRIPT.events, SCRIPT.calls, SCRIPT.step_of


def test_uninterrupted_run(uninterrupted: dict[str, Any]) -> None:
    result = uninterrupted["result"]
    assert result["status"] == "completed"
    assert result["output"]["shipped"] is True
    assert result["resolved"] == ["approval"]
    assert len(uninterrupted["events"]) == EVENTS, "the flow changed: update EVENTS"
    assert [(effect, step_of(key), attempt) for effect, key, attempt in uninterrupted["calls"]] == [
        ("inventory.fetch", "#1", 1),
        ("payments.charge", "#2", 1),
        ("shipping.ship", "ship", 1),
    ]


def assert_replays(tmp: Path) -> None:
    rt = Engine(stores.open_journal(stores.target(tmp), read_only=True), flows=crash_flow.FLOWS)
    try:
        report = rt.replay_sync(crash_flow.EXECUTION_ID)
    finally:
        rt.close()
    assert report.reproduced, report.message


@pytest.mark.parametrize("crash_after", range(1, EVENTS))
def test_crash_after_n_events_then_recover(tmp_path: Path, crash_after: int, uninterrupted: dict[str, Any]) -> None:
    crashed = run(tmp_path, crash_after, "start")
    assert crashed.returncode == crash_flow.CRASH_EXIT_CODE, crashed.stderr
    before = journal_events(tmp_path)
    assert len(before) >= crash_after
    calls_before = invocations(tmp_path)
    completed_before = {e.step_id for e in before if e.kind == "step_completed"}
    cut = in_flight(before)

    recovered = run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None
    assert recovered.result["status"] == "completed"
    assert recovered.result["output"] == uninterrupted["result"]["output"]

    after = journal_events(tmp_path)
    # every committed event is still there, unchanged
    assert shape(after[: len(before)]) == shape(before)
    assert [e.seq for e in after] == list(range(1, len(after) + 1))

    calls_after = invocations(tmp_path)
    assert calls_after[: len(calls_before)] == calls_before
    new_calls = calls_after[len(calls_before) :]
    # nothing that completed before the crash runs again
    assert not [c for c in new_calls if step_of(c[1]) in completed_before]
    # the crash switch fires right after a commit, so no effect ever ran twice
    assert all(n == 1 for n in Counter(key for _, key, _ in calls_after).values())

    resolved = recovered.result["resolved"]
    for sid, started in cut.items():
        effect, key, attempt = (
            started.data["effect"],
            f"{started.execution_id}:{sid}",  # the idempotency key (event format 2 derives it)
            started.data.get("attempt", 1),
        )
        mine = [c for c in new_calls if c[1] == key]
        if crash_flow.EFFECTS[effect]:  # idempotent: re-invoked, same key, next attempt
            assert mine == [(effect, key, attempt + 1)]
            assert f"{sid}:in_doubt" not in resolved
        else:  # not idempotent: recorded in doubt, parked on a gate, never re-invoked
            assert mine == []
            assert [e.data for e in after if e.kind == "step_in_doubt" and e.step_id == sid] == [
                {"effect": effect, "attempt": attempt}
            ]
            assert f"{sid}:in_doubt" in resolved
            (done,) = [e for e in after if e.kind == "step_completed" and e.step_id == sid]
            assert done.data["resolved_by"] == f"{sid}:in_doubt"
    if not any(not crash_flow.EFFECTS[s.data["effect"]] for s in cut.values()):
        assert not [e for e in after if e.kind == "step_in_doubt"]

    # one of each: no decision, stream chunk or value was recorded twice
    kinds = Counter(e.kind for e in after)
    assert (kinds["decision_recorded"], kinds["stream_chunk"], kinds["value_recorded"]) == (1, 1, 1)
    assert kinds["execution_completed"] == 1
    # every step ran exactly once or was vouched for by a person
    assert {step_of(k) for _, k, _ in calls_after} | {
        g.removesuffix(":in_doubt") for g in resolved if g.endswith(":in_doubt")
    } == {"#1", "#2", "ship"}
    assert_replays(tmp_path)


@pytest.mark.parametrize(("first", "second"), [(6, 1), (11, 1)])
def test_crash_during_recovery_then_recover_again(
    tmp_path: Path, first: int, second: int, uninterrupted: dict[str, Any]
) -> None:
    """A second crash during recovery: the next recovery still finishes the run the same way."""
    assert run(tmp_path, first, "start").returncode == crash_flow.CRASH_EXIT_CODE
    before = shape(journal_events(tmp_path))
    assert run(tmp_path, second, "recover").returncode == crash_flow.CRASH_EXIT_CODE
    middle = shape(journal_events(tmp_path))
    assert middle[: len(before)] == before and len(middle) > len(before)
    final = run(tmp_path, None, "recover")
    assert final.returncode == 0, final.stderr
    assert final.result is not None and final.result["output"] == uninterrupted["result"]["output"]
    assert shape(journal_events(tmp_path))[: len(middle)] == middle
    assert all(n == 1 for n in Counter(key for _, key, _ in invocations(tmp_path)).values())
    assert_replays(tmp_path)


@pytest.mark.parametrize("effect", list(crash_flow.EFFECTS))
def test_crash_inside_an_effect_then_recover(tmp_path: Path, effect: str, uninterrupted: dict[str, Any]) -> None:
    """The process dies inside the effect, after it acted and before its outcome was journaled: the
    real in-doubt case. Idempotent: invoked again with the same key, as attempt 2 when its start was
    committed (a fresh run's first step), else as attempt 1 again (``Durability.AFTER``: its start
    and outcome are committed together, so the journal holds no trace of the cut call). Not
    idempotent: never invoked again; a person says what happened through the InDoubt gate."""
    crashed = run(tmp_path, f"effect:{effect}", "start")
    assert crashed.returncode == crash_flow.CRASH_EXIT_CODE, crashed.stderr
    before = journal_events(tmp_path)
    cut = in_flight(before)
    if cut:
        ((sid, started),) = cut.items()
        key = f"{started.execution_id}:{sid}"  # the idempotency key (event format 2 derives it)
        assert (started.data["effect"], started.data.get("attempt", 1)) == (effect, 1)
    else:
        assert crash_flow.EFFECTS[effect], "a non-idempotent step's start is committed before it runs"
        key = invocations(tmp_path)[-1][1]
        assert key not in {f"{e.execution_id}:{e.step_id}" for e in before if e.kind == EventKind.STEP_STARTED}
    assert invocations(tmp_path)[-1] == (effect, key, 1)

    recovered = run(tmp_path, None, "recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.result is not None
    assert recovered.result["output"] == uninterrupted["result"]["output"]
    after = journal_events(tmp_path)
    assert shape(after[: len(before)]) == shape(before)
    mine = [c for c in invocations(tmp_path) if c[1] == key]
    if crash_flow.EFFECTS[effect]:
        assert mine == [(effect, key, 1), (effect, key, 2 if cut else 1)]
        assert not [e for e in after if e.kind == "step_in_doubt"]
    else:
        assert mine == [(effect, key, 1)]
        assert [e.step_id for e in after if e.kind == "step_in_doubt"] == [sid]
        assert f"{sid}:in_doubt" in recovered.result["resolved"]
    assert_replays(tmp_path)
