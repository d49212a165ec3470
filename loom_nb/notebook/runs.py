"""Which ``Run`` object stands for an execution in this kernel, and making its flow runnable.

Every run the kernel starts (through ``RUN_HOOKS``) or attaches (``%loom pending``, ``show``,
``resume``) is remembered by its runtime (``Runtime.runs``), so a magic and a card act on the same
``Run`` the live view watches. After a kernel restart an execution's flow is only known once the
cell that defines its agent ran again: ``ensure_registered`` looks for that ``Agent`` among those
registered on the runtime and in the notebook's namespace and registers it, or returns the
``FlowNotFoundError`` message saying what to run.
"""

from __future__ import annotations

from typing import Any

from loom_nb.agent.agent import Agent, Run
from loom_nb.errors import FlowNotFoundError, UsageError
from loom_nb.runtime import Runtime


def remember(run: Run) -> Run:
    """Remember ``run`` as this kernel's handle on its execution (on its runtime); returns it."""
    run.runtime.runs[run.id] = run
    return run


def live_run(runtime: Runtime, execution_id: str) -> Run | None:
    """The remembered ``Run`` of ``execution_id`` on ``runtime``, if any."""
    return runtime.runs.get(execution_id)


def _user_namespace() -> dict[str, Any]:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with ipykernel
        return {}
    ip = get_ipython()
    ns = getattr(ip, "user_ns", None) if ip is not None else None
    return ns if isinstance(ns, dict) else {}


def display(obj: Any) -> None:
    """Display ``obj`` in the current cell (IPython's ``display``)."""
    from IPython.display import display as ipython_display

    ipython_display(obj)  # type: ignore[no-untyped-call]


def find_agent(runtime: Runtime, flow_name: str) -> Agent | None:
    """The ``Agent`` whose flow is ``flow_name``: the latest one the notebook's namespace defines,
    else the one registered on ``runtime``, else None."""
    found: Agent | None = runtime.agents.get(flow_name)
    for value in list(_user_namespace().values()):
        if isinstance(value, Agent) and value.flow_name == flow_name:
            found = value
    return found


def flow_of(runtime: Runtime, execution_id: str) -> str:
    """The flow name an execution runs.

    Raises:
        UsageError: no such execution in the journal.
    """
    record = runtime.journal.get_execution(execution_id)
    if record is None:
        raise UsageError(
            f"no execution {execution_id!r} in the journal {runtime.journal.location} (list them with %loom runs)"
        )
    return record.flow


def ensure_registered(run: Run) -> str | None:
    """Make the flow (and the effects) of ``run`` runnable in this process.

    Returns None when it is, else the ``FlowNotFoundError`` message (which flow is missing and
    what to run).
    """
    runtime = run.runtime
    try:
        flow = flow_of(runtime, run.id)
    except UsageError:
        return None  # not started yet: Agent.start registers it
    if run.agent is not None and run.agent.flow_name == flow:
        if flow not in runtime.flows.names():
            run.agent.register(runtime)
        return None
    agent = find_agent(runtime, flow)
    if agent is not None:
        agent.register(runtime)
        run.agent = agent
        return None
    try:
        runtime.flows.get(flow)
    except FlowNotFoundError as exc:
        return str(exc)
    return None


def run_for(runtime: Runtime, execution_id: str) -> Run:
    """This kernel's ``Run`` of ``execution_id``: the live one, else one attached from the journal.

    Raises:
        UsageError: no such execution in the journal.
    """
    run = live_run(runtime, execution_id)
    return run if run is not None else attach(runtime, execution_id)


def attach(runtime: Runtime, execution_id: str) -> Run:
    """A fresh ``Run`` attached to ``execution_id`` from the journal (with its agent registered, if
    the notebook defines it), remembered as this kernel's handle on the execution.

    Raises:
        UsageError: no such execution in the journal.
    """
    agent = find_agent(runtime, flow_of(runtime, execution_id))
    if agent is not None:
        agent.register(runtime)
    return remember(Run.attach(runtime, execution_id, agent=agent))
