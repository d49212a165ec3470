"""Where the live view puts what needs a person: finished turns fold into the capped box (which
follows its tail in the page), the current turn and every waiting card sit below it, uncapped
(the browser tests measure the same in JupyterLab: ``test_view_layout_browser.py``)."""

from __future__ import annotations

from typing import Any

from loom_nb.notebook.cards import GateCard
from loom_nb.notebook.formatting import widget_tree
from loom_nb.notebook.run_view import RunView
from loom_nb.notebook.view_page import FOLLOW_CLASS, ViewPage
from tests.notebook.support import TidyAgent, make_runtime
from tests.notebook.test_view_look import CALL, mail_agent, paused


def inside(box: Any, widget: Any) -> bool:
    return any(w is widget for w in widget_tree(box))


async def test_three_waiting_cards_are_never_inside_the_capped_box() -> None:
    run, view = await paused(mail_agent([{**CALL, "to": f"p{i}@example.com"} for i in range(3)]))
    cards = list(view.cards.values())
    assert len(cards) == 3
    assert "loom-capped" in view.body._dom_classes
    for card in cards:
        assert inside(view.current, card) and not inside(view.body, card)
    # a later turn does not push a turn whose cards still wait into the capped box
    view.block(1)
    assert view.body.children == () and view.current.children == (view.blocks[0], view.blocks[1])
    cards[0].approve.click()
    group = view.blocks[0].approvals
    assert group is not None
    group.approve_all.click()
    group.confirm.yes.click()
    await run


async def test_finished_turns_fold_into_the_capped_box_the_current_turn_stays_below() -> None:
    t = TidyAgent()
    run = t.agent.start("tidy", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    assert view.body.children == (view.blocks[0],)  # turn 0 is done: folded
    assert view.current.children == (view.blocks[1],)  # turn 1 waits: below, uncapped
    card = view.cards["#turn:1:tool:0:approval"]
    assert isinstance(card, GateCard) and inside(view.current, card)
    card.approve.click()  # type: ignore[attr-defined]
    await run
    assert view.body.children == (view.blocks[0], view.blocks[1])
    assert view.current.children == (view.blocks[2],)
    # Show all lifts the cap on both: the folded turns and the current turn's text
    view.expand.click()
    assert "loom-capped" not in view.body._dom_classes and "loom-capped" not in view.current._dom_classes
    view.expand.click()
    assert "loom-capped" in view.body._dom_classes and "loom-capped" in view.current._dom_classes


async def test_the_capped_boxes_follow_their_tail_in_the_page() -> None:
    t = TidyAgent()
    run = t.agent.start("tidy", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    assert FOLLOW_CLASS in view.body._dom_classes
    assert all(FOLLOW_CLASS in b.body._dom_classes for b in view.blocks.values())  # a turn's streamed text
    follows = [w for w in widget_tree(view) if isinstance(w, ViewPage)]
    assert len(follows) == 1
    other = RunView(t.agent.start("tidy again", runtime=run.runtime))
    assert [w for w in widget_tree(other) if isinstance(w, ViewPage)] == follows  # one shared model
    await other.run.wait(until="paused")
    view.cards["#turn:1:tool:0:approval"].approve.click()  # type: ignore[attr-defined]
    await run


async def test_a_finished_run_says_the_turns_it_took_and_no_zero_chunk_count() -> None:
    t = TidyAgent()
    run = t.agent.start("tidy", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    assert view.turn_label.value == "turn 2/20"
    assert "0 chunk(s)" not in view.live.value  # the scripted model here did not stream
    assert "turn 2 · <code>#turn:1</code>" in view.blocks[1].head.value  # the id its steps have
    view.cards["#turn:1:tool:0:approval"].approve.click()  # type: ignore[attr-defined]
    await run
    assert view.turn_label.value == "3 turns" and view.progress.value == view.progress.max == 3


async def test_a_cancelled_run_shows_no_approve_all_above_its_closed_cards() -> None:
    run, view = await paused(mail_agent([CALL, {**CALL, "to": "b@example.com"}]))
    group = view.blocks[0].approvals
    assert group is not None and group.bar.layout.display == ""
    await run.cancel("changed my mind")
    await run.wait()
    assert all(c.closed for c in group.cards) and group.bar.layout.display == "none"
