"""Sessions: consecutive runs of an agent continue one conversation, each run its own execution, the
transcript carried by reference (never copied), compaction across runs, found again after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.carry import conversation, journal_carry
from loom_nb.agent.transcript import rebuild_requests
from loom_nb.errors import UsageError
from loom_nb.journal import DuckDBJournal, Event, InMemoryJournal
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.testing import JournalProxy
from tests.agent.support import calls, data_bytes, make_runtime, step_ids, tidy_tools


def respond(request: ModelRequest) -> ModelResponse:
    """Search when asked to (once per message), then answer naming every user message seen so far."""
    last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
    asked = request.messages[last_user].text
    if "find" in asked and not any(m.role == "tool" for m in request.messages[last_user:]):
        return calls(("search", {"query": asked.split()[-1]}), text="Searching.")
    users = [m.text for m in request.messages if m.role == "user"]
    return ModelResponse.text(f"Seen {len(users)} message(s); last: {asked}")


def make_agent(model: ScriptedModel | None = None, **options: Any) -> loom.Agent:
    search, delete_file = tidy_tools([])
    return loom.Agent(
        model=model or ScriptedModel(respond), tools=[search, delete_file], name="chat", system="Be brief.", **options
    )


async def test_each_run_continues_the_conversation_by_reference() -> None:
    rt = make_runtime()
    model = ScriptedModel(respond)
    agent = make_agent(model)
    session = agent.session("thread-1", runtime=rt)
    first = await session.run("find notes")
    second = await agent.start("and then?", runtime=rt, session="thread-1")
    third = await session.run("thanks")
    assert first.output == "Seen 1 message(s); last: find notes"
    assert second.output == "Seen 2 message(s); last: and then?"
    assert third.output == "Seen 3 message(s); last: thanks"
    ids = session.execution_ids()
    assert ids == ["session:chat:thread-1:0", "session:chat:thread-1:1", "session:chat:thread-1:2"]
    # The model saw the whole conversation: the second run's request holds the first run's tool call.
    roles = [m.role for m in model.history[2].messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    # The journal holds it by reference: the second run's first node adds the carry item, no copies.
    start = next(e for e in rt.journal.read(ids[1]) if e.step_id == "#turn:0" and e.kind == "step_started")
    assert start.data["input"]["add"] == [
        {"msg": {"role": "system", "text": "Be brief."}},
        {"carry": {"execution": ids[0], "node": "#turn:1"}},
        {"msg": {"role": "user", "text": "and then?"}},
    ]
    inputs = [rt.journal.read(eid)[0].data["input"] for eid in ids]
    assert [i["session"] for i in inputs] == [
        {"id": "thread-1", "previous": None, "index": 0},
        {"id": "thread-1", "previous": ids[0], "index": 1},
        {"id": "thread-1", "previous": ids[1], "index": 2},
    ]
    # Every request, rebuilt from the journal alone (carries resolved), is what the model received.
    sent = iter(model.history)
    for eid in ids:
        rebuilt = rebuild_requests(rt.journal.read(eid), carry=journal_carry(rt.journal))
        for sid in dict.fromkeys(s for s in step_ids(rt, eid) if s in rebuilt):
            assert rebuilt[sid].messages == next(sent).messages, (eid, sid)
    roles = ["user", "assistant", "tool", "assistant"] + ["user", "assistant"] * 2
    assert [m.role for m in session.transcript()] == roles
    with pytest.raises(UsageError, match="pass carry="):
        rebuild_requests(rt.journal.read(ids[1]))


async def test_the_log_stays_linear_across_runs() -> None:
    rt = make_runtime()
    session = make_agent().session("t", runtime=rt)
    for i in range(6):
        await session.run(f"message number {i}")
    sizes = [data_bytes(rt.journal.read(eid)) for eid in session.execution_ids()]
    # Run k journals its own message and answer plus one carry item: the same size whatever k is
    # (a copied transcript would grow every run).
    assert max(sizes[1:]) - min(sizes[1:]) < 16, sizes


async def test_a_session_waits_for_its_unfinished_run_and_skips_a_failed_one() -> None:
    rt = make_runtime()
    model = ScriptedModel(
        lambda r: (
            calls(("delete_file", {"path": "/tmp/x"}))
            if not any(m.role == "tool" for m in r.messages)
            else ModelResponse.text("deleted")
        )
    )
    session = make_agent(model).session("t", runtime=rt)
    run = session.start("delete it")
    await run.wait(until="paused")
    with pytest.raises(UsageError, match=r"session 't': run 'session:chat:t:0' is suspended"):
        session.start("next")
    run.gates[0].approve()
    await run
    failed = "session:chat:t:1"  # a failed run in between: not carried
    rt.journal.append(
        [
            Event(failed, 1, "execution_started", None, 1.0, {"flow": "agent:chat", "input": {}}),
            Event(failed, 2, "execution_failed", None, 2.0, {"error": {"type": "x", "message": ""}}),
        ]
    )
    third = session.start("again")
    await third
    assert rt.journal.read(third.id)[0].data["input"]["session"]["previous"] == "session:chat:t:0"
    with pytest.raises(UsageError, match="leave execution_id out"):
        make_agent(model).start("x", runtime=rt, session="t", execution_id="e")


async def test_compaction_folds_earlier_runs_messages() -> None:
    rt = make_runtime()
    summaries: list[ModelRequest] = []

    def summarize(request: ModelRequest) -> ModelResponse:
        summaries.append(request)
        return ModelResponse.text("they talked")

    compaction = loom.Compaction(effect_id="model.summarizer", after_messages=4, keep_recent=1)
    model = ScriptedModel(respond)
    agent = make_agent(model, compaction=compaction, summarizer=ScriptedModel(summarize))
    session = agent.session("t", runtime=rt)
    for text in ("one", "two", "three"):
        await session.run(text)
    assert summaries, "the third run's transcript (carried) passed after_messages"
    folded = [m.text for m in summaries[0].messages if m.role == "user"]
    assert "one" in folded  # a message of the first run, folded by a later run
    ids = session.execution_ids()
    compacted = [eid for eid in ids if any(e.step_id and e.step_id.endswith(":compact") for e in rt.journal.read(eid))]
    assert compacted
    sent = iter(model.history)
    for eid in ids:
        rebuilt = rebuild_requests(rt.journal.read(eid), carry=journal_carry(rt.journal))
        for sid in dict.fromkeys(s for s in step_ids(rt, eid) if s in rebuilt):
            assert rebuilt[sid].messages == next(sent).messages, (eid, sid)
    for eid in ids:
        assert (await rt.replay(eid)).reproduced, eid


@pytest.mark.parametrize("store", ["memory", "duckdb"])
async def test_a_session_survives_a_restart(store: str, tmp_path: Path) -> None:
    journal: JournalStore = InMemoryJournal() if store == "memory" else DuckDBJournal(tmp_path / "s.duckdb")
    rt = make_runtime(journal)
    await make_agent().session("t", runtime=rt).run("find notes")
    # A new process: a new agent object, a new runtime on the same journal.
    if store == "duckdb":
        rt.close()
        journal = DuckDBJournal(tmp_path / "s.duckdb")
    rt2 = make_runtime(journal)
    model = ScriptedModel(respond)
    session = make_agent(model).session("t", runtime=rt2)
    assert session.execution_ids() == ["session:chat:t:0"] and "1 run" in repr(session)
    assert (await session.run("more")).output == "Seen 2 message(s); last: more"
    assert [m.role for m in model.history[0].messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [r.status for r in session.runs()] == ["completed", "completed"]
    for eid in session.execution_ids():
        assert (await rt2.replay(eid)).reproduced
    rt2.close()


async def test_a_run_reads_only_the_previous_run_when_this_process_resolved_the_earlier_ones() -> None:
    journal = JournalProxy(InMemoryJournal())
    rt = make_runtime(journal)
    session = make_agent().session("t", runtime=rt)
    reads = []
    for i in range(6):
        before = journal.reads
        await session.run(f"message {i}")
        reads.append(journal.reads - before)
    assert reads[1:] == [reads[1]] * 5, reads  # constant per run, whatever its place in the session
    cold = JournalProxy(journal.inner)  # a new process: every earlier run is read once
    assert len(conversation(cold, "session:chat:t:4", "#turn:0")) == 10
    assert cold.reads == 5
