"""``recover()`` isolates a poisoned execution: it is reported (status ``running`` with the error,
and a log line) and skipped, and the executions listed after it still recover; a failing journal
(``JournalWriteError``) stops recovery instead."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from loom_nb.errors import JournalCorruptError, JournalWriteError
from loom_nb.journal import InMemoryJournal
from loom_nb.journal.events import Event, EventKind
from loom_nb.kernel import Engine, ExecutionContext
from tests.kernel.support import make_runtime

STARTED = {"principal": {"name": "anonymous", "scopes": []}}


class BadRowJournal(InMemoryJournal):
    """Reading one execution raises ``JournalCorruptError`` (a row that cannot be decoded)."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    def read(self, execution_id: str) -> list[Event]:
        """The events, or the corruption error for the bad execution."""
        if execution_id == self.bad:
            raise JournalCorruptError(f"row 2 of execution {execution_id!r} cannot be decoded")
        return super().read(execution_id)


def _started(journal: InMemoryJournal, *eids: str) -> None:
    for eid in eids:
        journal.append(
            [Event(eid, 1, EventKind.EXECUTION_STARTED, None, 1.0, {**STARTED, "flow": "echo", "input": eid})]
        )


def _runtime(journal: InMemoryJournal) -> Engine:
    rt = make_runtime(journal)

    async def echo(ctx: ExecutionContext, value: Any) -> Any:
        return await ctx.execute("x", value, step_id="only")

    rt.flows.register(echo, "echo")
    rt.effects.register("x", lambda v: v, idempotent=True)
    return rt


async def test_an_unreadable_execution_is_reported_and_the_later_ones_recover(caplog: pytest.LogCaptureFixture) -> None:
    journal = BadRowJournal("a")
    _started(journal, "a", "b", "c")
    with caplog.at_level(logging.ERROR, logger="loom_nb"):
        results = {r.execution_id: r for r in await _runtime(journal).recover()}
    assert (results["b"].status, results["b"].output) == ("completed", "b")
    assert (results["c"].status, results["c"].output) == ("completed", "c")
    assert results["a"].status == "running"
    assert results["a"].error is not None and results["a"].error["type"] == "loom_nb.errors:JournalCorruptError"
    assert any("execution a not recovered" in r.getMessage() for r in caplog.records)


async def test_a_bad_row_that_breaks_the_fold_is_reported_and_the_later_ones_recover() -> None:
    journal = InMemoryJournal()
    _started(journal, "a", "b")
    bad = {"effect": "x", "input": "a", "digest": "d", "attempt": "not a number"}
    journal.append([Event("a", 2, EventKind.STEP_STARTED, "only", 2.0, bad)])
    results = {r.execution_id: r for r in await _runtime(journal).recover()}
    assert (results["b"].status, results["b"].output) == ("completed", "b")
    assert results["a"].status == "running" and results["a"].error is not None
    assert results["a"].error["type"] == "builtins:ValueError"
    assert journal.get_execution("a").status == "running"  # type: ignore[union-attr]


class FailingAppends(InMemoryJournal):
    """Every append fails once ``failing`` is set (a full disk)."""

    failing = False

    def append(self, events: Any, blobs: Any = ()) -> None:
        """Append, or raise ``JournalWriteError`` while failing."""
        if self.failing:
            raise JournalWriteError("disk full")
        super().append(events, blobs)


async def test_a_failing_journal_stops_recovery_instead_of_failing_every_execution() -> None:
    journal = FailingAppends()
    _started(journal, "a", "b")
    journal.failing = True
    with pytest.raises(JournalWriteError):
        await _runtime(journal).recover()
    assert [journal.get_execution(e).status for e in "ab"] == ["running", "running"]  # type: ignore[union-attr]
