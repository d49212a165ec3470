"""Which ``Run`` object stands for an execution in this kernel, and making its flow runnable.

An execution has one live ``Run`` per runtime (``Run.of``, kept in ``Runtime.runs``): every run the
kernel starts or attaches (``%loom pending``, ``show``, ``resume``, ``cancel``) is that object, so a
magic, a card and every live view of it follow one state. After a kernel restart an execution's flow
is only known once the cell that defines its agent ran again: ``ensure_registered`` looks for that
``Agent`` among those registered on the runtime and in the notebook's namespace and registers it, or
returns the ``FlowNotFoundError`` message saying what to run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from loom_nb.agent.agent import Agent
from loom_nb.agent.run import Run
from loom_nb.errors import FlowNotFoundError, UsageError
from loom_nb.journal.events import TERMINAL_STATUSES
from loom_nb.runtime import Runtime

log = logging.getLogger("loom_nb")


def remember(run: Run) -> Run:
    """Remember ``run`` as this kernel's handle on its execution (on its runtime), unless one is
    remembered already; returns the one remembered (``Run.of``)."""
    remembered: Run = run.runtime.runs.setdefault(run.id, run)
    return remembered


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

    A live view (an object with a ``run``, or with an ``on_refresh(listener)`` like the batch view)
    has its display updated whenever the run's status or gates change (whenever the view refreshed),
    so the text form a front end without widgets and a saved notebook keep (terminal IPython,
    GitHub, nbviewer, ``make notebooks``) show the latest state, not the state when it was first
    displayed; while a front end with widgets shows it (where an update draws the whole view anew
    while the widget already shows every change in place), when the view first waits at its
    gates and when it ended. See ``follow_display``.
    """
    from IPython.display import display as ipython_display

    run = getattr(obj, "run", None)
    live = isinstance(run, Run) or callable(getattr(obj, "on_refresh", None))
    if live:
        count_views(obj)
    handle = ipython_display(obj, display_id=True)  # type: ignore[no-untyped-call]
    if handle is None:
        return None
    if isinstance(run, Run):
        follow_display(obj, handle, run.on_change)
    elif live:
        follow_display(obj, handle, obj.on_refresh)
    return handle


def count_views(widget: Any) -> None:
    """Ask the front end to count the views of ``widget`` it shows (ipywidgets' ``_view_count``
    trait: None, its default, means untracked; 0 starts the count). ``views_shown`` reads it."""
    if getattr(widget, "_view_count", 0) is None:
        widget.set_trait("_view_count", 0)


def views_shown(widget: Any) -> int:
    """How many views of ``widget`` a front end reports it shows (``count_views``; 0 if untracked)."""
    count = getattr(widget, "_view_count", None)
    return count if isinstance(count, int) else 0


def widget_front_end() -> bool:
    """Whether a front end that runs widget code is connected to this kernel: JupyterLab's and
    Notebook's widget manager opens ipywidgets' control comm as it connects, before any cell runs;
    nbclient, nbval and terminal IPython never do."""
    import ipywidgets

    return getattr(ipywidgets.Widget, "_control_comm", None) is not None


