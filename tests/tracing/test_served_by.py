"""A model span names the provider's model and server, as the GenAI semantic conventions ask
(``tracing/served_by.py``): a run through ``OpenAIChat`` against a local OpenAI-shaped server is
``chat gpt-4o-mini`` with ``gen_ai.request.model``, ``gen_ai.response.model`` (the server's own
word, journaled with the step), ``gen_ai.provider.name``, ``server.address`` and ``server.port``
(the conventions package's own constants), exported live and afterwards; a runtime that has no
such agent registered still names the effect, as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT

import loom_nb as loom
from loom_nb.tracing.served_by import ServedBy, served_by
from tests.providers.provider_server import ProviderServer, Reply, running_server
from tests.tracing.support import Recorder


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with running_server() as s:
        yield s


def chat_spans(recorder: Recorder) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) | {"name": s.name} for s in recorder.spans() if s.name.startswith("chat ")]


def test_a_model_span_names_the_providers_model_and_server(server: ProviderServer, recorder: Recorder) -> None:
    server.push(Reply(text=["Hello ", "there."]))
    port = int(server.url.rsplit(":", 1)[1])
    provider = loom.OpenAIChat("gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")
    agent = loom.Agent(model=provider, name="greeter")
    rt = loom.Runtime.open()
    loom.tracing.export(rt, recorder.provider)
    run = agent.start("Say hello", runtime=rt)
    assert run.status == "completed"
    (live,) = chat_spans(recorder)
    assert live["name"] == "chat gpt-4o-mini"
    assert {k: live[k] for k in (gen_ai.GEN_AI_REQUEST_MODEL, gen_ai.GEN_AI_PROVIDER_NAME)} == {
        gen_ai.GEN_AI_REQUEST_MODEL: "gpt-4o-mini",
        gen_ai.GEN_AI_PROVIDER_NAME: gen_ai.GenAiProviderNameValues.OPENAI.value,
    }
    assert (live[SERVER_ADDRESS], live[SERVER_PORT]) == ("127.0.0.1", port)
    assert live[gen_ai.GEN_AI_RESPONSE_MODEL] == "m-2026-01-01"  # the model the server says answered
    recorder.clear()
    loom.tracing.export_execution(run.id, rt, recorder.provider)  # afterwards, from the journal
    assert chat_spans(recorder) == [live]
    rt.close()


def test_without_the_agent_registered_the_span_names_the_effect(recorder: Recorder) -> None:
    agent = loom.Agent(model=loom.ScriptedModel([loom.ModelResponse.text("Hi.")]), name="plain")
    rt = loom.Runtime.open()
    run = agent.start("Hi", runtime=rt)
    rt.agents.clear()  # as in a process where the agent's cell has not run
    loom.tracing.export_execution(run.id, rt, recorder.provider)
    (span,) = chat_spans(recorder)
    assert span["name"] == "chat model.plain" and gen_ai.GEN_AI_PROVIDER_NAME not in span
    rt.close()


def test_what_serves_each_provider() -> None:
    assert served_by(loom.AnthropicMessages("claude-x", api_key="k")) == ServedBy(
        "claude-x", "anthropic", "api.anthropic.com", 443
    )
    assert served_by(loom.ScriptedModel([])) is None
