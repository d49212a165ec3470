"""A real kernel (nbclient / jupyter_client): a click on the approval card, sent as the comm message a
browser sends, resumes the run; after a kernel restart ``%loom pending`` shows the card again and a
click resumes the run from the journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom_nb.journal import digest_value
from tests.notebook.support import AGENT_CELL, REPORT_CELL, KernelSession, kernel_button_ids, last_json

pytestmark = pytest.mark.slow

TASK = "Remove the stale files in /tmp/x"


def load_cell(journal: Path) -> str:
    return f"import os\nos.environ['LOOM_JOURNAL'] = {str(journal)!r}\n%load_ext loom_nb"


def test_click_resumes_the_run_in_a_real_kernel_and_after_a_restart(tmp_path: Path) -> None:
    journal = tmp_path / "kernel.duckdb"
    with KernelSession(tmp_path) as k:
        assert k.stdout(load_cell(journal)).strip() == (
            f"loom_nb: journal {journal} is open: a new journal, from $LOOM_JOURNAL "
            "(%loom status, %loom runs, %loom pending)"
        )
        k.run(AGENT_CELL)
        outputs = k.run(f"run = agent.start({TASK!r})")
        (view_id,) = k.widget_models(outputs)  # the live view, displayed by the run hook
        assert outputs[0]["data"]["text/plain"].endswith("(agent:tidy): running")
        assert "suspended" in k.stdout("await run.wait(until='paused')\nprint(run.status)")

        # the card was built by the background task after the start cell ended: ask the kernel
        (approve,) = kernel_button_ids(k, "loom-approve")
        k.click(approve)
        report = last_json(k.stdout(REPORT_CELL))
        assert report == {
            "status": "completed",
            "output": "Done. I removed the stale file.",
            "deleted": ["/tmp/x/stale.log"],
            "resolved": [{"approved": True, "reason": None, "digest": digest_value({"path": "/tmp/x/stale.log"})}],
        }
        assert kernel_button_ids(k, "loom-approve") == []  # the card disabled itself

        # a second run waits at its gate; then the kernel restarts (a new process)
        run_id = k.stdout(f"run2 = agent.start({TASK!r})\nawait run2.wait(until='paused')\nprint(run2.id)").strip()
        k.restart()
        lines = k.stdout(load_cell(journal)).strip().splitlines()
        assert lines[1] == "loom_nb: 1 gate(s) open in 1 execution(s): run %loom pending to show them"

        # before the agent's cell runs again, the card says which flow is missing (no crash)
        outputs = k.run("%loom pending")
        text = "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
        assert "1 gate(s) open when this cell ran, in 1 execution(s); the views below stay live" in text
        assert "no flow named 'agent:tidy' is registered in this process" in text
        (view_id,) = k.widget_models(outputs)
        assert k.find_buttons(view_id, "loom-approve") == []  # disabled until the agent is defined

        k.run(AGENT_CELL)  # re-run the cell that defines the agent: after it the card enables itself
        (approve,) = k.find_buttons(view_id, "loom-approve")  # walking the widget state the kernel sent
        k.click(approve)
        report = last_json(
            k.stdout(
                "from loom_nb.notebook.runs import live_run\n"
                f"run = live_run(loom.default_runtime(), {run_id!r})\n" + REPORT_CELL
            )
        )
        assert report == {
            "status": "completed",
            "output": "Done. I removed the stale file.",
            "deleted": ["/tmp/x/stale.log"],
            "resolved": [{"approved": True, "reason": None, "digest": digest_value({"path": "/tmp/x/stale.log"})}],
        }
        assert "0 open gate(s)" in k.stdout("%loom status")


def test_approve_all_clicked_in_a_real_kernel_finishes_the_batch(tmp_path: Path) -> None:
    """``agent.map`` in a real kernel shows the batch view; a click on Approve all (the comm message a
    browser sends) answers every gate of the batch, and the runs finish; after a kernel restart the
    same cells run nothing again."""
    journal = tmp_path / "batch.duckdb"
    with KernelSession(tmp_path) as k:
        k.stdout(load_cell(journal))
        k.run(AGENT_CELL)
        outputs = k.run("batch = agent.map(['one', 'two', 'three'], concurrency=2)")
        assert len(k.widget_models(outputs)) == 1  # the batch view, displayed by the batch hook
        assert outputs[0]["data"]["text/plain"] == (
            "batch agent:tidy: 0/3 done, 0 failed, 0 waiting at a gate, 0 running, 3 queued"
        )
        # the view refreshes at most every 0.1 s: give its trailing refresh time to run
        assert k.stdout("import asyncio\nawait batch\nawait asyncio.sleep(0.3)\nprint(batch)").strip() == (
            "<Batch agent:tidy: 0/3 done, 0 failed, 3 waiting at a gate>"
        )
        (approve_all,) = kernel_button_ids(k, "loom-approve-all")
        k.click(approve_all)  # three gates wait: it asks first, the confirming click answers
        (confirm,) = kernel_button_ids(k, "loom-confirm-yes")
        k.click(confirm)
        report = k.stdout("await batch.wait(until='settled')\nprint(batch)\nprint(len(deleted))")
        assert report.strip().splitlines() == ["<Batch agent:tidy: 3/3 done, 0 failed, 0 waiting at a gate>", "3"]

        # after a kernel restart the same cells find the batch finished: nothing runs again
        k.restart()
        k.stdout(load_cell(journal))
        k.run(AGENT_CELL)
        outputs = k.run("batch = agent.map(['one', 'two', 'three'], concurrency=2)")
        assert outputs[0]["data"]["text/plain"] == "batch agent:tidy: 3/3 done, 0 failed, 0 waiting at a gate"
        report = k.stdout("await batch\nprint(sum(i.resumed for i in batch.items), len(deleted))")
        assert report.strip() == "3 0"
