"""Tool rows of the live view: a decided approval folds into its row (the card is closed; the row and
the text form say the decision), a result wrapped as ``{"result": value}`` (an MCP server's
structured content) previews its value, and the header's turns bar has no fixed-width label."""

from __future__ import annotations

import html

from loom_nb.journal.run_state import GateState, StepState
from loom_nb.notebook.formatting import result_value
from loom_nb.notebook.rows import ToolRow
from loom_nb.notebook.run_view import RunView
from tests.notebook.support import TidyAgent, folded_away, make_runtime
from tests.notebook.test_notebook_view import GATE, paused_view


def approval(resolution: dict[str, object]) -> GateState:
    return GateState(
        gate_id="#turn:0:tool:0:approval",
        kind="AgentToolApproval",
        payload={},
        schema=None,
        opened_at=0.0,
        resolved=True,
        resolution=resolution,
        resolved_at=3600.0,
    )


def test_a_result_wrapped_in_result_previews_its_value() -> None:
    assert result_value({"result": "deleted old-todo.md"}) == "deleted old-todo.md"
    assert result_value({"result": [1, 2]}) == [1, 2]
    assert result_value({"result": 1, "more": 2}) == {"result": 1, "more": 2}  # not a wrapper
    assert result_value("text") == "text"
    row = ToolRow("#turn:0:tool:0", "delete_note", {"name": "old-todo.md"})
    step = StepState(step_id="#turn:0:tool:0", effect="tools.delete_note", digest="")
    step.attempts, step.completed, step.output = 1, True, {"result": "deleted old-todo.md"}
    row.update(step, None)
    assert row.text() == "tool delete_note(name='old-todo.md') done -> deleted old-todo.md"


def test_the_row_says_the_decision_in_text_and_with_its_time_in_the_widget() -> None:
    row = ToolRow("#turn:0:tool:0", "send", {"to": "ann"})
    row.update(None, approval({"approved": True, "reason": "fine"}))
    assert row.status == "approved" and row.text() == "tool send(to='ann') approved (fine)"
    row.render()
    shown = html.unescape(row.widget.value)
    assert "<span class='loom-decision'>· approved at " in shown and shown.endswith(" (fine)</span>")
    row.update(None, approval({"approved": True, "reason": None, "arguments": {"to": "bob"}}))
    assert row.text() == "tool send(to='ann') approved with edited arguments"
    refused = ToolRow("#turn:0:tool:0", "send", {"to": "ann"})
    refused.update(None, approval({"approved": False, "reason": "not now"}))
    assert refused.text() == "tool send(to='ann') refused -> not now"  # the reason once
    refused.render()
    assert "· refused at " in refused.widget.value and refused.widget.value.count("not now") == 1


async def test_a_refused_card_folds_into_its_row_and_the_text_matches_a_rebuilt_view() -> None:
    t = TidyAgent()
    rt = make_runtime()
    run, view = await paused_view(t, rt)
    card = view.cards[GATE]
    card.reason.value = "keep it"
    card.refuse.click()
    await run
    assert GATE in view.folded and folded_away(view, card)
    assert "  tool delete_file(path='/tmp/x/stale.log') refused -> keep it" in view.text()
    assert f"gate {GATE}" not in view.text()
    assert view.text() == RunView(run).text()  # a view built after the decision shows no card at all


def test_the_turns_bar_label_is_as_wide_as_its_word() -> None:
    view = RunView(TidyAgent().agent.start("x", runtime=make_runtime()))
    assert view.progress.style.description_width == "initial"
    view.close()


async def test_rows_and_headings_share_one_layout_and_style_model_which_closing_a_card_leaves_open() -> None:
    from loom_nb.notebook.formatting import close_tree, shared_model, widget_tree

    run, view = await paused_view(TidyAgent(), make_runtime())
    layout, style = shared_model("layout"), shared_model("html_style")
    rows = [r.widget for r in view.tool_rows.values()]
    assert rows and all(w.layout is layout and w.style is style for w in rows)
    assert all(b.head.layout is layout and b.tools.layout is shared_model("box_layout") for b in view.blocks.values())
    card = view.cards[GATE]
    assert card.status.layout is not layout  # a card collapses by hiding its parts: layouts of its own
    view.cards[GATE].approve.click()  # type: ignore[attr-defined]
    await run
    assert folded_away(view, card) and layout.comm is not None and style.comm is not None
    tree = widget_tree(view)
    layouts = [w for w in tree if type(w).__name__ == "Layout"]
    assert len(layouts) < len(tree) // 4  # most widgets hold the shared layout
    assert close_tree(view) > 1 and layout.comm is not None  # the shared models stay open for other views
    again = RunView(run)
    assert again.tool_rows["#turn:1:tool:0"].widget.layout is layout
    style_sheet = shared_model("run_view_style")  # one style sheet widget, in every view's header
    assert "loom-style" in style_sheet._dom_classes and style_sheet.comm is not None
    assert style_sheet in again.children[0].children and style_sheet in view.children[0].children
