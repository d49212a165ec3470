"""Fixtures of the provider tests: no proxy or API key from the environment, and a local provider
server (``provider_server``) that speaks the three wires."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from provider_server import ProviderServer, running_server


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours proxy variables; requests to 127.0.0.1 must not be sent anywhere else.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    """A running local provider server (stopped after the test)."""
    with running_server() as s:
        yield s
