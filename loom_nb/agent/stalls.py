"""Runs whose driving in this process stopped on a journal error while the journal says ``running``.

A failed commit (``JournalWriteError``) stops the task that drives a run, but nothing of the
failure is journaled: the run is ``running`` there, and ``runtime.recover()`` finishes it. Its
``Run`` says so (``running``, with the error at hand). Starting the same work again before that
recovery would run its effects a second time (a charge made before the failed commit, then again by
the new run, then once more by ``recover()`` of the first); ``refuse_again`` stops that: the same
execution id, or (for a start that derives a fresh id) the same flow on the same input.
"""

from __future__ import annotations

import weakref
from typing import Any

from loom_nb.errors import UsageError
from loom_nb.journal.canonical import digest_value, to_jsonable

#: Per runtime: execution id -> (flow, digest of its input, the error that stopped it here).
_STALLED: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, str, str]]] = weakref.WeakKeyDictionary()


def note_stalled(runtime: Any, execution_id: str, error: BaseException) -> None:
    """Remember that ``execution_id`` stopped here on ``error`` while the journal says it runs."""
    try:
        history = runtime.history(execution_id)
        flow, digest = history.flow, digest_value(history.input)
    except Exception:  # a journal that cannot be read now: nothing to compare against
        return
    _STALLED.setdefault(runtime, {})[execution_id] = (flow, digest, type(error).__name__)


def forget_stalled(runtime: Any, execution_id: str) -> None:
    """The run moved on (recovered, or driven again here): forget it."""
    entries = _STALLED.get(runtime)
    if entries:
        entries.pop(execution_id, None)


def refuse_again(runtime: Any, flow: str, input: Any, execution_id: str | None) -> None:
    """Refuse to start ``flow`` on ``input`` (as ``execution_id``, or a fresh id when None) while a
    run of the same work stopped here is still ``running`` in the journal.

    Raises:
        UsageError: naming that run and saying to ``recover()`` it.
    """
    entries = _STALLED.get(runtime)
    if not entries:
        return
    digest: str | None = None
    for eid, (recorded_flow, recorded_digest, error) in list(entries.items()):
        if recorded_flow != flow:
            continue
        record = runtime.journal.get_execution(eid)
        if record is None or record.status != "running":
            del entries[eid]  # recovered (or gone) since: nothing to refuse
            continue
        if execution_id is None and digest is None:
            digest = digest_value(to_jsonable(input))
        if eid == execution_id or (execution_id is None and digest == recorded_digest):
            raise UsageError(
                f"run {eid!r} of this work is still running in the journal: its driving here stopped on "
                f"{error} (nothing was lost). Starting it again would repeat its effects: run "
                f"`await runtime.recover()` to finish it, then read it with agent.attach({eid!r})."
            )
