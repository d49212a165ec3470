"""Typed output over each wire, against the local wire-format server: OpenAI chat and Responses ask
natively (``response_format`` / ``text.format``, strict) and read the answer from the text; Anthropic
answers through the ``final_result`` tool. A first answer that fails validation is sent back and the
second one is taken."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

import loom_nb as loom
from loom_nb.agent.output import FINAL_RESULT_TOOL, OutputSpec
from loom_nb.testing import FakeClock, SequentialIds
from tests.providers.provider_server import Call, ProviderServer, Reply

KEY = "sk-test-typed-0123456789"


class Forecast(BaseModel):
    """A forecast."""

    city: str
    celsius: int


def provider(wire: str, url: str) -> loom.ModelProvider:
    if wire == "openai":
        return loom.OpenAIChat("gpt-test", base_url=url + "/v1", api_key=KEY)
    if wire == "responses":
        return loom.OpenAIResponses("gpt-test", base_url=url + "/v1", api_key=KEY)
    return loom.AnthropicMessages("claude-test", base_url=url, api_key=KEY)


def reply(wire: str, answer: str) -> Reply:
    if wire == "anthropic":
        return Reply(calls=[Call("toolu_1", FINAL_RESULT_TOOL, [answer[:5], answer[5:]])])
    return Reply(text=[answer[:5], answer[5:]])


@pytest.mark.parametrize("wire", ["openai", "responses", "anthropic"])
async def test_a_typed_answer_over_the_wire_with_one_retry(wire: str, server: ProviderServer) -> None:
    server.push(reply(wire, '{"city": "Oslo", "celsius": "cold"}'), reply(wire, '{"city": "Oslo", "celsius": 4}'))
    rt = loom.Runtime.open(":memory:", clock=FakeClock(tick=0.01), ids=SequentialIds())
    agent = loom.Agent(provider(wire, server.url), output_type=Forecast, name=f"typed-{wire}")
    result = await agent.run("Forecast for Oslo?", runtime=rt)
    assert result.output == Forecast(city="Oslo", celsius=4)
    assert result.turns == 2

    first, second = (r.body for r in server.requests)
    schema = OutputSpec(Forecast).wire_schema
    if wire == "openai":
        assert first["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Forecast", "schema": schema, "strict": True},
        }
        assert "tools" not in first
        assert second["messages"][-1]["role"] == "user"
        assert "celsius: Input should be a valid integer" in second["messages"][-1]["content"]
    elif wire == "responses":
        assert first["text"] == {
            "format": {"type": "json_schema", "name": "Forecast", "schema": schema, "strict": True}
        }
        assert "tools" not in first
        assert "celsius: Input should be a valid integer" in second["input"][-1]["content"]
    else:
        assert "response_format" not in first and "text" not in first
        assert [t["name"] for t in first["tools"]] == [FINAL_RESULT_TOOL]
        assert first["tools"][0]["input_schema"] == schema
        result_block = second["messages"][-1]["content"][0]
        assert result_block["type"] == "tool_result" and result_block["is_error"] is True
        assert result_block["tool_use_id"] == "toolu_1"
    rt.close()


async def test_native_output_forced_on_anthropic_is_a_usage_error(server: ProviderServer) -> None:
    rt = loom.Runtime.open(":memory:", clock=FakeClock(), ids=SequentialIds())
    agent = loom.Agent(provider("anthropic", server.url), output_type=Forecast, output_mode="native", name="forced")
    with pytest.raises(loom.UsageError, match="AnthropicMessages sends no native structured output"):
        await agent.run("Forecast?", runtime=rt)
    assert server.requests == []
    rt.close()
