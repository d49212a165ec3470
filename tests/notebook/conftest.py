"""Fixtures of the notebook-layer tests (helpers, the kernel session and the JupyterLab harness:
``tests.notebook.support``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import loom_nb as loom
from tests.notebook.support import CHROMIUM, LAUNCH_ARGS, Lab, jupyter_lab, make_runtime


@pytest.fixture
def rt() -> loom.Runtime:
    """An in-memory runtime on a fake clock with sequential ids and its own flow registry."""
    return make_runtime()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The JupyterLab server (light theme) shared by every browser test of what the view does:
    clicks, keys, restarts and layout do not depend on the theme."""
    with _running_lab("light", tmp_path_factory) as running:
        yield running


@pytest.fixture(scope="session", params=["light", "dark"])
def themed_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab server per theme, for the tests of how the view looks (contrast): each runs in
    the light theme (on ``lab``'s server) and in the dark one (a second server, started once)."""
    if request.param == "light":
        yield request.getfixturevalue("lab")
        return
    with _running_lab(str(request.param), tmp_path_factory) as running:
        yield running


@contextmanager
def _running_lab(theme: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp(f"lab-root-{theme}")
    with jupyter_lab(root, tmp_path_factory.mktemp(f"lab-scratch-{theme}"), theme) as url:
        yield Lab(url, root, theme)


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
