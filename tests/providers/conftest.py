"""Fixtures of the provider tests: the local wire-format server, and no proxy from the environment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from provider_server import ProviderServer, running_server


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A started ``ProviderServer`` (see ``tests/provider_server.py``), stopped after the test."""
    with running_server() as started:
        yield started


#: Environment variables that would route the clients' loopback requests through a proxy.
PROXY_VARIABLES = [f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "ALL")]


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here goes through a proxy named in the environment (in either case)."""
    for name in PROXY_VARIABLES + [v.lower() for v in PROXY_VARIABLES]:
        monkeypatch.delenv(name, raising=False)
