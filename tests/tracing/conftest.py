"""Fixtures of the tracing tests: a runtime over each journal kind, an in-memory span recorder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import loom_nb as loom
from tests import stores
from tests.analysis.support import JOURNALS, make_runtime
from tests.tracing.support import Recorder


@pytest.fixture(params=JOURNALS)
def rt(request: pytest.FixtureRequest) -> Iterator[loom.Runtime]:
    """A deterministic runtime (fake clock, sequential ids) over each journal kind."""
    if request.param == "postgres":
        request.getfixturevalue("_postgres_server")
    runtime = make_runtime(request.param)
    yield runtime
    runtime.close()
    stores.drop_schemas()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A tracer provider keeping its finished spans in memory."""
    rec = Recorder()
    yield rec
    rec.shutdown()
