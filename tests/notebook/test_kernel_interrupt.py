"""Kernel > Interrupt in a real kernel while a cell awaits a run: the wait stops with one line that says
the run goes on and how to stop it (no ``CancelledError`` traceback); the run goes on, and
``%loom cancel`` stops it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_core.utils import run_sync

from tests.notebook.support import KernelSession

pytestmark = pytest.mark.slow

HANGING_AGENT = '''
import asyncio
import os
import loom_nb as loom
os.environ["LOOM_JOURNAL"] = "interrupt.duckdb"
%load_ext loom_nb

@loom.tool
async def send_mail(to: str) -> str:
    """Send a mail (slowly)."""
    await asyncio.sleep(3600)
    return "sent"

def respond(request):
    return loom.ModelResponse.tool_calls([("send_mail", {"to": "ann"})], text="Sending.")

agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="mailer")
run = agent.start("mail ann", execution_id="mail-1", view=False)
'''


def execute_and_interrupt(k: KernelSession, code: str, *, after: float) -> list[dict[str, Any]]:
    """Execute ``code``, interrupt the kernel ``after`` seconds later, and return the cell's iopub
    messages (until the kernel is idle again)."""
    kc, km = k.client.kc, k.client.km
    msg_id = kc.execute(code)
    time.sleep(after)
    run_sync(km.interrupt_kernel)()
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msg = run_sync(kc.get_iopub_msg)(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return messages


def test_interrupting_await_run_stops_the_wait_not_the_run(tmp_path: Path) -> None:
    with KernelSession(tmp_path) as k:
        k.run(HANGING_AGENT)
        messages = execute_and_interrupt(k, "await run", after=1.0)
        errors = [m["content"] for m in messages if m["msg_type"] == "error"]
        assert len(errors) == 1, messages
        (error,) = errors
        assert error["ename"] == "WaitInterrupted"
        assert error["traceback"] == [
            "WaitInterrupted: stopped waiting for run mail-1; the run goes on (running). "
            "To stop it: run.cancel() or %loom cancel mail-1"
        ]
        assert "CancelledError" not in str(messages)
        assert k.stdout("print(run.status)").strip() == "running"  # the run went on
        out = k.stdout("%loom cancel mail-1 --reason 'not now'\nawait run.wait()\nprint(run.status)")
        assert out.splitlines() == [
            "loom_nb: cancelling execution mail-1 (it was running); its view shows when it stops",
            "cancelled",
        ]
        assert k.stdout("print(loom.frames().steps('mail-1').status.tolist())").strip() == ("['completed', 'in_doubt']")
