"""The timeline nests a sub-agent's steps under the parent's step that ran it."""

from __future__ import annotations

import pytest

from loom_nb.analysis.frames import frames
from tests.agent.support import make_runtime
from tests.agent.test_subagents import TOOL_STEP, agents

CHILD = f"lead-1/{TOOL_STEP}"


async def test_the_timeline_nests_the_child_steps_under_the_parent_step() -> None:
    pytest.importorskip("matplotlib")
    rt = make_runtime()
    lead, _ = agents([])
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    await run.wait(until="paused")
    await run.gates[0].approve()
    f = frames(rt)
    parent, child = f.steps("lead-1"), f.steps(CHILD)
    ax = f.plot_timeline("lead-1").axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(parent) + len(child)
    at = labels.index(TOOL_STEP)  # the parent's as_tool step, then the child's steps, indented
    nested = [
        f"  ↳ {r.step_id}  {r.effect}".rstrip() if isinstance(r.effect, str) else f"  ↳ {r.step_id}"
        for r in child.itertuples()
    ]
    assert labels[at + 1 : at + 1 + len(child)] == nested
    assert "  ↳ #turn:0:tool:0:approval" in nested
    assert [lbl for lbl in labels if not lbl.startswith("  ↳")] == [
        f"{r.step_id}  {r.effect}".rstrip() if isinstance(r.effect, str) else r.step_id for r in parent.itertuples()
    ]
    # One time axis (seconds since the root began): the child's bars fall between the parent's
    # turn that called the sub-agent and its next turn.
    bars = {round(p.get_y() + p.get_height() / 2): (p.get_x(), p.get_x() + p.get_width()) for p in ax.patches}
    n = len(labels)
    turn0_end = bars[n - 1 - labels.index("#turn:0  model.lead")][1]
    turn1_start = bars[n - 1 - labels.index("#turn:1  model.lead")][0]
    child_bars = [bars[n - 1 - i] for i in range(at + 1, at + 1 + len(child))]
    assert len(child_bars) == len(child)
    assert all(turn0_end <= start and end <= turn1_start for start, end in child_bars)
    assert "1 child execution(s) nested" in ax.get_title()
