"""The bound on attempts across real processes: the idempotent fetch kills its own process inside
every attempt; after ``DEFAULT_ATTEMPT_LIMIT`` such deaths the next recovery fails the step with
``RetriesExhaustedError`` instead of invoking it once more."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.journal import EventKind
from loom_nb.kernel.context import DEFAULT_ATTEMPT_LIMIT
from tests.crash import crash_flow
from tests.crash.harness import CrashScript

pytestmark = pytest.mark.slow

SCRIPT = CrashScript(Path(__file__).with_name("crash_flow.py"), crash_flow.EXECUTION_ID, log="invocations.log")
DIE_IN_FETCH = "effect:inventory.fetch"


def test_a_step_whose_process_dies_in_every_attempt_fails_once_its_attempts_are_spent(tmp_path: Path) -> None:
    outcomes = [SCRIPT.run(tmp_path, DIE_IN_FETCH, "start")]
    outcomes += [SCRIPT.run(tmp_path, DIE_IN_FETCH, "recover") for _ in range(DEFAULT_ATTEMPT_LIMIT - 1)]
    assert [o.returncode for o in outcomes] == [crash_flow.CRASH_EXIT_CODE] * DEFAULT_ATTEMPT_LIMIT
    last = SCRIPT.run(tmp_path, DIE_IN_FETCH, "recover")
    assert last.returncode == 0, last.stderr
    assert last.result is not None and last.result["status"] == "failed"
    assert [(what, SCRIPT.step_of(key), n) for what, key, n in SCRIPT.calls(tmp_path)] == [
        ("inventory.fetch", "#1", n) for n in range(1, DEFAULT_ATTEMPT_LIMIT + 1)
    ]
    events = SCRIPT.events(tmp_path)
    failed, ended = events[-2], events[-1]
    assert (failed.kind, failed.step_id, failed.data["attempt"]) == (EventKind.STEP_FAILED, "#1", DEFAULT_ATTEMPT_LIMIT)
    assert failed.data["error"]["type"] == "loom_nb.errors:RetriesExhaustedError"
    assert "execution 'run-1'" in failed.data["error"]["message"]
    assert ended.kind == EventKind.EXECUTION_FAILED
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
