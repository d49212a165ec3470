"""Fixtures of the agent-loop tests (helpers that are not fixtures: ``tests.agent.support``)."""

from __future__ import annotations

import pytest

from loom_nb.runtime import Runtime
from tests.agent.support import make_runtime


@pytest.fixture
def rt() -> Runtime:
    """The assembled runtime (the effect ring) on a fake clock, sequential ids and a private flow registry."""
    return make_runtime()
