"""A failed journal commit stops the run (``docs/design.md``, section 7, "A commit fails"): the
journal's Nth append fails, for every N of an agent run with two tools (one non-idempotent,
counting its side effects in a file), an approval gate and a decision each turn. The caller gets
``JournalWriteError``; once the fault clears, ``recover()`` (and answering the gates) completes the
run with no seq gap, no step completed twice, each side effect once, and a replay that reproduces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig, Skill
from loom_nb.errors import JournalWriteError
from loom_nb.journal import DuckDBJournal, InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.journal.step_ids import IN_DOUBT_GATE
from loom_nb.journal.store import JournalStore
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from loom_nb.testing import FailingJournal, JournalProxy
from tests.agent.support import MODEL, calls, install, make_runtime, register_model, turn_of
from tests.journal.support import fill, full_tmpfs

EID = "run-1"
SKILLS = [Skill(name="careful", instructions="Check twice."), Skill(name="quick", instructions="Be brief.")]


def reply(request: ModelRequest) -> ModelResponse:
    turn = turn_of(request)
    if turn == 0:
        return calls(("lookup", {"account": "acme"}))
    if turn == 1:
        return calls(("charge", {"account": "acme", "cents": 500}))
    return ModelResponse.text("done")


def runtime(journal: JournalStore, ledger: Path) -> Runtime:
    @loom.tool(idempotent=True)
    def lookup(account: str) -> str:
        """Look an account up."""
        return f"{account}: active"

    @loom.tool(needs_approval=True)
    def charge(account: str, cents: int) -> str:
        """Charge an account (not idempotent: each call is a real charge)."""
        with ledger.open("a") as f:
            f.write(f"{account} {cents}\n")
        return f"charged {account} {cents}"

    rt = make_runtime(journal)
    config = AgentConfig(model=MODEL, tools=[lookup, charge], skills=SKILLS, skill_selector=lambda names: names[0])
    register_model(rt, ScriptedModel(reply))
    install(rt, config)
    return rt


async def drive(rt: Runtime, heal: Callable[[], None] = lambda: None) -> int:
    """Run the flow to the end, answering every gate; ``heal()`` clears the fault after each write
    failure. Returns how many times the caller got ``JournalWriteError``."""
    raised = 0
    for _ in range(40):
        try:
            record = rt.journal.get_execution(EID)
            if record is None:
                await rt.start("agent", "charge acme", execution_id=EID)
            elif record.status == "running":
                await rt.recover()
            elif record.status == "suspended":
                gate = rt.open_gates(EID)[0]
                if gate.kind == IN_DOUBT_GATE:  # the charge ran; its completion was not journaled
                    await rt.resume(EID, gate.gate_id, {"action": "happened", "output": "charged acme 500"})
                else:
                    await rt.resume(EID, gate.gate_id, {"approved": True})
            else:
                return raised
        except JournalWriteError as exc:
            raised += 1
            assert exc.execution_id == EID
            assert "runtime.recover()" in str(exc)
            assert exc.__cause__ is not None
            heal()
    raise AssertionError("the run did not finish")


def appends_of_a_clean_run(tmp_path: Path) -> int:
    import asyncio

    proxy = JournalProxy(InMemoryJournal())
    asyncio.run(drive(runtime(proxy, tmp_path / "clean.txt")))
    return proxy.appends


APPENDS = 7  # checked against a clean run by test_the_matrix_covers_every_append


def test_the_matrix_covers_every_append(tmp_path: Path) -> None:
    assert appends_of_a_clean_run(tmp_path) == APPENDS


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "until-healed"])
@pytest.mark.parametrize("fail_at", range(1, APPENDS + 1))
async def test_a_failed_append_stops_the_run_and_recovery_completes_it(
    tmp_path: Path, fail_at: int, persistent: bool
) -> None:
    ledger = tmp_path / "charges.txt"
    journal = FailingJournal(InMemoryJournal(), fail_at, persistent=persistent)
    rt = runtime(journal, ledger)

    raised = await drive(rt, journal.heal)

    assert raised == 1, "the failed commit must reach the caller as JournalWriteError, once"
    await assert_completed_once(rt, ledger)


async def assert_completed_once(rt: Runtime, ledger: Path) -> None:
    evs = rt.journal.read(EID)
    assert [e.seq for e in evs] == list(range(1, len(evs) + 1)), "a seq gap"
    completed = [e.step_id for e in evs if e.kind == EventKind.STEP_COMPLETED]
    assert len(completed) == len(set(completed)), "a step completed twice"
    assert not [e for e in evs if e.kind == EventKind.STEP_FAILED], "a journal error became a step failure"
    assert ledger.read_text().splitlines() == ["acme 500"], "the charge must run exactly once"
    result = rt.result(EID)
    assert result.status == "completed"
    assert result.output["output"] == "done"
    assert (await rt.replay(EID)).reproduced


async def test_a_full_disk_stops_the_run_and_recovery_completes_it_once_space_is_freed(tmp_path: Path) -> None:
    """A real full disk: a 2 MiB tmpfs, filled up after the journal is created (needs root)."""
    with full_tmpfs(tmp_path / "disk") as disk:
        journal = DuckDBJournal(disk / "journal.duckdb")
        ledger = tmp_path / "charges.txt"
        rt = runtime(journal, ledger)
        filler = fill(disk)
        with pytest.raises(JournalWriteError) as info:
            await rt.start("agent", "charge acme", execution_id=EID)
        cause = str(info.value.__cause__)
        assert "No space left on device" in cause and "rollback" not in cause.lower()
        assert str(disk / "journal.duckdb") in str(info.value)
        assert journal.get_execution(EID).status == "running"  # type: ignore[union-attr]

        filler.unlink()
        assert await drive(rt) == 0
        await assert_completed_once(rt, ledger)
        rt.close()


def chatty(journal: JournalStore) -> Runtime:
    """An agent whose one answer streams 150 sentences, yielding to the event loop between deltas as a
    real provider does: the context commits stream chunks mid-step (every 64 staged events), inside
    the model's effect."""
    rt = make_runtime(journal)
    text = " ".join(f"Sentence {i}." for i in range(150))
    register_model(rt, ScriptedModel(lambda request: ModelResponse.text(text), delta_delay=1e-6))
    install(rt, AgentConfig(model=MODEL, chunk_min_chars=1))
    return rt


def chatty_appends() -> int:
    import asyncio

    proxy = JournalProxy(InMemoryJournal())
    asyncio.run(drive(chatty(proxy)))
    return proxy.appends


CHATTY_APPENDS = 4  # checked by test_the_streaming_matrix_covers_every_append


def test_the_streaming_matrix_covers_every_append() -> None:
    assert chatty_appends() == CHATTY_APPENDS


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "until-healed"])
@pytest.mark.parametrize("fail_at", range(1, CHATTY_APPENDS + 1))
async def test_a_failed_stream_commit_inside_the_model_step_stops_the_run(fail_at: int, persistent: bool) -> None:
    journal = FailingJournal(InMemoryJournal(), fail_at, persistent=persistent)
    rt = chatty(journal)

    assert await drive(rt, journal.heal) == 1
    evs = rt.journal.read(EID)
    assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
    assert not [e for e in evs if e.kind == EventKind.STEP_FAILED]
    assert rt.result(EID).status == "completed"
    assert (await rt.replay(EID)).reproduced
