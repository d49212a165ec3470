"""``%loom trace on`` / ``%loom trace off``: the live OpenTelemetry export from a notebook, through
``IPython.testing.globalipapp`` (a real IPython shell, no kernel: runs go on synchronously)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.testing import globalipapp
from opentelemetry import trace

from tests.notebook.support import TidyAgent
from tests.tracing.support import Recorder

GATE = "#turn:1:tool:0:approval"


@pytest.fixture(scope="module")
def shell() -> Any:
    return globalipapp.get_ipython()  # the one shell (start_ipython gives None once another module started it)


@pytest.fixture
def ip(shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("LOOM_JOURNAL", str(tmp_path / "nb.duckdb"))
    shell.run_line_magic("load_ext", "loom_nb")
    yield shell
    shell.run_line_magic("loom", "trace off")
    shell.run_line_magic("unload_ext", "loom_nb")


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    """A recorder set as OpenTelemetry's global tracer provider (for this test only)."""
    rec = Recorder()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: rec.provider)
    yield rec
    rec.shutdown()


def roots(recorder: Recorder) -> list[tuple[str, str]]:
    """``(execution id, status)`` of every trace's root span, in export order."""
    spans = [dict(s.attributes or {}) for s in recorder.spans() if s.parent is None]
    return [(str(a["loom.execution_id"]), str(a["loom.status"])) for a in spans]


def test_trace_on_exports_each_run_and_trace_off_stops(
    ip: Any, recorder: Recorder, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    ip.run_line_magic("loom", "trace on --suspended")
    ip.run_line_magic("loom", "trace on --suspended")  # again: still one export
    out = capsys.readouterr().out
    assert out.count("loom_nb: OpenTelemetry export on: each run in ") == 2
    assert "is exported when it completes, fails or suspends" in out
    run = TidyAgent().agent.start("Remove the stale files in /tmp/x")
    assert run.status == "suspended"
    ip.run_line_magic("loom", f"resume {run.id} {GATE} --approve")
    assert roots(recorder) == [(run.id, "suspended"), (run.id, "completed")]
    ip.run_line_magic("loom", "trace off")
    assert "loom_nb: OpenTelemetry export off" in capsys.readouterr().out
    TidyAgent("other").agent.start("Remove the stale files")
    assert len(roots(recorder)) == 2


def test_trace_on_without_suspensions(ip: Any, recorder: Recorder) -> None:
    ip.run_line_magic("loom", "trace on")
    run = TidyAgent().agent.start("Remove the stale files in /tmp/x")
    ip.run_line_magic("loom", f"resume {run.id} {GATE} --refuse")
    assert roots(recorder) == [(run.id, "completed")]


def test_trace_on_without_a_tracer_provider_is_a_one_line_error(
    ip: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    capsys.readouterr()
    ip.run_cell("%loom trace on")
    err = capsys.readouterr().err.strip()
    assert err == (
        "UsageError: no OpenTelemetry tracer provider is set: pass tracer_provider=TracerProvider(...) "
        "(from opentelemetry.sdk.trace), or call opentelemetry.trace.set_tracer_provider(...) first"
    )
