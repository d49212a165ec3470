"""Sub-agents in the frames: ``Frames.replay`` puts the children's outcome on the parent's row and
replays a listed child once (its parent's replay reaches it)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import loom_nb as loom
from loom_nb.analysis.frames import frames
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import make_runtime
from tests.agent.test_subagents import TOOL_STEP, agents

CHILD = f"lead-1/{TOOL_STEP}"


async def test_replay_shows_the_children_on_the_parent_row_and_replays_a_child_once() -> None:
    rt = make_runtime()
    lead, _ = agents([])
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    await run.gates[0].approve()
    assert run.status == "completed"
    replays: Counter[str] = Counter()
    replay = rt.replay

    async def counting(eid: str, *args: Any, **kwargs: Any) -> Any:
        replays[eid] += 1
        return await replay(eid, *args, **kwargs)

    rt.replay = counting  # type: ignore[method-assign]
    f = frames(rt)
    report = (await f.replay()).set_index("execution_id")
    assert replays == {"lead-1": 1, CHILD: 1}  # the child only inside its parent's replay
    assert report.loc["lead-1", "children"] == f"{CHILD}: completed"
    assert report.loc[CHILD, "children"] == "" and bool(report.loc[CHILD, "reproduced"])
    assert report["reproduced"].all()
    replays.clear()
    child_first = await f.replay([CHILD, "lead-1"])  # the rows keep the order asked for
    assert child_first["execution_id"].tolist() == [CHILD, "lead-1"] and replays == {"lead-1": 1, CHILD: 1}
    alone = await f.replay(CHILD)  # a child on its own is replayed on its own
    assert alone["reproduced"].tolist() == [True] and replays[CHILD] == 2
    # An edited researcher: the parent's row says which child did not reproduce.
    rt2 = make_runtime(rt.journal)
    edited = loom.Agent(ScriptedModel([]), tools=[], system="Research carefully.", name="researcher")
    loom.Agent(
        ScriptedModel([]),
        tools=[edited.as_tool(name="research", description="Research a question on the web.")],
        name="lead",
    ).register(rt2)
    changed = (await frames(rt2).replay()).set_index("execution_id")
    assert not changed.loc["lead-1", "reproduced"] and not changed.loc[CHILD, "reproduced"]
    assert changed.loc["lead-1", "children"] == f"{CHILD}: diverged (not reproduced)"
