"""A worker frozen (SIGSTOP) inside a non-idempotent call while its lease runs out: another worker
takes the run over, parks the call in doubt, a person answers ``run again`` and that worker charges;
when the frozen worker thaws, its heartbeat finds the lease lost and cancels the call in flight: the
ledger is charged once (``docs/design.md``, section 5a, "Fencing")."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest

from loom_nb.runtime import Runtime
from tests import stores
from tests.workers.fencing_agents import cashier
from tests.workers.support import wait_until, worker_process

MODULE = "tests.workers.fencing_agents"


def _worker(url: str, ledger: Path, pause: float) -> subprocess.Popen[str]:
    env = {"LOOM_LEDGER": str(ledger), "LOOM_CHARGE_PAUSE": str(pause)}
    return worker_process(url, MODULE, "--lease-seconds", "2", env=env)


def _lines(ledger: Path, what: str) -> list[list[str]]:
    text = ledger.read_text() if ledger.exists() else ""
    return [line.split() for line in text.splitlines() if line.startswith(what + " ")]


@pytest.mark.slow
def test_a_frozen_worker_does_not_make_its_call_after_another_took_the_run_over(
    _postgres_server: str, tmp_path: Path
) -> None:
    url = stores.new_schema("sigstop")
    ledger = tmp_path / "ledger"
    rt = Runtime.open(url)
    frozen = _worker(url, ledger, pause=60)  # it would charge a minute after entering the call
    second: subprocess.Popen[str] | None = None
    try:
        run = cashier.submit("tea", "job-tea", runtime=rt)
        wait_until(lambda: _lines(ledger, "entered"), 60, "the first worker to enter the call")
        frozen.send_signal(signal.SIGSTOP)
        second = _worker(url, ledger, pause=0)

        async def answer() -> None:
            await run.wait(until="suspended", timeout=60)  # the lease expired: the call is in doubt
            (gate,) = run.gates
            assert gate.kind == "InDoubt"
            gate.run_again()
            await run.wait(timeout=60)

        asyncio.run(answer())
        assert run.status == "completed"
        assert [(line[0], line[2]) for line in _lines(ledger, "charged")] == [("charged", "2")]
        frozen.send_signal(signal.SIGCONT)
        # Thawed, its heartbeat finds the lease gone and cancels the call it was frozen in.
        wait_until(lambda: _lines(ledger, "cancelled"), 20, "the thawed worker to cancel its call")
        assert len(_lines(ledger, "charged")) == 1 and not _lines(ledger, "refused")
        assert rt.result("job-tea").status == "completed"
    finally:
        frozen.send_signal(signal.SIGCONT)
        for worker in (frozen, second):
            if worker is not None:
                worker.terminate()
                worker.communicate(timeout=30)
        rt.close()
