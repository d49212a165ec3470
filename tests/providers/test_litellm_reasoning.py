"""A reasoning tool loop through LiteLLM's proxy (a real third-party server, pinned in
``tests/servers/litellm-requirements.txt``, installed and run by ``make test-proxies``; marked
``proxy``, which the default run leaves out) to an Anthropic-shaped backend (``provider_server``).

``OpenAIChat(reasoning_effort="low")`` asks LiteLLM for a Claude model; LiteLLM turns that into
Anthropic's extended thinking, and hands the signed thinking back as ``reasoning_content`` and
``thinking_blocks`` on the chat message. The next turn must carry the blocks back, signature and
all, or Anthropic refuses the tool loop with a 400: the backend's second request shows what
LiteLLM made of what loom sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import loom_nb as loom
from tests.providers.provider_server import ProviderServer, Raw, free_port, running_server

pytestmark = [pytest.mark.slow, pytest.mark.proxy]

LITELLM = Path(__file__).resolve().parents[1] / "servers" / "litellm" / ".venv" / "bin" / "litellm"
MASTER_KEY = "sk-loom-test-0123456789abcdefABCDEF"
STARTUP_SECONDS = 180.0
THINKING = {"type": "thinking", "thinking": "The user wants the weather in Paris.", "signature": "sig-ABC123"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}


def message(content: list[dict[str, Any]], stop: str) -> str:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 30},
        }
    )


def sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def streamed_thinking_then_call() -> str:
    start = json.loads(message([], "tool_use"))
    start |= {"stop_reason": None, "usage": {"input_tokens": 12, "output_tokens": 1}}
    return "".join(
        [
            sse("message_start", {"message": start}),
            sse("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            sse(
                "content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants "}}
            ),
            sse(
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": "the weather in Paris."}},
            ),
            sse("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "sig-ABC123"}}),
            sse("content_block_stop", {"index": 0}),
            sse("content_block_start", {"index": 1, "content_block": {**CALL, "input": {}}}),
            sse(
                "content_block_delta",
                {"index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
            ),
            sse("content_block_stop", {"index": 1}),
            sse("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}}),
            sse("message_stop", {}),
        ]
    )


def streamed_text(text: str) -> str:
    start = json.loads(message([], "end_turn")) | {"stop_reason": None}
    return "".join(
        [
            sse("message_start", {"message": start}),
            sse("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
            sse("content_block_stop", {"index": 0}),
            sse("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 8}}),
            sse("message_stop", {}),
        ]
    )


@pytest.fixture(scope="module")
def backend() -> Iterator[ProviderServer]:
    with running_server() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(backend: ProviderServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LiteLLM's proxy on 127.0.0.1, routing ``claude`` to the backend as an Anthropic model."""
    assert LITELLM.exists(), f"LiteLLM's proxy is not installed at {LITELLM}: run `make litellm`"
    where = tmp_path_factory.mktemp("litellm")
    config = where / "config.yaml"
    config.write_text(
        "model_list:\n  - model_name: claude\n    litellm_params:\n"
        f"      model: anthropic/claude-sonnet-4-5\n      api_base: {backend.url}\n      api_key: sk-ant-test\n",
        encoding="utf-8",
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")} | {
        "LITELLM_MASTER_KEY": MASTER_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "*",
    }
    log = (where / "litellm.log").open("w")
    process = subprocess.Popen(
        [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=where,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, where / "litellm.log")
        yield url + "/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"LiteLLM's proxy exited with {process.returncode}:\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health/liveliness", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"LiteLLM's proxy did not answer within {STARTUP_SECONDS:.0f} s:\n{log.read_text()[-2000:]}")


def weather(city: str) -> str:
    """The weather in a city."""
    return f"18C in {city}"


@pytest.mark.parametrize("stream", [False, True])
def test_a_claude_tool_loop_with_reasoning_through_litellm(backend: ProviderServer, proxy: str, stream: bool) -> None:
    backend.requests.clear()
    answer = "It is 18C in Paris."
    if stream:
        backend.push(
            Raw("text/event-stream", streamed_thinking_then_call()), Raw("text/event-stream", streamed_text(answer))
        )
    else:
        answered_text = message([{"type": "text", "text": answer}], "end_turn")
        backend.push(
            Raw("application/json", message([THINKING, CALL], "tool_use")), Raw("application/json", answered_text)
        )
    model = loom.OpenAIChat("claude", base_url=proxy, api_key=MASTER_KEY, reasoning_effort="low", stream=stream)
    agent = loom.Agent(model=model, tools=[loom.tool(weather)], name="litellm_reasoner")
    rt = loom.Runtime.open()
    run = agent.start("Weather in Paris?", runtime=rt)
    assert run.status == "completed", run
    assert run.result.output == answer
    asked, answered = (r.body for r in backend.requests)
    assert asked["thinking"]["type"] == "enabled"  # reasoning_effort became extended thinking
    (turn,) = [m for m in answered["messages"] if m["role"] == "assistant"]
    thinking = {k: v for k, v in turn["content"][0].items() if k != "index"}
    assert thinking == THINKING  # the signed block came back first, unchanged
    assert turn["content"][1]["type"] == "tool_use" and turn["content"][1]["id"] == "toolu_1"
    rt.close()
