"""An agent over a real HTTP provider (the local wire-format server): it streams, calls a tool,
retries a 429 through the ring, completes with usage recorded, and never journals the API key."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.journal import EventKind
from loom_nb.testing import FakeClock, SequentialIds
from tests.providers.provider_server import Call, Fail, ProviderServer, Reply

KEY = "sk-test-SECRET-4f1c9e2a7b"


def provider(wire: str, url: str) -> loom.ModelProvider:
    if wire == "openai":
        return loom.OpenAIChat("gpt-test", base_url=url + "/v1", api_key=KEY)
    return loom.AnthropicMessages("claude-test", base_url=url, api_key=KEY)


@loom.tool(idempotent=True)
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"{city}: 12C, light rain"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_agent_streams_calls_a_tool_and_records_usage(wire: str, server: ProviderServer, tmp_path: Path) -> None:
    server.push(
        Fail(429, "slow down", headers={"retry-after": "0"}),
        Reply(text=["Let me ", "check."], calls=[Call("call_1", "weather", ['{"ci', 'ty": "Oslo"}'])], usage=(30, 9)),
        Reply(text=["It is ", "12C and ", "raining in Oslo."], usage=(55, 11)),
    )
    path = tmp_path / "journal.duckdb"
    rt = loom.Runtime.open(path, clock=FakeClock(tick=0.01), ids=SequentialIds())
    deltas: list[str] = []
    rt.observe(on_delta=lambda _eid, _sid, text: deltas.append(text))
    agent = loom.Agent(model=provider(wire, server.url), tools=[weather], system="Be brief.", name=f"http-{wire}")
    run = agent.start("Weather in Oslo?", runtime=rt)
    result = await run
    assert result.output == "It is 12C and raining in Oslo."
    assert result.usage.input_tokens == 85 and result.usage.output_tokens == 20
    assert "".join(deltas) == "Let me check.It is 12C and raining in Oslo."

    events = rt.journal.read(run.id)
    failed = [e for e in events if e.kind == EventKind.STEP_FAILED]
    assert len(failed) == 1 and failed[0].data["will_retry"] is True  # the 429, retried by the ring
    assert failed[0].data["error"]["attrs"]["status_code"] == 429
    tool_done = [e for e in events if e.kind == EventKind.STEP_COMPLETED and e.step_id == "#turn:0:tool:0"]
    assert tool_done[0].data["output"] == "Oslo: 12C, light rain"
    usage = rt.usage(run.id)
    assert (usage.input_tokens, usage.output_tokens) == (85, 20)
    # the idempotency key travels as a header, the same for the retried attempt
    headers = [{k.lower(): v for k, v in r.headers.items()} for r in server.requests]
    assert headers[0]["idempotency-key"] == headers[1]["idempotency-key"] == f"{run.id}:#turn:0"
    assert all(KEY in h.get("authorization", "") + h.get("x-api-key", "") for h in headers)
    rt.close()

    wal = Path(f"{path}.wal")
    stored = path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"light rain" in stored  # the check below looks at the bytes that hold the run
    assert KEY.encode() not in stored, "the API key reached the journal file"


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_a_non_retryable_error_fails_the_run_without_the_key(wire: str, server: ProviderServer) -> None:
    server.push(Fail(401, "invalid api key"))
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    agent = loom.Agent(model=provider(wire, server.url), name=f"bad-{wire}")
    run = agent.start("hi", runtime=rt)
    with pytest.raises(loom.ProviderHTTPError) as info:
        await run
    assert info.value.status_code == 401
    assert "invalid api key" in str(info.value)
    assert KEY not in str(info.value) and KEY not in repr(rt.journal.read(run.id))
    assert run.status == "failed"
    assert len(server.requests) == 1  # 401 is not retried
