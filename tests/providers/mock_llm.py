"""A third-party OpenAI-compatible server in the suite: ``@dwmkerr/mock-llm`` (npm), installed by
``make servers`` into ``tests/servers/node_modules`` and started here on a free 127.0.0.1 port.

mock-llm answers by rules: a path regex, an optional JMESPath ``match`` on the request, an optional
``sequence`` (the n-th request to that path) and a response (status and JSON content, with
``{{jmes request ...}}`` templates). The last matching rule wins. Each test replaces the rules
through ``POST /config`` after ``DELETE /config`` has reset the sequence counters.

If node or the package is missing, or the server does not come up, the test fails and says why
(CI must not skip it silently).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests.providers.provider_server import free_port

SERVERS = Path(__file__).resolve().parent.parent / "servers"
BINARY = SERVERS / "node_modules" / ".bin" / "mock-llm"
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def _http(method: str, url: str, body: Any = None, timeout: float = 5.0) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class MockLLM:
    """A running mock-llm process: ``url`` to point a client at, ``rules`` to script it."""

    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self.url = url

    def rules(self, *rules: dict[str, Any], chunk_size: int = 5) -> None:
        """Replace the rules (and reset the per-path request counters)."""
        status, _ = _http("DELETE", self.url + "/config")
        assert status == 200, f"DELETE /config answered {status}"
        config = {"streaming": {"chunkSize": chunk_size, "chunkIntervalMs": 1}, "rules": list(rules)}
        status, body = _http("POST", self.url + "/config", config)
        assert status == 200, f"POST /config answered {status}: {body[:300]!r}"


def rule(
    path: str, content: Any, *, status: int = 200, sequence: int | None = None, match: str | None = None
) -> dict[str, Any]:
    """One mock-llm rule answering ``content`` (a JSON value, or a template string) on ``path``."""
    out: dict[str, Any] = {
        "path": f"^{path}$",
        "method": "POST",
        "response": {"status": status, "content": content if isinstance(content, str) else json.dumps(content)},
    }
    if sequence is not None:
        out["sequence"] = sequence
    if match is not None:
        out["match"] = match
    return out


def _fail(reason: str) -> None:
    pytest.fail(f"the third-party OpenAI-compatible server could not be used: {reason}", pytrace=False)


@contextmanager
def running_mock_llm(timeout: float = 30.0) -> Iterator[MockLLM]:
    """Start mock-llm on a free 127.0.0.1 port, wait until ``/health`` answers, stop it on exit."""
    node = shutil.which("node")
    if node is None:
        _fail("`node` is not on PATH (install Node.js 20, then run `make servers`)")
    if not BINARY.exists():
        _fail(f"{BINARY} is missing: run `make servers` (npm ci in tests/servers)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(port)}
    config = SERVERS / "mock-llm.yaml"
    process = subprocess.Popen(
        [str(BINARY), "--config", str(config)],
        cwd=SERVERS,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                output = process.stdout.read().decode("utf-8", "replace") if process.stdout else ""
                _fail(f"mock-llm exited with status {process.returncode} before answering: {output[-2000:]}")
            try:
                status, _ = _http("GET", url + "/health", timeout=1.0)
            except OSError:
                status = 0
            if status == 200:
                break
            if time.monotonic() > deadline:
                _fail(f"mock-llm did not answer GET {url}/health within {timeout:g} s")
            time.sleep(0.05)
        yield MockLLM(process, url)
    finally:
        _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server; kill it if it is still there after 5 s (``communicate`` closes its pipe)."""
    process.terminate()
    with suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5)
    if process.poll() is None:
        process.kill()
        process.communicate()
