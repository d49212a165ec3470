"""Runs started together read their projection rows with one query (``Engine._lookup`` over a
``BatchedLookup`` store), and each still gets what a start of its own would: a new execution, the
result of an existing one (idempotent start), or the error for an id that runs another flow."""

from __future__ import annotations

import asyncio
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.journal import DuckDBJournal
from loom_nb.journal.store import BatchedLookup
from loom_nb.kernel import ExecutionContext
from tests import stores
from tests.kernel.support import make_runtime


async def test_runs_started_together_read_their_rows_in_one_query() -> None:
    # The kernel suites' default store is in memory (rows in a dict, nothing to batch): DuckDB here.
    journal = stores.default_journal() if stores.current == "postgres" else DuckDBJournal(":memory:")
    assert isinstance(journal, BatchedLookup)
    rt = make_runtime(journal)
    asked: list[list[str]] = []
    inner = journal.get_executions

    def counted(ids: Any) -> Any:
        asked.append(list(ids))
        return inner(ids)

    journal.get_executions = counted  # type: ignore[method-assign]

    async def echo(ctx: ExecutionContext, inp: Any) -> Any:
        return inp

    async def other(ctx: ExecutionContext, inp: Any) -> Any:
        return None

    rt.flows.register(echo, "echo")
    rt.flows.register(other, "other")
    await rt.start("echo", "first", execution_id="done-before")
    await rt.start("other", None, execution_id="another-flow")
    asked.clear()

    outcomes = await asyncio.gather(
        *(rt.start("echo", i, execution_id=f"new-{i}") for i in range(8)),
        rt.start("echo", "again", execution_id="done-before"),
        rt.start("echo", None, execution_id="another-flow"),
        return_exceptions=True,
    )
    assert len(asked) == 1 and sorted(asked[0]) == sorted(
        [f"new-{i}" for i in range(8)] + ["done-before", "another-flow"]
    )
    assert [o.output for o in outcomes[:8]] == list(range(8))  # type: ignore[union-attr]
    assert outcomes[8].status == "completed" and outcomes[8].output == "first"  # type: ignore[union-attr]
    assert isinstance(outcomes[9], UsageError) and "another-flow" in str(outcomes[9])
    rt.close()
