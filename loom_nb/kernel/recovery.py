"""Recovery: drive on every execution a crash left ``running`` (``Engine.recover``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from loom_nb.errors import (
    EffectNotFoundError,
    FlowNotFoundError,
    JournalWriteError,
    LeaseLostError,
    NonDeterminismError,
)
from loom_nb.kernel.driver import Driver, DriverHost
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.results import ExecutionResult

log = logging.getLogger("loom_nb")


async def recover_executions(
    host: DriverHost, driver: Driver, execution_ids: Iterable[str] | None = None
) -> list[ExecutionResult]:
    """``Engine.recover``: drive on every execution a crash left ``running`` (or those of
    ``execution_ids``), one failing execution not stopping the others (see ``Engine.recover``)."""
    results: list[ExecutionResult] = []
    if execution_ids is None:
        results.extend(await driver.wake_settled_children())
        records = host.journal.list_executions("running")
    else:
        found = (host.journal.get_execution(eid) for eid in dict.fromkeys(execution_ids))
        records = [rec for rec in found if rec is not None and rec.status == "running"]
    for rec in records:
        if rec.execution_id in driver.active:
            continue
        async with driver.lock(rec.execution_id):
            if not host.leases.claim(rec.execution_id):
                continue  # another live process drives it
            try:
                history = host.history(rec.execution_id)  # read after the claim: what the last owner left
                if history.status != "running" or rec.execution_id in driver.active:
                    if rec.execution_id not in driver.active:
                        host.leases.let_go(rec.execution_id)  # another process finished or parked it meanwhile
                    continue  # another task drove it on while this one waited for its lock
                results.append(await driver.drive(history, recovering=True))
            except LeaseLostError as exc:
                log.warning("execution %s: %s", rec.execution_id, exc)
            except JournalWriteError:
                raise  # the journal is failing, not this execution: stop rather than fail them all
            except Exception as exc:
                # One execution that cannot go on must not stop the others: report it, leave it
                # running, and let the developer fix the cause and recover again.
                expected = isinstance(exc, (NonDeterminismError, EffectNotFoundError, FlowNotFoundError))
                log.log(
                    logging.WARNING if expected else logging.ERROR,
                    "execution %s not recovered (%s: %s); it stays running: fix the cause, then recover() again",
                    rec.execution_id,
                    type(exc).__name__,
                    exc,
                    exc_info=not expected,
                )
                results.append(
                    ExecutionResult(execution_id=rec.execution_id, status="running", error=error_to_data(exc))
                )
    return results
