"""The runtime owns the ``Run`` handles and the agents registered on it (no module-level maps):
two runtimes in one process never see each other's."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.journal import InMemoryJournal
from loom_nb.kernel import FlowRegistry
from loom_nb.notebook.runs import find_agent, live_run, remember, run_for
from loom_nb.testing import FakeClock, SequentialIds


def runtime() -> loom.Runtime:
    return loom.Runtime(InMemoryJournal(), clock=FakeClock(), ids=SequentialIds(), flows=FlowRegistry())


def greeter() -> loom.Agent:
    return loom.Agent(model=loom.ScriptedModel(lambda _r: loom.ModelResponse.text("hi")), name="greeter")


def test_each_runtime_knows_only_the_agents_registered_on_it() -> None:
    first, second = runtime(), runtime()
    agent = greeter()
    assert find_agent(first, "agent:greeter") is None  # built, not registered anywhere yet
    agent.register(first)
    assert find_agent(first, "agent:greeter") is agent
    assert find_agent(second, "agent:greeter") is None


def test_each_runtime_keeps_its_own_run_handles() -> None:
    first, second = runtime(), runtime()
    run = greeter().start("hello", runtime=first, execution_id="same-id", view=False)
    greeter().start("hello", runtime=second, execution_id="same-id", view=False)
    assert live_run(first, "same-id") is run  # one Run per execution per runtime (Run.of)
    assert remember(run) is run
    assert live_run(first, "same-id") is run and run_for(first, "same-id") is run
    attached = run_for(second, "same-id")
    assert attached is not run and attached.runtime is second and live_run(second, "same-id") is attached
