"""Fixtures of the notebook-layer tests (helpers, the kernel session and the JupyterLab harness:
``tests.notebook.support``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from tests.notebook.support import CHROMIUM, LAUNCH_ARGS, jupyter_lab, make_runtime


@pytest.fixture
def rt() -> loom.Runtime:
    """An in-memory runtime on a fake clock with sequential ids and its own flow registry."""
    return make_runtime()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server (its URL and root folder) shared by every browser test."""
    root = tmp_path_factory.mktemp("lab-root")
    with jupyter_lab(root, tmp_path_factory.mktemp("lab-scratch")) as url:
        yield url, root


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium through playwright, shared by the tests of one module (closed
    after it: playwright's sync API holds the main thread's event loop while it is open, which the
    asyncio tests that follow need)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        yield b
        b.close()
