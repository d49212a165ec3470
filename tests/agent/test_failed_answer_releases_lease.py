"""An answer whose commit fails gives back the lease it claimed (``docs/design.md``, section 7):
the gate is still open, so a colleague's answer from another process of the shared journal is taken
(never "answered there already") and runs the call once. Real PostgreSQL, the commit failed by the
store's own ``JournalWriteError`` (the ``FailingJournal`` error)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import loom_nb as loom
from loom_nb.errors import JournalWriteError
from loom_nb.journal import ContentBlob, Event
from loom_nb.journal.store import write_error
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from tests import stores
from tests.agent.support import calls, turn_of

ONE_STORE = True  # PostgreSQL only: leases belong to the shared journal


def reply(request: ModelRequest) -> ModelResponse:
    if turn_of(request) == 0:
        return calls(("charge", {"account": "acme", "cents": 500}))
    return ModelResponse.text("done")


@pytest.mark.usefixtures("_postgres_server")
async def test_a_failed_answer_releases_its_lease_and_a_colleague_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "charges.txt"

    @loom.tool(needs_approval=True)
    def charge(account: str, cents: int) -> str:
        """Charge an account."""
        with ledger.open("a") as f:
            f.write(f"{account} {cents}\n")
        return "charged"

    agent = loom.Agent(ScriptedModel(reply), tools=[charge], name="billing-lease")
    url = stores.new_schema("answer-lease")
    mine, colleague = Runtime.open(url), Runtime.open(url)
    try:
        run = agent.start("charge acme", runtime=mine, execution_id="bill-1", view=False)
        await run.wait(until="paused")
        (gate,) = run.gates
        journal = mine.journal
        real_append = journal.append

        def fail_once(events: Sequence[Event], contents: Sequence[ContentBlob] = ()) -> None:
            monkeypatch.setattr(journal, "append", real_append)
            cause = OSError(5, "Input/output error (injected)")
            raise write_error(journal.location, events, cause) from cause

        monkeypatch.setattr(journal, "append", fail_once)
        with pytest.raises(JournalWriteError):
            gate.approve()
        assert colleague.result("bill-1").status == "suspended", "nothing of the answer was committed"
        assert colleague.journal.lease_owner("bill-1") is None  # type: ignore[attr-defined]
        answer = colleague.answer("bill-1", gate.gate_id, {"approved": True})
        result = await colleague.proceed(answer)
        assert result.status == "completed"
        assert ledger.read_text() == "acme 500\n"
    finally:
        mine.close()
        colleague.close()
