"""In doubt, for real: a NON-idempotent effect kills its process mid-call over a DuckDB journal.

``tests/crash/in_doubt_flow.py`` runs the flow in a subprocess through the assembled runtime (the effect
ring included). The effect logs itself to a marker file and dies with ``os._exit(86)``, leaving a
committed ``step_started`` and no outcome. Fresh processes then recover (the step goes in doubt and
the run parks on an ``InDoubt`` gate, the effect is not re-invoked) and resolve it, each way in its
own copy of the journal file taken right after the crash.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.crash import in_doubt_flow as F
from tests.crash.harness import JOURNAL, run_script

ONE_STORE = "the in-doubt flow opens a DuckDB file with Runtime.open; the crash matrices run on both stores"

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("in_doubt_flow.py")
DB = JOURNAL
MARKER = "marker.jsonl"


def run(where: Path, *args: str, expect_exit: int = 0) -> dict[str, Any]:
    outcome = run_script(SCRIPT, str(where / DB), str(where / MARKER), *args)
    assert outcome.returncode == expect_exit, f"exit {outcome.returncode}\n{outcome.stderr}"
    return outcome.result or {}


def copy_journal(src: Path, dst: Path) -> None:
    """Copy the journal file (and its WAL, if any) and the marker file, as the crash left them."""
    dst.mkdir()
    for name in (DB, DB + ".wal", MARKER):
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


def step_kinds(events: list[dict[str, Any]], step_id: str = F.STEP_ID) -> list[tuple[str, int | None]]:
    """``(kind, attempt)`` of the step's events (event format 2 leaves out a first start's attempt and
    a completion's: the latest start's)."""
    out: list[tuple[str, int | None]] = []
    latest: int | None = None
    for e in events:
        if e["step_id"] != step_id:
            continue
        attempt = e["data"].get("attempt")
        if e["kind"] == "step_started":
            latest = attempt = attempt or 1
        elif e["kind"] == "step_completed" and attempt is None:
            attempt = latest
        out.append((e["kind"], attempt))
    return out


def error_name(error: dict[str, Any] | None) -> str:
    assert error is not None
    return str(error["type"]).rpartition(":")[2]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal and marker as the crash left them (never written to afterwards)."""
    where = tmp_path_factory.mktemp("crashed")
    run(where, "start", expect_exit=F.CRASH_EXIT_CODE)
    return where


@pytest.fixture
def copy(crashed: Path, tmp_path: Path) -> Path:
    where = tmp_path / "copy"
    copy_journal(crashed, where)
    return where


def recover(where: Path) -> dict[str, Any]:
    """Recover in a fresh process and check the in-doubt state it must leave."""
    out = run(where, "recover")
    (result,) = out["results"]
    assert result["status"] == "suspended"
    (gate,) = result["gates"]
    assert (gate["gate_id"], gate["kind"]) == (F.GATE_ID, "InDoubt")
    assert gate["payload"] == {
        "effect": "payments.charge",
        "step_id": F.STEP_ID,
        "input": {"amount": 42},
        "attempt": 1,
    }
    assert out["status"] == "suspended"
    assert len(out["marker"]) == 1, "recovery re-invoked a non-idempotent effect"
    return out


def test_the_crash_leaves_a_started_step_with_no_outcome(crashed: Path, tmp_path: Path) -> None:
    marker = [json.loads(line) for line in (crashed / MARKER).read_text().splitlines()]
    assert [(m["key"], m["attempt"]) for m in marker] == [("pay-1:charge", 1)]

    where = tmp_path / "look"
    copy_journal(crashed, where)
    before = recover(where)["before"]
    assert [e["kind"] for e in before] == ["execution_started", "step_started"]
    started = before[-1]
    assert started["step_id"] == F.STEP_ID
    assert started["data"]["effect"] == "payments.charge"
    assert "idempotency_key" not in started["data"] and "attempt" not in started["data"]  # format 2: derived
    assert before[0]["data"]["principal"] == {"name": "cashier", "scopes": ["payments"]}


