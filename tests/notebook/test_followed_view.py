"""A live view of a run another process drives (``Run.follow`` on a shared journal) must fold the
same events to the same state as a view rebuilt from the journal, however late the events reach it.

Two runtimes on one in-memory journal stand for two processes: runtime B answers the gate and
drives the run to its end, and runtime A (the notebook that shows the view) only learns of it when
its ``Run`` reads the journal again, before any of B's events reach A's observers: the order in
which ``Run.follow`` signals the run's new state and then hands on the events.
"""

from __future__ import annotations

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.notebook.run_view import RunView
from loom_nb.testing import FakeClock, SequentialIds
from tests.notebook.support import TidyAgent, folded_away

TASK = "Remove the stale files in /tmp/x"


def runtime_on(journal: InMemoryJournal) -> loom.Runtime:
    return loom.Runtime(journal, clock=FakeClock(tick=0.01), ids=SequentialIds(), flows=FlowRegistry())


async def test_a_view_that_learns_of_the_end_before_the_events_shows_what_a_rebuilt_view_shows() -> None:
    t = TidyAgent()
    journal = InMemoryJournal()
    here, there = runtime_on(journal), runtime_on(journal)
    run = t.agent.start(TASK, runtime=here)
    view = RunView(run)
    await run.wait(until="paused")
    assert run.status == "suspended"

    t.agent.register(there)
    other = Run.attach(there, run.id, agent=t.agent)  # the worker's side
    for gate in other.gates:
        gate.approve("fine")
    await other.wait(timeout=10)
    assert other.status == "completed"

    run.refresh()  # what Run.follow does first: the view hears "completed" before the events
    assert run.status == "completed"
    rebuilt = RunView(Run.attach(runtime_on(journal), run.id, agent=t.agent))
    assert view.state == rebuilt.state  # the same events, folded to the same state
    assert view.state.status == "completed" and view.state.usage.calls == 3
    assert view.usage_text() == rebuilt.usage_text() and "over 3 model call(s)" in view.usage_text()
    assert [r.text() for r in view.tool_rows.values()] == [r.text() for r in rebuilt.tool_rows.values()]
    # the same text, but for the decision the followed view saw on its card, folded into the row
    assert view.text() == rebuilt.text()
    assert (
        "  tool delete_file(path='/tmp/x/stale.log') done, approved (fine) -> deleted /tmp/x/stale.log" in view.text()
    )
    assert "gate #turn:1:tool:0:approval" not in view.text()
    card = view.cards["#turn:1:tool:0:approval"]
    assert card.text() == "gate #turn:1:tool:0:approval: approved (fine)" and folded_away(view, card)
