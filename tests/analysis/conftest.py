"""Fixtures of the analysis tests (journals made by real agents: ``tests.analysis.support``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import loom_nb as loom
from tests import stores
from tests.analysis.support import JOURNALS, make_runtime


@pytest.fixture(params=JOURNALS)
def rt(request: pytest.FixtureRequest) -> Iterator[loom.Runtime]:
    """A deterministic runtime over each journal kind (in memory, DuckDB ``:memory:``, PostgreSQL)."""
    if request.param == "postgres":
        request.getfixturevalue("_postgres_server")
    runtime = make_runtime(request.param)
    yield runtime
    runtime.close()
    stores.drop_schemas()
