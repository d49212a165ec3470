"""A session runs one message at a time (``docs/design.md``, section 6.13): a second ``start`` while
its run has not finished (even before that run wrote anything) is a ``UsageError`` naming the session
and the run, never the first run handed back; a ``start`` from another thread is refused too."""

from __future__ import annotations

import asyncio

import pytest

import loom_nb as loom
from loom_nb.errors import UsageError
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime


def echo(request: ModelRequest) -> ModelResponse:
    users = [m.text for m in request.messages if m.role == "user"]
    return ModelResponse.text(" | ".join(users))


async def test_a_second_start_before_the_first_run_finished_is_refused_and_names_the_run() -> None:
    rt = make_runtime()
    chat = loom.Agent(model=ScriptedModel(echo), name="chat").session("t1", runtime=rt)
    first = chat.start("one", view=False)
    with pytest.raises(UsageError) as refused:
        chat.start("two", view=False)  # no await between: the first run has not written anything yet
    message = str(refused.value)
    assert "'t1'" in message and "session:chat:t1:0" in message
    assert "await" in message and "session.run(" in message
    assert (await first).output == "one"
    # Once it finished, the next message is the session's next run and continues the conversation.
    second = await chat.run("two")
    assert second.output == "one | two"
    assert chat.execution_ids() == ["session:chat:t1:0", "session:chat:t1:1"]


async def test_messages_sent_one_after_another_all_reach_the_session() -> None:
    rt = make_runtime()
    chat = loom.Agent(model=ScriptedModel(echo), name="chat").session("t2", runtime=rt)
    for q in ["a", "b", "c"]:
        await chat.run(q)
    assert [r.result.output for r in chat.runs()] == ["a", "a | b", "a | b | c"]


async def test_a_start_from_another_thread_is_a_usage_error_naming_the_loop() -> None:
    rt = make_runtime()
    chat = loom.Agent(model=ScriptedModel(echo), name="chat").session("t3", runtime=rt)
    first = chat.start("one", view=False)
    with pytest.raises(UsageError, match="thread") as refused:
        await asyncio.to_thread(chat.start, "two", view=False)
    assert "session 't3'" in str(refused.value)
    assert (await first).output == "one"
    assert len(chat) == 1
