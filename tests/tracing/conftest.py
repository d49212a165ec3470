"""Fixtures of the tracing tests: a runtime over each journal kind, an in-memory span recorder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import loom_nb as loom
from tests.analysis.support import JOURNALS, make_runtime
from tests.tracing.support import Recorder


@pytest.fixture(params=JOURNALS)
def rt(request: pytest.FixtureRequest) -> Iterator[loom.Runtime]:
    """A deterministic runtime (fake clock, sequential ids) over each journal kind."""
    runtime = make_runtime(request.param)
    yield runtime
    runtime.close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A tracer provider keeping its finished spans in memory."""
    rec = Recorder()
    yield rec
    rec.shutdown()
