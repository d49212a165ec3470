"""Fixtures of the kernel tests (helpers that are not fixtures: ``tests.kernel.support``)."""

from __future__ import annotations

import pytest

from loom_nb.kernel import Engine
from tests.kernel.support import Calls, make_runtime


@pytest.fixture
def rt() -> Engine:
    """A deterministic kernel ``Engine`` on an in-memory journal (see ``make_runtime``)."""
    return make_runtime()


@pytest.fixture
def calls() -> Calls:
    """A fresh recorder of effect invocations (register effects with ``register_recording``)."""
    return Calls()
