"""A real process running ``agent.map`` is killed mid-batch; running the same map again in a new
process finishes every item, makes no call whose completion the journal held, and gives the
uninterrupted batch's outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loom_nb.journal import EventKind
from tests import stores
from tests.crash.batch_crash_flow import CONCURRENCY, CRASH_EXIT_CODE, INPUTS
from tests.crash.harness import run_script

SCRIPT = Path(__file__).with_name("batch_crash_flow.py")


def calls(where: Path) -> list[tuple[str, str]]:
    path = where / "calls.log"
    if not path.exists():
        return []
    return [tuple(line.split(" ")[:2]) for line in path.read_text(encoding="utf-8").splitlines()]  # type: ignore[misc]


def completed_keys(where: Path, ids: list[str]) -> set[str]:
    """``<execution id>:<step id>`` of every step the journal holds completed (an idempotency key)."""
    journal = stores.open_journal(stores.target(where), read_only=True)
    try:
        return {f"{eid}:{e.step_id}" for eid in ids for e in journal.read(eid) if e.kind == EventKind.STEP_COMPLETED}
    finally:
        journal.close()


def run(where: Path, crash: int | None) -> Any:
    target = stores.target(where)
    return run_script(SCRIPT, target, str(where / "calls.log"), "none" if crash is None else str(crash))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("uninterrupted")
    store, stores.current = stores.current, "duckdb"  # the reference runs on DuckDB for both stores
    try:
        outcome = run(tmp, None)
    finally:
        stores.current = store
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.result is not None
    return {"result": outcome.result, "calls": calls(tmp)}


@pytest.mark.slow
def test_the_uninterrupted_batch_runs_every_item_concurrently(reference: dict[str, Any]) -> None:
    result = reference["result"]
    assert result["status"] == ["completed"] * len(INPUTS)
    assert result["output"][0] == "city Paris: sunny in Paris"
    assert result["peak"] == CONCURRENCY
    assert len(reference["calls"]) == 3 * len(INPUTS)  # two model turns and one tool call each


@pytest.mark.slow
@pytest.mark.parametrize("crash", [3, 17, 40, 61])
def test_a_batch_killed_mid_run_resumes_without_re_making_a_completed_call(
    crash: int, reference: dict[str, Any], tmp_path: Path
) -> None:
    first = run(tmp_path, crash)
    assert first.returncode == CRASH_EXIT_CODE, first.stderr
    ids = reference["result"]["ids"]
    done_before = completed_keys(tmp_path, ids)
    made_before = len(calls(tmp_path))
    assert made_before < len(reference["calls"])  # the crash cut the batch short

    second = run(tmp_path, None)
    assert second.returncode == 0, second.stderr
    result = second.result
    assert result is not None and result["ids"] == ids
    assert result["status"] == ["completed"] * len(INPUTS)
    assert result["output"] == reference["result"]["output"]
    assert any(result["resumed"])
    remade = [key for _, key in calls(tmp_path)[made_before:] if key in done_before]
    assert remade == [], f"completed calls made again after the crash: {remade}"
    # Every call of the reference was made at least once, and nothing else was.
    assert {key for _, key in calls(tmp_path)} == {key for _, key in reference["calls"]}
