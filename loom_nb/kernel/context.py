"""``ExecutionContext``: everything a flow body does that is not pure goes through it.

A body is re-run from the top on resume and recovery; the context serves every recorded step,
gate, decision and value from the journal and runs live only past the recorded prefix.
"""

from loom_nb.kernel.children import child_outcome_payload
from loom_nb.kernel.in_doubt import DEFAULT_ATTEMPT_LIMIT, IN_DOUBT_GATE, InDoubtResolution, attempt_limit
from loom_nb.kernel.staging import ContextCore, ExecutionHost
from loom_nb.kernel.staging import new_event as _new_event  # noqa: F401 (a test reads context._new_event)
from loom_nb.kernel.steps import StepExecution
from loom_nb.kernel.streams import StreamsAndContent
from loom_nb.kernel.values import RecordedValues
from loom_nb.kernel.waits import GateWaits

__all__ = [
    "DEFAULT_ATTEMPT_LIMIT",
    "IN_DOUBT_GATE",
    "ContextCore",
    "ExecutionContext",
    "ExecutionHost",
    "InDoubtResolution",
    "attempt_limit",
    "child_outcome_payload",
]


class ExecutionContext(StepExecution, GateWaits, RecordedValues, StreamsAndContent):
    """The handle a flow body gets: ``execute``, ``gate(s)``, ``decide``, ``stream``, ``now``...

    It implements ``FlowContext`` (what bodies may use); ``stage``, ``commit`` and ``unserved`` are
    for the engine that drives the body. Its parts share one execution's state (``ContextCore``):
    steps (``StepExecution``, with ``InDoubtSteps``), gates and child executions (``GateWaits``),
    decisions and values (``RecordedValues``), streams, warnings and content (``StreamsAndContent``).

    Attributes:
        execution_id: The execution this body runs.
        principal: Who it acts for.
    """
