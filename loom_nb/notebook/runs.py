"""Which ``Run`` object stands for an execution in this kernel, and making its flow runnable.

An execution has one live ``Run`` per runtime (``Run.of``, kept in ``Runtime.runs``): every run the
kernel starts or attaches (``%loom pending``, ``show``, ``resume``, ``cancel``) is that object, so a
magic, a card and every live view of it follow one state. After a kernel restart an execution's flow
is only known once the cell that defines its agent ran again: ``ensure_registered`` looks for that
``Agent`` among those registered on the runtime and in the notebook's namespace and registers it, or
returns the ``FlowNotFoundError`` message saying what to run.
"""

from __future__ import annotations

from typing import Any

from loom_nb.agent.agent import Agent, Run
from loom_nb.errors import FlowNotFoundError, UsageError
from loom_nb.runtime import Runtime


def remember(run: Run) -> Run:
    """Remember ``run`` as this kernel's handle on its execution (on its runtime), unless one is
    remembered already; returns the one remembered (``Run.of``)."""
    return run.runtime.runs.setdefault(run.id, run)


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


def display(obj: Any) -> Any:
    """Display ``obj`` in the current cell (IPython's ``display``, with a display id); returns the
    display handle (None outside IPython).

    A live view of a run (an object with a ``run``) has its display updated whenever the run's status
    or gates change, so the text and HTML forms a saved notebook keeps (GitHub, nbviewer, nbval)
    show the run's latest state, not the state when it was first displayed.
    """
    from IPython.display import display as ipython_display

    handle = ipython_display(obj, display_id=True)  # type: ignore[no-untyped-call]
    run = getattr(obj, "run", None)
    if handle is not None and isinstance(run, Run):
        follow_display(run, obj, handle)
    return handle


def follow_display(run: Run, view: Any, handle: Any) -> None:
    """Update ``handle`` (a display of ``view``) each time ``run``'s status or gates change, after the
    view updated itself, until the view is closed."""
    last: list[str] = []

    def update(_: Run) -> None:
        if getattr(view, "comm", True) is None:  # the view was closed
            return
        try:
            text = repr(view)
            if last and last[0] == text:
                return
            last[:] = [text]
            handle.update(view)
        except Exception:  # a display must never stop a run
            return

    run.on_change(update)


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
    """This kernel's ``Run`` of ``execution_id`` (``Run.attach``: the live one, else one read from the
    journal), with its agent registered if the notebook defines it.

    Raises:
        UsageError: no such execution in the journal.
    """
    agent = find_agent(runtime, flow_of(runtime, execution_id))
    if agent is not None:
        agent.register(runtime)
    return Run.attach(runtime, execution_id, agent=agent)
