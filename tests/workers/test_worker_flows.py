"""A worker started without the module that defines a queued run's flow leaves the run queued for a
worker that has it, and says so in one log line (before: it took the run, failed its recovery, and
took it again ~90 times a second)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from loom_nb.runtime import Runtime
from tests import stores
from tests.workers.fencing_agents import cashier
from tests.workers.support import wait_until, worker_process


def _worker(url: str, module: str, ledger: Path) -> subprocess.Popen[str]:
    return worker_process(url, module, env={"LOOM_LEDGER": str(ledger)})


@pytest.mark.slow
def test_a_worker_without_the_flow_leaves_the_run_queued_and_logs_it_once(
    _postgres_server: str, tmp_path: Path
) -> None:
    url = stores.new_schema("noflow")
    rt = Runtime.open(url)
    try:
        cashier.submit("tea", "job-tea", runtime=rt)
        other = _worker(url, "tests.workers.worker_agents", tmp_path / "ledger")  # clerk and courier only
        time.sleep(3)
        assert rt.journal.get_execution("job-tea").status == "queued"
        other.terminate()
        _, err = other.communicate(timeout=30)
        lines = [line for line in err.splitlines() if line.strip()]
        noted = [line for line in lines if "wait for a worker that has it" in line]
        assert len(noted) == 1, err
        assert "'agent:cashier'" in noted[0] and "--import" in noted[0]
        assert "Traceback" not in err and len(lines) < 5, err
        right = _worker(url, "tests.workers.fencing_agents", tmp_path / "ledger")
        try:
            wait_until(lambda: rt.journal.get_execution("job-tea").status == "completed", 30, "the run to complete")
            assert rt.result("job-tea").status == "completed"
        finally:
            right.terminate()
            right.communicate(timeout=30)
    finally:
        rt.close()
