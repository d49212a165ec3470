"""Fixtures of the crash suites (the harness itself is ``tests.crash.harness``).

A suite names its script once, as ``SCRIPT = CrashScript(...)`` at module level; ``uninterrupted``
runs that script once per module without a crash, as the reference every crashed run must match.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import stores
from tests.crash.harness import CrashScript


@pytest.fixture(scope="module")
def crash_script(request: pytest.FixtureRequest) -> CrashScript:
    """The ``SCRIPT`` of the requesting test module."""
    script = getattr(request.module, "SCRIPT", None)
    assert isinstance(script, CrashScript), f"{request.module.__name__} defines no SCRIPT = CrashScript(...)"
    return script


@pytest.fixture(scope="module")
def uninterrupted(crash_script: CrashScript, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the module's script that nothing interrupts: its ``result``, ``events`` and ``calls``."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    store, stores.current = stores.current, "duckdb"  # the reference runs on DuckDB for both stores
    try:
        outcome = crash_script.run(tmp, None, "start")
        assert outcome.returncode == 0, outcome.stderr
        assert outcome.result is not None
        return {"result": outcome.result, "events": crash_script.events(tmp), "calls": crash_script.calls(tmp)}
    finally:
        stores.current = store
