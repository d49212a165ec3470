"""Pure replay: re-run an execution's body from its log alone (no effect runs, nothing is written)
and report whether it reproduces the recorded run (``Engine.replay``)."""

from __future__ import annotations

from collections import Counter

from loom_nb.errors import FlowNotFoundError, NonDeterminismError, ReplayDivergedError
from loom_nb.journal.canonical import digest_value, to_jsonable
from loom_nb.kernel.check import recorded_trace
from loom_nb.kernel.context import ExecutionContext
from loom_nb.kernel.errors_codec import error_to_data
from loom_nb.kernel.gates import Suspend
from loom_nb.kernel.history import History
from loom_nb.kernel.results import ReplayReport
from loom_nb.kernel.staging import ExecutionHost


async def replay_history(host: ExecutionHost, h: History) -> ReplayReport:
    """Re-run the body of the execution recorded as ``h`` purely from it, under ``host`` (the
    engine), and report whether it reproduces the record."""
    body = host.flows.get(h.flow)
    ctx = ExecutionContext(host, h, pure=True)
    began = host.clock.now()
    status, message, output = "completed", "", None
    cut_short = False
    try:
        output = to_jsonable(await body(ctx, h.input))
    except Suspend:
        status = "suspended"
    except (ReplayDivergedError, NonDeterminismError) as exc:
        status, message = "diverged", str(exc)
        cut_short = isinstance(exc, ReplayDivergedError)  # it reached what the record never finished
    except FlowNotFoundError as exc:
        if h.error is None or h.error.get("type") != error_to_data(exc).get("type"):
            raise  # a child's flow is not registered here (the message says which and how to fix)
        status = "failed"
    except Exception as exc:
        status = "failed"
        if h.error is not None and error_to_data(exc).get("type") != h.error.get("type"):
            message = f"the replay failed with {type(exc).__name__} but the record failed otherwise"
    expected = recorded_trace(h)
    stopped = status == "suspended" or cut_short
    if h.status == "cancelled" and stopped and expected in (ctx.trace, ctx.trace[:-1]):
        # The cancel stopped the recorded run where the replay stops: at a gate, at the step cut
        # in flight, or before the next step (a pure replay cannot run it).
        status, message = "cancelled", ""
    if not message and ctx.trace != expected:
        missing = Counter(expected) - Counter(ctx.trace)
        extra = Counter(ctx.trace) - Counter(expected)
        message = f"the replay asked for {sorted(extra)} not in the record and skipped {sorted(missing)}"
        if not missing and not extra:
            message = "the replay asked for the recorded steps in another order"
    if not message and status != h.status and not (h.status == "running" and status == "suspended"):
        message = f"the record is {h.status} but the replay ended {status}"
    if not message and status == "completed" and digest_value(output) != digest_value(h.output):
        message = "the replay's output differs from the recorded output"
    return ReplayReport(
        execution_id=h.execution_id,
        reproduced=not message,
        recorded_status=h.status,
        replayed_status=status,
        served=h.served_count() - ctx.unserved,
        message=message or "reproduced",
        seconds=host.clock.now() - began,
        trace=tuple(ctx.trace),
        children=tuple(ctx.child_replays),
    )
