"""Helpers for the worker tests (import as ``from tests.workers.support import ...``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def worker_process(url: str, module: str, *extra: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """A real ``loom-nb worker`` on the journal ``url`` that imports ``module`` (stdout and stderr
    piped, as text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "loom_nb.cli", "worker", "--journal", url, "--import", module, *extra],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(predicate: Callable[[], object], seconds: float, what: str) -> None:
    """Poll ``predicate`` every 50 ms until it is true; fail the test naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")
