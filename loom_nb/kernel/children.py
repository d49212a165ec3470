"""Child executions (``ctx.child``): the persisted outcome a parent's ``ChildExecution`` gate is
answered with."""

from __future__ import annotations

from typing import Any

from loom_nb.errors import ChildExecutionError
from loom_nb.kernel.errors_codec import error_summary


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