class FollowedDisplay:
    """A display of a live view that follows the view (``follow_display``).

    Attributes:
        view: The view.
        handle: Its display handle.
        sent: The text of the last update sent while a cell ran (``republish``).
    """

    def __init__(self, view: Any, handle: Any) -> None:
        self.view = view
        self.handle = handle
        self.sent = repr(view)
        self._last = self.sent
        self.rested: set[str] = set()  # the rests whose text a front end with widgets was sent (``changed``)

    @property
    def closed(self) -> bool:
        """Whether the view's widget was closed (nothing to update any more)."""
        return getattr(self.view, "comm", True) is None

    @property
    def shown(self) -> bool:
        """Whether a front end with widgets shows the view (``widget_front_end``, or the count of
        views a front end reports in the widget's ``_view_count``): each update of the display would
        draw the whole view anew there (JupyterLab makes a new view of the widget for it, so the
        scroll inside the view, open sections and text being typed would go, and the page jump),
        while the widget already shows every change in place."""
        return views_shown(self.view) > 0 or widget_front_end()

    def rests_at(self) -> str | None:
        """Where the view came to rest, else None while it moves: its run's status once the run
        waits at its gates (``suspended``) or ended; for a batch, ``waiting`` once every item
        ended or waits at a gate, ``settled`` once every one ended."""
        run = getattr(self.view, "run", None)
        if isinstance(run, Run):
            return run.status if run.status in TERMINAL_STATUSES or run.status == "suspended" else None
        batch = getattr(self.view, "batch", None)
        if batch is None or batch.moving:
            return None
        return "waiting" if batch.waiting else "settled"

    @property
    def final(self) -> bool:
        """Whether the text sent to a front end with widgets is the view's last (``changed``)."""
        return any(rest in self.rested for rest in (*TERMINAL_STATUSES, "settled"))

    def changed(self, *_: Any) -> None:
        """Update the display when the view's text changed (a listener of the run or the view).
        While a front end with widgets shows it (``shown``), once when it first waits at its gates
        and once when it ended (``rests_at``): the notebook that front end saves then says where
        the run stands, and the redraw an update costs there comes when nothing moves (never after
        a click on one of several cards: the others keep what is typed into them)."""
        if self.closed:
            return
        rest = self.rests_at()
        if self.shown and (rest is None or rest in self.rested):
            return
        if rest is not None:
            self.rested.add(rest)  # sent while no widget showed it too: that rest is in the display
        try:
            text = repr(self.view)
            if text != self._last:
                self._last = text
                self.handle.update(self.view)
        except Exception:  # a display must never stop a run
            return

    def republish(self) -> bool:
        """Update the display again, from the context of the cell that runs now, when the view's text
        changed since the last such update, its run (or batch) is not moving (a front end redraws
        the view at each update) and no front end with widgets shows it (``shown``); returns whether
        to keep following (False once the view is closed, or its run ended and its final text was
        sent)."""
        if self.closed:
            return False
        if self.shown:  # the widget shows every change in place: only where it rests is sent
            self.changed()
            return not self.final
        run, batch = getattr(self.view, "run", None), getattr(self.view, "batch", None)
        if (isinstance(run, Run) and run.status == "running") or getattr(batch, "moving", False):
            return True  # each update redraws the view in the page: wait until it settles
        try:
            flush = getattr(self.view, "flush", None)
            if callable(flush):
                flush()
            text = repr(self.view)
            if text != self.sent:
                self.sent = self._last = text
                self.handle.update(self.view)
        except Exception:  # a display must never stop a cell
            return False
        return not (isinstance(run, Run) and run.status in ("completed", "failed", "cancelled"))


#: The displays of live views this kernel follows, republished after each cell (``republish_displays``).
FOLLOWED: list[FollowedDisplay] = []
_HOOKED: list[Any] = []  # the IPython shell the post_run_cell hook is registered on


def follow_display(view: Any, handle: Any, subscribe: Any) -> FollowedDisplay:
    """Update ``handle`` (a display of ``view``) each time ``subscribe``'s listener is called (the
    run's status or gates changed; the view refreshed), after the view updated itself, until the
    view is closed; and again after each cell that runs while the view's text changed
    (``republish_displays``); while a front end with widgets shows the view
    (``FollowedDisplay.shown``), only when it first waits at its gates and when it ended.

    The second is for clients that save the notebook from the messages of each cell: nbclient (so
    nbconvert, ``make notebooks``) takes a display update only while the cell it belongs to runs;
    an update sent by a run that a previous cell started (ipykernel gives it that cell's parent
    header) reaches it while another cell runs and is dropped, so the saved output stayed at its
    first state. The update sent after each cell carries the running cell's header, and nbclient
    applies it to every output of that display id, in whichever cell it is.

    A front end with widgets (JupyterLab) applies an update to the cell that displayed the view and
    makes a new view of the widget for it, the whole view drawn anew; it is sent an update only
    when the view first comes to rest (its run waits at its gates; every item of its batch ended
    or waits) and when it ended, so the notebook it saves says where the run stands, and the
    redraw comes when nothing in the view moves.
    """
    followed = FollowedDisplay(view, handle)
    subscribe(followed.changed)
    FOLLOWED.append(followed)
    hook_post_run_cell()
    return followed


#: What else runs after each cell, before the displays are republished (cards waiting for their
#: agent look for it again: ``gate_card.recheck_waiting_cards``).
AFTER_CELL: list[Callable[[], None]] = []


def republish_displays(*_: Any) -> None:
    """The ``post_run_cell`` hook: run ``AFTER_CELL``, then republish every followed display whose
    text changed since."""
    for step in list(AFTER_CELL):
        try:
            step()
        except Exception:  # a hook must never stop a cell
            log.exception("loom_nb: an after-cell step failed")
    FOLLOWED[:] = [f for f in FOLLOWED if f.republish()]


def hook_post_run_cell() -> None:
    """Register ``republish_displays`` as the shell's ``post_run_cell`` hook (once per shell; a
    no-op outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with ipykernel
        return
    ip = get_ipython()
    if ip is None or any(shell is ip for shell in _HOOKED):
        return
    ip.events.register("post_run_cell", republish_displays)
    _HOOKED.append(ip)


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
