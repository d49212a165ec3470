"""After a failed commit the ``Run`` handle says what the journal says (``docs/design.md``, section 7):
``running``, with the ``JournalWriteError`` at hand, and ``await run`` raises it; starting the same
work again while that run is ``running`` is a ``UsageError`` that says to ``recover()`` it, so
recovery charges once, never twice."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.errors import JournalWriteError, UsageError
from loom_nb.journal import InMemoryJournal
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.testing import FailingJournal
from tests.agent.support import calls, make_runtime, turn_of


def reply(request: ModelRequest) -> ModelResponse:
    if turn_of(request) == 0:
        return calls(("charge", {"account": "acme", "cents": 500}))
    return ModelResponse.text("done")


def billing(ledger: Path) -> loom.Agent:
    @loom.tool()
    def charge(account: str, cents: int) -> str:
        """Charge an account (not idempotent: each call is a real charge)."""
        with ledger.open("a") as f:
            f.write(f"{account} {cents}\n")
        return f"charged {account} {cents}"

    return loom.Agent(ScriptedModel(reply), tools=[charge], name="billing")


async def first_failure_after_the_charge(tmp_path: Path) -> int:
    """The append attempt that commits the charge's completion (the charge ran before it)."""
    ledger = tmp_path / "probe.txt"
    journal = FailingJournal(InMemoryJournal(), None)
    rt = make_runtime(journal)
    seen: list[int] = []
    rt.observe(lambda e: seen.append(journal.attempts) if e.kind == EventKind.STEP_COMPLETED else None)
    await billing(ledger).run("charge acme", runtime=rt)
    assert ledger.read_text() == "acme 500\n"
    return seen[1]  # #turn:0 completed, then the charge: that append


@pytest.mark.parametrize("explicit_id", [False, True], ids=["random-id", "given-id"])
async def test_a_failed_commit_leaves_the_handle_running_and_a_second_start_is_refused(
    tmp_path: Path, explicit_id: bool
) -> None:
    fail_at = await first_failure_after_the_charge(tmp_path)
    ledger = tmp_path / "charges.txt"
    journal = FailingJournal(InMemoryJournal(), fail_at, persistent=True)
    rt = make_runtime(journal)
    agent = billing(ledger)
    ids = {"execution_id": "bill-1"} if explicit_id else {}
    run = agent.start("charge acme", runtime=rt, view=False, **ids)
    with pytest.raises(JournalWriteError):
        await run
    assert ledger.read_text() == "acme 500\n"
    assert rt.result(run.id).status == "running"
    assert run.status == "running", "the handle must say what the journal says"
    assert isinstance(run.exception(), JournalWriteError)
    assert "JournalWriteError" in repr(run)
    journal.heal()
    with pytest.raises(UsageError, match=r"recover\(\)") as refused:
        agent.start("charge acme", runtime=rt, view=False, **ids)
    assert run.id in str(refused.value)
    # Other work is not refused.
    other = await agent.start("charge acme twice", runtime=rt, view=False)
    assert other.output == "done"
    assert ledger.read_text().splitlines() == ["acme 500", "acme 500"]
    await rt.recover()
    run.refresh()
    # The charge ran and its completion was not journaled: a person says it happened.
    assert run.status == "suspended" and run.exception() is None
    (gate,) = run.gates
    assert gate.kind == "InDoubt"
    await gate.happened("charged acme 500")
    assert (await run).output == "done"
    assert ledger.read_text().splitlines() == ["acme 500", "acme 500"], "recovery must not charge again"
    # Once the first run finished, the same work may start again.
    again = agent.start("charge acme", runtime=rt, view=False, **({"execution_id": "bill-2"} if explicit_id else {}))
    assert (await again).output == "done"
