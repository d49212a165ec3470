"""Fixtures of the notebook-layer tests (helpers, the kernel session and the JupyterLab harness:
``tests.notebook.support``)."""

from __future__ import annotations

import pytest

import loom_nb as loom
from tests.notebook.support import make_runtime


@pytest.fixture
def rt() -> loom.Runtime:
    """An in-memory runtime on a fake clock with sequential ids and its own flow registry."""
    return make_runtime()
