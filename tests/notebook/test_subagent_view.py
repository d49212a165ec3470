"""A sub-agent's steps nested in its parent's live view (``ChildPanel``): the child's tool rows
and approval cards under the parent's ``as_tool`` row; a click on a nested card answers in the
child and then runs the parent on."""

from __future__ import annotations

from typing import Any

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.messages import ModelResponse
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.child_panel import ChildPanel
from loom_nb.notebook.run_view import RunView
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.test_subagents import TOOL_STEP, agents, two_researchers
from tests.notebook.support import folded_away, make_runtime

CHILD = f"lead-1/{TOOL_STEP}"
APPROVAL = "#turn:0:tool:0:approval"


async def paused() -> tuple[loom.Runtime, Run[Any], RunView, list[str]]:
    log: list[str] = []
    rt = make_runtime()
    lead, _ = agents(log)
    run = lead.start("go", runtime=rt, execution_id="lead-1")
    view = RunView(run)  # watching live, before the first event commits
    await run.wait(until="paused")
    return rt, run, view, log


async def test_the_child_rows_and_card_sit_under_the_parent_tool_row_and_a_click_resumes_both() -> None:
    rt, run, view, log = await paused()
    panel = view.child_panels[CHILD]
    assert isinstance(panel, ChildPanel) and "loom-child" in panel._dom_classes
    # The panel sits right after the parent's row of the ``as_tool`` call, in that turn's tools.
    tools = view.blocks[0].tools.children
    assert tools.index(panel) == tools.index(view.tool_rows[TOOL_STEP].widget) + 1
    assert view.cards == {}  # the child's gate is not shown as one of the parent's own
    card = panel.cards[(CHILD, APPROVAL)]
    assert isinstance(card, ApprovalCard) and card in panel.cards_box.children
    assert view.text().splitlines()[1:5] == [
        "  tool research(input='what does a.test say?') waiting",
        f"    child {CHILD} (agent:researcher): suspended",
        "      tool fetch_page(url='https://a.test') awaiting approval",
        f"      <Gate {APPROVAL}: approve fetch_page(url='https://a.test')?> -> "
        f"%loom resume {CHILD} '{APPROVAL}' --approve | --refuse [--reason R]",
    ]
    card.approve.click()
    result = await run
    assert result.output == "Done: a.test says hi" and log == ["fetch https://a.test"]
    assert rt.result(CHILD).status == "completed" and run.status == "completed"
    assert card.approve.disabled and card.decision is not None and card.decision.startswith("approved at ")
    assert panel.status == "completed"
    assert view.tool_rows[TOOL_STEP].text() == "tool research(input='what does a.test say?') done -> a.test says hi"
    assert (
        panel.tool_rows[TOOL_STEP].text()
        == "tool fetch_page(url='https://a.test') done, approved -> <page https://a.test>"
    )
    assert "completed" in view.status.value and "Done: a.test says hi" in view.answer.value
    # the decided card folds into the child's tool row, as in the run view: taken out and closed
    assert (CHILD, APPROVAL) in panel.folded and folded_away(view, card) and not panel.cards_box.children
    assert view.text().splitlines()[1:4] == [
        "  tool research(input='what does a.test say?') done -> a.test says hi",
        f"    child {CHILD} (agent:researcher): completed",
        "      tool fetch_page(url='https://a.test') done, approved -> <page https://a.test>",
    ]
    assert "gate " not in view.text()
    view.close()


async def test_a_view_rebuilt_from_the_journal_nests_the_child_and_its_card_answers_it() -> None:
    rt, _, view, log = await paused()
    view.close()
    lead, _ = agents(log)
    again = RunView(Run.attach(rt, "lead-1", agent=lead))  # e.g. %loom show after a kernel restart
    panel = again.child_panels[CHILD]
    assert panel.status == "suspended" and list(panel.tool_rows) == [TOOL_STEP]
    (card,) = panel.cards.values()
    card.refuse.click()
    await again.run
    assert again.run.status == "completed" and rt.result(CHILD).status == "completed" and log == []
    assert panel.tool_rows[TOOL_STEP].status == "refused"
    assert (CHILD, APPROVAL) in panel.folded and folded_away(again, card)
    assert panel.lines() == [
        f"child {CHILD} (agent:researcher): completed",
        "  tool fetch_page(url='https://a.test') refused",
    ]
    again.close()


async def test_cancelling_the_parent_from_its_view_closes_the_nested_card() -> None:
    rt, run, view, _ = await paused()
    view.stop.click()
    view.confirm_stop.yes.click()
    await run.wait()
    assert run.status == "cancelled" and rt.result(CHILD).status == "cancelled"
    card = view.child_panels[CHILD].cards[(CHILD, APPROVAL)]
    assert card.approve.disabled
    assert view.tool_rows[TOOL_STEP].status == "cancelled"
    assert view.child_panels[CHILD].tool_rows[TOOL_STEP].status == "cancelled"
    view.close()


async def test_two_children_of_one_turn_get_a_panel_each_and_their_cards_answer_them() -> None:
    log: list[str] = []
    run = two_researchers(log).start("go", runtime=make_runtime(), execution_id="p")
    view = RunView(run)
    await run.wait(until="paused")
    children = ["p/#turn:0:tool:0", "p/#turn:0:tool:1"]
    assert list(view.child_panels) == children
    tools = view.blocks[0].tools.children
    for cid in children:  # each panel right under its own row
        assert tools.index(view.child_panels[cid]) == tools.index(view.tool_rows[cid.split("/")[1]].widget) + 1
    cards = [card for cid in children for card in view.child_panels[cid].cards.values()]
    assert len(cards) == 2
    for card in cards:
        card.approve.click()
        await run.wait(until="paused")
    assert run.status == "completed" and log == ["a.test", "b.test"]
    assert [view.tool_rows[c.split("/")[1]].status for c in children] == ["done", "done"]
    assert all(folded_away(view, card) for card in cards)  # each folded into its own child's row
    view.close()


async def test_a_child_gate_card_takes_the_tool_from_the_child_agent() -> None:
    """The child's tool is not on the parent's agent: the card and the child's row still show its
    description and its parameters in the signature's order (not the model's)."""
    from tests.agent.support import calls

    @loom.tool(needs_approval=True)
    def send_mail(to: str, subject: str, body: str) -> str:
        """Send an e-mail.

        Args:
            to: The recipient.
            subject: The subject line.
            body: The text.
        """
        return "sent"

    mailer = loom.Agent(
        ScriptedModel(
            [calls(("send_mail", {"body": "hi", "subject": "s", "to": "a@b.test"})), ModelResponse.text("ok")]
        ),
        tools=[send_mail],
        name="mailer",
    )
    lead = loom.Agent(
        ScriptedModel([calls(("mail", {"input": "say hi"})), ModelResponse.text("done")]),
        tools=[mailer.as_tool(name="mail")],
        name="lead",
    )
    run = lead.start("go", runtime=make_runtime(), execution_id="m")
    view = RunView(run)
    await run.wait(until="paused")
    (gate,) = run.gates
    assert gate.agent is mailer and run.agent_of("m") is lead and run.agent_of("other") is None
    panel = view.child_panels[f"m/{TOOL_STEP}"]
    (card,) = panel.cards.values()
    assert isinstance(card, ApprovalCard)
    assert card.summary() == "send_mail(to='a@b.test', subject='s', body='hi')"
    assert "Send an e-mail." in card.children[0].value
    assert panel.tool_rows[TOOL_STEP].text().startswith("tool send_mail(to='a@b.test', subject='s', body='hi')")
    card.approve.click()
    assert (await run).output == "done"
    view.close()
