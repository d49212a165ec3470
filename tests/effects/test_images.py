"""Images from tools reach the model as image content (``effects/images.py``,
``providers/image_parts.py``): the journal holds a reference; the request each wire sends carries
the bytes, read from the content store when it is sent, as that API takes them. Against
``provider_server`` (a real HTTP server on 127.0.0.1) and, for MCP, the SDK server
``mcp_server.py`` over stdio."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.messages import ImageRef, Message
from loom_nb.providers.http import HTTPProvider
from tests.providers.provider_server import Call, ProviderServer, Reply, running_server

PNG = b"\x89PNG\r\n\x1a\nloom-test-image"  # what mcp_server.py's snapshot returns
B64 = base64.b64encode(PNG).decode()
WIRES = ["openai", "anthropic", "responses"]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with running_server() as s:
        yield s


def provider(wire: str, server: ProviderServer) -> HTTPProvider:
    if wire == "openai":
        return loom.OpenAIChat("gpt-test", base_url=server.url + "/v1", api_key="sk-test", stream=False)
    if wire == "responses":
        return loom.OpenAIResponses("gpt-test", base_url=server.url + "/v1", api_key="sk-test", stream=False)
    return loom.AnthropicMessages("claude-test", base_url=server.url, api_key="sk-test", stream=False)


def images_sent(wire: str, body: dict[str, Any]) -> list[str]:
    """The base64 of every image the request body carries, found where that wire puts it."""
    if wire == "openai":
        parts = [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]
        return [p["image_url"]["url"].split(",", 1)[1] for p in parts if p["type"] == "image_url"]
    if wire == "responses":
        outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
        parts = [p for o in outputs if isinstance(o, list) for p in o]
        return [p["image_url"].split(",", 1)[1] for p in parts if p["type"] == "input_image"]
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    results = [b for b in blocks if b["type"] == "tool_result" and isinstance(b["content"], list)]
    return [p["source"]["data"] for r in results for p in r["content"] if p["type"] == "image"]


def image_tool(ref: str, size: int) -> loom.Tool:
    @loom.tool(trusted=True)
    def snap() -> dict[str, Any]:
        """A picture of the screen."""
        return {
            "content": [
                {"type": "text", "text": "the screen:"},
                {"type": "image", "mime_type": "image/png", "ref": ref, "size": size},
            ]
        }

    return snap


def run_with_image(wire: str, server: ProviderServer, *, stored: bool) -> tuple[loom.Runtime, loom.Run]:
    rt = loom.Runtime.open()
    ref = rt.effects.content_store.put(PNG, media_type="image/png") if stored else "sha256:" + "0" * 64
    server.push(Reply(calls=[Call("call_1", "snap", ["{}"])]), Reply(text=["A PNG of the screen."]))
    agent = loom.Agent(model=provider(wire, server), tools=[image_tool(ref, len(PNG))], name=f"seer_{wire}")
    return rt, agent.start("What is on the screen?", runtime=rt)


@pytest.mark.parametrize("wire", WIRES)
def test_a_tools_image_reaches_the_model_as_image_content(server: ProviderServer, wire: str) -> None:
    rt, run = run_with_image(wire, server, stored=True)
    assert run.status == "completed" and run.result.output == "A PNG of the screen."
    first, second = (r.body for r in server.requests)
    assert images_sent(wire, first) == []
    assert images_sent(wire, second) == [B64]
    journaled = json.dumps([e.data for e in rt.journal.read(run.id)])
    assert B64 not in journaled and "sha256:" in journaled  # the journal holds the reference only
    rt.close()


@pytest.mark.parametrize("wire", WIRES)
def test_an_image_the_store_lost_goes_as_a_note(server: ProviderServer, wire: str) -> None:
    rt, run = run_with_image(wire, server, stored=False)
    assert run.status == "completed"
    second = server.requests[1].body
    assert images_sent(wire, second) == []
    assert "is not in the content store" in json.dumps(second)
    rt.close()


def test_chat_wire_puts_the_images_after_the_run_of_tool_results(server: ProviderServer) -> None:
    """A tool message's content is text only on the chat wire, and tool messages must follow their
    call: the images go in one user message after the last result of the turn."""
    server.push(Reply(text=["ok"]))
    png = ImageRef(ref="sha256:x", mime_type="image/png", size=3, data=b"abc")
    calls = (loom.ToolCall(id="a", name="one"), loom.ToolCall(id="b", name="two"))
    messages = (
        Message.user("hi"),
        Message.assistant(tool_calls=calls),
        Message.tool(calls[0], "first").model_copy(update={"images": (png,)}),
        Message.tool(calls[1], "second"),
    )
    import asyncio

    asyncio.run(provider("openai", server).complete(loom.ModelRequest(messages=messages)))
    sent = server.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[4]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,YWJj"}}
    assert "data" not in Message.tool(calls[0], "x").model_copy(update={"images": (png,)}).model_dump_json()


@pytest.mark.slow
def test_an_mcp_servers_image_reaches_the_model(server: ProviderServer, tmp_path: Path) -> None:
    script = Path(__file__).with_name("mcp_server.py")
    tools = loom.mcp_tools(StdioServerParameters(command=sys.executable, args=[str(script), str(tmp_path)]))
    snapshot = [t for t in tools if t.name == "snapshot"]
    server.push(Reply(calls=[Call("call_1", "snapshot", ["{}"])]), Reply(text=["A test image."]))
    rt = loom.Runtime.open()
    agent = loom.Agent(model=provider("anthropic", server), tools=snapshot, name="mcp_seer")
    run = agent.start("Take a snapshot.", runtime=rt)
    assert run.status == "completed", run
    assert images_sent("anthropic", server.requests[1].body) == [B64]
    assert B64 not in json.dumps([e.data for e in rt.journal.read(run.id)])
    rt.close()