def test_recovery_records_step_in_doubt_parks_on_the_gate_and_does_not_re_invoke(copy: Path) -> None:
    out = recover(copy)
    new = out["after"][len(out["before"]) :]
    assert [(e["kind"], e["step_id"]) for e in new] == [
        ("step_in_doubt", F.STEP_ID),
        ("gate_opened", F.GATE_ID),
        ("execution_suspended", None),
    ]
    assert new[0]["data"] == {"effect": "payments.charge", "attempt": 1}
    assert new[1]["data"]["kind"] == "InDoubt"
    assert new[2]["data"] == {"gates": [F.GATE_ID]}

    again = run(copy, "recover")  # a second recovery finds nothing running: nothing happens
    assert again["results"] == []
    assert again["after"] == out["after"]
    assert len(again["marker"]) == 1


def test_resolved_as_happened_records_that_output_and_the_run_uses_it(copy: Path) -> None:
    recover(copy)
    out = run(copy, "resolve", "happened")
    (result,) = out["results"]
    assert result["status"] == "completed"
    assert result["output"] == {
        "charged": True,
        "receipt": F.OPERATOR_OUTPUT,
        "mail": f"mailed {F.OPERATOR_OUTPUT['receipt']}",
    }
    assert len(out["marker"]) == 1, "the effect ran although a person said it had happened"
    assert step_kinds(out["after"]) == [("step_started", 1), ("step_in_doubt", 1), ("step_completed", 1)]
    (completed,) = [e for e in out["after"] if e["kind"] == "step_completed" and e["step_id"] == F.STEP_ID]
    assert completed["data"]["output"] == F.OPERATOR_OUTPUT
    assert completed["data"]["resolved_by"] == F.GATE_ID
    resolved = [e for e in out["after"] if e["kind"] == "gate_resolved"]
    assert resolved[0]["data"]["payload"]["action"] == "happened"


def test_resolved_as_run_again_invokes_the_effect_once_more_with_the_same_key(copy: Path) -> None:
    recover(copy)
    out = run(copy, "resolve", "run_again")
    (result,) = out["results"]
    assert result["status"] == "completed"
    receipt = {"receipt": "rcpt-pay-1:charge-2", "amount": 42}
    assert result["output"] == {"charged": True, "receipt": receipt, "mail": "mailed rcpt-pay-1:charge-2"}
    assert [(m["key"], m["attempt"]) for m in out["marker"]] == [("pay-1:charge", 1), ("pay-1:charge", 2)]
    assert out["marker"][0]["pid"] != out["marker"][1]["pid"]
    assert step_kinds(out["after"]) == [
        ("step_started", 1),
        ("step_in_doubt", 1),
        ("step_started", 2),
        ("step_completed", 2),
    ]
    restarted = [e for e in out["after"] if e["kind"] == "step_started" and e["step_id"] == F.STEP_ID][-1]
    assert restarted["data"] == {"effect": "payments.charge", "input": restarted["data"]["input"], "attempt": 2}
    # the key is derived (event format 2): the marker above shows the effect saw pay-1:charge again


def test_resolved_as_fail_records_in_doubt_error_and_fails_the_run(copy: Path) -> None:
    recover(copy)
    out = run(copy, "resolve", "fail")
    (result,) = out["results"]
    assert result["status"] == "failed"
    assert error_name(result["error"]) == "InDoubtError"
    assert len(out["marker"]) == 1
    assert step_kinds(out["after"]) == [("step_started", 1), ("step_in_doubt", 1), ("step_failed", 1)]
    (failed,) = [e for e in out["after"] if e["kind"] == "step_failed"]
    assert failed["data"]["will_retry"] is False
    assert error_name(failed["data"]["error"]) == "InDoubtError"
    message = failed["data"]["error"]["message"]
    assert "step 'charge' (effect 'payments.charge') of execution 'pay-1' was cut in flight" in message
    assert "resolved as failed: checked by hand: fail" in message
    assert [e["step_id"] for e in out["after"] if e["kind"] == "step_started"] == [F.STEP_ID]
    assert out["after"][-1]["kind"] == "execution_failed"


def test_a_flow_that_catches_the_in_doubt_failure_completes(tmp_path: Path) -> None:
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    run(crashed, "start", "--catch", expect_exit=F.CRASH_EXIT_CODE)
    where = tmp_path / "copy"
    copy_journal(crashed, where)
    recover(where)
    out = run(where, "resolve", "fail")
    (result,) = out["results"]
    assert result["status"] == "completed"
    assert result["output"]["charged"] is False
    assert "resolved as failed" in result["output"]["why"]
    assert len(out["marker"]) == 1
