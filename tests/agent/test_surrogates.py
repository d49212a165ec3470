"""Text that is not valid Unicode (a lone UTF-16 surrogate) is journaled, not refused
(``docs/design.md``, section 3, "Storable text"): in the model's text, a streamed delta, a tool's
arguments and a tool's result, on both stores (an id, a key, holding one is refused instead).
Each run parks at an approval gate after the surrogate is journaled, so resuming re-runs the body
from the journal (the recovery path: digests of the live and the read-back text must match),
completes, and replays."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig
from loom_nb.errors import UsageError
from loom_nb.journal import DuckDBJournal, EventKind, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.base import DeltaSink
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests.agent.support import MODEL, calls, install, make_runtime, register_model, turn_of

LONE = "\ud83d"  # the first half of a surrogate pair, alone
ENTRY_POINTS = ["model-text", "stream-delta", "tool-arguments", "tool-result"]


class DeltaModel(ScriptedModel):
    """A scripted model whose first answer streams ``deltas`` (joined, they are its text)."""

    def __init__(self, respond: Any, deltas: list[str]) -> None:
        super().__init__(respond)
        self.deltas = deltas

    async def complete(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None, idempotency_key: str | None = None
    ) -> ModelResponse:
        """Answer from the script; the first turn streams ``deltas`` instead of words."""
        response = await super().complete(request, idempotency_key=idempotency_key)
        if on_delta is not None and turn_of(request) == 0:
            for delta in self.deltas:
                on_delta(delta)
        return response


def scenario(entry: str, seen: list[str]) -> tuple[ScriptedModel, list[loom.Tool]]:
    text = {"model-text": f"Looking {LONE} up.", "stream-delta": f"Half a pair: {LONE}. Then more."}.get(entry, "")
    query = f"acme {LONE}" if entry == "tool-arguments" else "acme"

    def reply(request: ModelRequest) -> ModelResponse:
        turn = turn_of(request)
        if turn == 0:
            return calls(("lookup", {"query": query}), text=text)
        if turn == 1:
            return calls(("charge", {"cents": 5}))
        return ModelResponse.text("done")

    @loom.tool
    def lookup(query: str) -> str:
        """Look something up."""
        seen.append(query)
        return f"found {LONE}" if entry == "tool-result" else "found"

    @loom.tool(needs_approval=True)
    def charge(cents: int) -> str:
        """Charge."""
        return f"charged {cents}"

    deltas = [f"Half a pair: {LONE}", ". Then more."] if entry == "stream-delta" else [text]
    return DeltaModel(reply, deltas), [lookup, charge]


@pytest.fixture(params=["memory", "duckdb-file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[JournalStore]:
    journal: JournalStore = InMemoryJournal() if request.param == "memory" else DuckDBJournal(tmp_path / "j.duckdb")
    yield journal
    journal.close()


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.slow
async def test_a_lone_surrogate_is_journaled_and_the_run_resumes_completes_and_replays(
    store: JournalStore, entry: str
) -> None:
    seen: list[str] = []
    model, tools = scenario(entry, seen)
    rt: Runtime = make_runtime(store)
    if entry == "stream-delta":
        rt.event_format = 1  # format 2 journals no chunk of a completed model step (its output holds the text)
    register_model(rt, model)
    install(rt, AgentConfig(model=MODEL, tools=tools, chunk_min_chars=1))
    eid = "run-1"

    first = await rt.start("agent", "go", execution_id=eid)
    assert first.status == "suspended", first
    (gate,) = first.gates
    done = await rt.resume(eid, gate.gate_id, {"approved": True})  # re-runs the body from the journal

    assert done.status == "completed", done
    assert done.output["output"] == "done"
    assert len(seen) == 1  # the tool ran once: resuming served its recorded result
    assert await rt.recover() == []
    assert (await rt.replay(eid)).reproduced
    texts = [e.data for e in rt.journal.read(eid) if e.kind == EventKind.STEP_COMPLETED]
    assert "\ufffd" in repr(texts) or entry == "stream-delta"
    if entry == "stream-delta":
        chunks = "".join(e.data["text"] for e in rt.journal.read(eid) if e.kind == EventKind.STREAM_CHUNK)
        assert chunks == "Half a pair: \ufffd. Then more."


async def test_an_id_with_a_lone_surrogate_is_refused_as_a_key(store: JournalStore) -> None:
    """Ids are keys: ``run \ud83d`` and ``run \udc00`` would both be stored as ``run \ufffd`` and
    name one execution (two sessions would share one conversation), so both are refused."""
    seen: list[str] = []
    model, tools = scenario("model-text", seen)
    rt: Runtime = make_runtime(store)
    register_model(rt, model)
    install(rt, AgentConfig(model=MODEL, tools=tools))
    for eid in (f"run {LONE}", "run \udc00"):
        with pytest.raises(UsageError, match="lone surrogate"):
            await rt.start("agent", "go", execution_id=eid)
    agent = loom.Agent(name="surrogate-sessions", model=model, tools=tools)
    for session_id in (f"ana {LONE}", "ana \udc00"):
        with pytest.raises(UsageError, match=r"session id .*lone surrogate"):
            agent.session(session_id, runtime=rt)
    assert rt.journal.list_executions() == [] and seen == []
