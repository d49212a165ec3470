"""Child executions (``ctx.child``): the persisted outcome a parent's ``ChildExecution`` gate is
answered with, and which parents wait for which children."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from loom_nb.errors import ChildExecutionError
from loom_nb.journal import step_ids
from loom_nb.journal.events import TERMINAL_STATUSES, ExecutionRecord
from loom_nb.kernel.errors_codec import error_summary
from loom_nb.kernel.history import History

CHILD_GATE = step_ids.CHILD_GATE


def child_outcome_payload(status: str, output: Any, error: dict[str, Any] | None) -> dict[str, Any]:
    """What a ``ChildExecution`` gate is answered with when its child settles (a persisted shape)."""
    return {"status": status, "output": output, "error": error}


def child_outcome(child_id: str, outcome: Any) -> Any:
    """The output of the child ``child_id`` from its recorded ``outcome``.

    Raises:
        ChildExecutionError: the child failed or was cancelled (the message names it).
    """
    d = outcome if isinstance(outcome, dict) else {}
    status = d.get("status")
    if status == "completed":
        return d.get("output")
    err = d.get("error") or {}
    raise ChildExecutionError(
        f"child execution {child_id!r} {status} ({error_summary(err)}) (inspect it with runtime.result({child_id!r}))"
    )


def child_gates(history: History) -> list[tuple[str, str]]:
    """``(gate id, child execution id)`` of the parent's open ``ChildExecution`` gates."""
    return [
        (g.gate_id, step_ids.child_execution_id(history.execution_id, g.gate_id))
        for g in history.gates.values()
        if g.kind == CHILD_GATE and not g.resolved
    ]


def parents_of_settled(records: Iterable[ExecutionRecord]) -> set[str]:
    """The suspended executions among ``records`` that may wait for a settled child among them.

    A child's id is ``<parent>/<step>``: only a suspended execution that prefixes a settled one can
    be waiting for it (so only those histories need reading, not every suspended one)."""
    records = list(records)
    suspended = {r.execution_id for r in records if r.status == "suspended"}
    candidates: set[str] = set()
    for r in records:
        if r.status in TERMINAL_STATUSES and "/" in r.execution_id:
            parts = r.execution_id.split("/")
            candidates.update(p for k in range(1, len(parts)) if (p := "/".join(parts[:k])) in suspended)
    return candidates
