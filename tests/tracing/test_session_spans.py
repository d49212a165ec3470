"""A session run's execution span names its conversation (``gen_ai.conversation.id``), its index and
the run it continues, live and when exported from the journal afterwards."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime
from tests.tracing.support import Recorder


async def test_session_runs_carry_the_conversation_id() -> None:
    rt = make_runtime()
    recorder = Recorder()
    export = loom.tracing.export(rt, recorder.provider)

    def respond(request: ModelRequest) -> ModelResponse:
        return ModelResponse.text("ok")

    agent = loom.Agent(model=ScriptedModel(respond), name="chat")
    session = agent.session("thread-9", runtime=rt)
    await session.run("one")
    await session.run("two")
    await agent.run("outside", runtime=rt, execution_id="alone")
    export.stop()
    roots = {s.attributes["loom.execution_id"]: dict(s.attributes or {}) for s in recorder.spans() if s.parent is None}
    first, second = roots["session:chat:thread-9:0"], roots["session:chat:thread-9:1"]
    assert first["gen_ai.conversation.id"] == "thread-9" and first["loom.session.index"] == 0
    assert "loom.session.previous" not in first
    assert second["loom.session.index"] == 1 and second["loom.session.previous"] == "session:chat:thread-9:0"
    assert "gen_ai.conversation.id" not in roots["alone"]
    recorder.clear()
    loom.tracing.export_execution("session:chat:thread-9:1", rt, recorder.provider)
    (again,) = [s for s in recorder.spans() if s.parent is None]
    assert dict(again.attributes or {}) == second
    recorder.shutdown()
