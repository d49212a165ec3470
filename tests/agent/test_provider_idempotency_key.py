"""Every model call passes the step's idempotency key to the provider (no signature inspection)."""

from __future__ import annotations

from typing import Any

import loom_nb as loom
from loom_nb.journal import EventKind, InMemoryJournal
from loom_nb.providers.base import ModelProvider
from loom_nb.testing import FakeClock, SequentialIds


class KeyRecorder:
    """A provider that records the key of every call and answers with text."""

    name = "key-recorder"

    def __init__(self) -> None:
        self.keys: list[str | None] = []

    async def complete(
        self, request: loom.ModelRequest, *, on_delta: Any = None, idempotency_key: str | None = None
    ) -> loom.ModelResponse:
        self.keys.append(idempotency_key)
        return loom.ModelResponse.text("hi")


async def test_the_model_step_key_reaches_the_provider() -> None:
    model = KeyRecorder()
    assert isinstance(model, ModelProvider)
    rt = loom.Runtime(InMemoryJournal(), clock=FakeClock(), ids=SequentialIds())
    await loom.Agent(model=model, name="keyed").start("hello", runtime=rt, execution_id="k-1")
    started = [e for e in rt.journal.read("k-1") if e.kind == EventKind.STEP_STARTED]
    assert model.keys == ["k-1:#turn:0"]  # <execution_id>:<step_id>, derived (event format 2 journals no key)
    assert "idempotency_key" not in started[0].data


async def test_the_scripted_model_accepts_and_ignores_the_key() -> None:
    model = loom.ScriptedModel([loom.ModelResponse.text("same")])
    request = loom.ModelRequest(messages=(loom.Message.user("hi"),))
    response = await model.complete(request, idempotency_key="run-1:#turn:0")
    assert response.message.text == "same"
