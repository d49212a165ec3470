"""The plots share the live view's palette, and ``plot_usage`` leaves the cost axis out when no
cost is known (instead of an empty axis scaled to 1e-9)."""

from __future__ import annotations

import pytest

import loom_nb as loom
from loom_nb.analysis import frames, plot_usage
from loom_nb.analysis.plots import KIND_COLORS, cost_known
from loom_nb.messages import Usage
from loom_nb.palette import LIGHT
from tests.analysis.support import make_runtime

pytest.importorskip("matplotlib")


async def answer(rt: loom.Runtime, cost: float | None, eid: str) -> None:
    model = loom.ScriptedModel([loom.ModelResponse.text("hi", usage=Usage(input_tokens=5, output_tokens=2, cost=cost))])
    await loom.Agent(model=model, name=f"a{eid}").run("hello", runtime=rt, execution_id=eid)


async def test_plot_usage_hides_the_cost_axis_when_no_cost_is_known() -> None:
    rt = make_runtime()
    await answer(rt, None, "free")
    fig = plot_usage("free", frames=frames(rt))
    assert len(fig.axes) == 1 and "(cost unknown)" in fig.axes[0].get_title()
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["input tokens", "output tokens"]


async def test_plot_usage_draws_the_cost_when_known() -> None:
    rt = make_runtime()
    await answer(rt, 0.25, "paid")
    fig = plot_usage("paid", frames=frames(rt))
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "cost"
    assert fig.axes[1].get_ylim()[1] == pytest.approx(0.25 * 1.3)


def test_cost_known_and_the_shared_palette() -> None:
    assert not cost_known([None, float("nan"), 0.0]) and cost_known([None, 0.1])
    assert KIND_COLORS["model"] == LIGHT["model"] and KIND_COLORS["gate"] == LIGHT["gate"]
