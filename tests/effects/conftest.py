"""Fixtures of the effect-ring tests (helpers that are not fixtures: ``tests.effects.support``)."""

from __future__ import annotations

import pytest

from loom_nb.runtime import Runtime
from tests.effects.support import make


@pytest.fixture
def rt() -> Runtime:
    """The assembled runtime (the effect ring) on a fake clock, sequential ids and a private flow registry."""
    return make()
