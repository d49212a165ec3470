"""Each worker test's schemas are dropped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import stores


@pytest.fixture(autouse=True)
def _drop_schemas() -> Iterator[None]:
    yield
    stores.drop_schemas()
