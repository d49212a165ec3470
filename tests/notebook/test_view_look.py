"""How the live view looks (widgets in the kernel; the browser tests click the same in JupyterLab):
cards in the tool's parameter order with its description and plain words, an Edit form from the
tool's schema, Approve all for a turn's several gates, decided cards collapsed, closed cards
disabled, the model's text per turn as sanitized Markdown, and one palette with AA contrast."""

from __future__ import annotations

import html
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.journal.run_state import RunState
from loom_nb.messages import ModelRequest
from loom_nb.notebook.cards import ApprovalCard, TurnApprovals
from loom_nb.notebook.click_feedback import SCOPE_CLASS, ClickFeedback
from loom_nb.notebook.edit_form import ArgumentForm, ordered_arguments
from loom_nb.notebook.run_view import RunView, markdown_html
from loom_nb.notebook.timeline import asset_dir
from loom_nb.palette import BACKGROUND, BUTTONS, DARK, LIGHT, THEMES, contrast_ratio, css, parse_color
from tests.notebook.support import REPO, TidyAgent, make_runtime

NOTE = "Dear team,\nthe build is green.\n\n- Ann"


@loom.tool(needs_approval=True)
def send_mail(to: str, subject: str, body: str, urgent: bool = False, copies: int = 0) -> str:
    """Send an e-mail.

    Args:
        to: The recipient.
        subject: The subject line.
        body: The text.
        urgent: Flag it as urgent.
        copies: How many copies.
    """
    return f"sent to {to}"


def mail_agent(calls: list[dict[str, Any]]) -> loom.Agent:
    def respond(request: ModelRequest) -> loom.ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            return loom.ModelResponse.tool_calls([("send_mail", c) for c in calls], text="I will **send** it.")
        return loom.ModelResponse.text("Sent.")

    return loom.Agent(model=loom.ScriptedModel(respond), tools=[send_mail], name="mail")


async def paused(agent: loom.Agent) -> tuple[Run, RunView]:
    run = agent.start("mail the team", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    return run, view


CALL = {"urgent": True, "body": NOTE, "to": "team@example.com", "subject": "Build"}


async def test_the_card_shows_the_arguments_in_signature_order_by_type_with_the_description() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert isinstance(card, ApprovalCard)
    title, args = html.unescape(card.children[0].value), html.unescape(card.children[1].value)
    assert "Send an e-mail." in title and "send_mail" in title and "#turn" not in title
    names = [line.split("</th>")[0].rsplit(">", 1)[1] for line in args.split("<th")[1:]]
    assert names == ["to", "subject", "body", "urgent"]  # the signature's order, not alphabetical
    assert f"<pre class='loom-arg-text'>{NOTE}</pre>" in args  # real newlines, not a literal \n
    assert "<code>true</code>" in args and "title='The recipient.'" in args
    assert html.unescape(card.status.value) == "Waiting for your approval"
    assert "suspended" not in title
    card.approve.click()
    await run
    hidden = [c for c in card.children if c.layout.display == "none"]
    assert len(hidden) == len(card.children) - 2  # collapsed: the status line (and the feedback widget)
    assert "Approved at " in card.status.value and "send_mail(to=" in html.unescape(card.status.value)
    assert "loom-collapsed" in card._dom_classes
    # the one-line forms (the collapsed card, the tool row) show a line break as ↵, not a literal \n
    one_line = "body='Dear team,↵the build is green.↵↵- Ann'"
    assert one_line in html.unescape(card.status.value) and "\\n" not in card.status.value
    (row,) = view.tool_rows.values()
    assert one_line in html.unescape(row.widget.value) and "\\n" not in row.widget.value


async def test_edit_mode_runs_the_edited_arguments_and_the_model_is_told() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert isinstance(card, ApprovalCard) and card.form.layout.display == "none"
    card.edit.click()
    assert card.editing and card.form.layout.display == "" and card.approve.description == "Approve edited"
    form = card.form
    assert list(form.fields) == ["to", "subject", "body", "urgent"]
    assert type(form.fields["body"]).__name__ == "Textarea" and type(form.fields["urgent"]).__name__ == "Checkbox"
    form.fields["to"].value = "ann@example.com"
    form.fields["urgent"].value = False
    card.approve.click()
    assert (await run).output == "Sent."
    state = RunState.fold(run.runtime.journal.read(run.id))
    assert state.steps["#turn:0:tool:0"].input == {**CALL, "to": "ann@example.com", "urgent": False}
    assert state.gates["#turn:0:tool:0:approval"].payload["arguments"] == CALL  # the original, kept
    assert card.decision is not None and card.decision.startswith("approved with edited arguments at ")
    next_turn = state.steps["#turn:1"].input
    assert "a person edited this call before approving it" in str(next_turn)


async def test_a_bad_edit_is_refused_on_the_card_and_the_card_stays_usable() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert isinstance(card, ApprovalCard)
    card.edit.click()
    form = card.form
    form.fields["to"].value = "x"
    bad = ArgumentForm({"tags": ["a"]}, {})
    bad.fields["tags"].value = "[not json"
    with pytest.raises(ValueError, match="argument 'tags' is not valid JSON"):
        bad.values()
    card.edit.click()  # cancel the edit: Approve runs the model's arguments again
    assert not card.editing and card.approve.description == "Approve"
    card.approve.click()
    await run
    assert RunState.fold(run.runtime.journal.read(run.id)).steps["#turn:0:tool:0"].input == CALL


async def test_approve_all_answers_every_gate_of_the_turn() -> None:
    calls = [{**CALL, "to": f"p{i}@example.com"} for i in range(3)]
    run, view = await paused(mail_agent(calls))
    block = view.blocks[0]
    group = block.approvals
    assert isinstance(group, TurnApprovals) and len(group.cards) == 3
    assert group.bar.layout.display == "" and "3 calls wait for your approval" in group.bar.children[0].value
    group.approve_all.click()  # asks first
    assert group.confirm.asking and "Approve all 3 calls?" in group.confirm.question.value
    assert group.confirm.yes.description == "Approve 3 calls" and group.approve_all.disabled
    assert all(c.decision is None for c in group.cards)
    group.confirm.no.click()  # Cancel: nothing decided, the buttons back
    assert not group.confirm.asking and not group.approve_all.disabled and all(c.decision is None for c in group.cards)
    group.approve_all.click()
    group.confirm.yes.click()
    assert (await run).output == "Sent."
    assert all(c.decision is not None and c.decision.startswith("approved at") for c in group.cards)
    assert group.bar.layout.display == "none"


async def test_refuse_all_refuses_every_gate() -> None:
    run, view = await paused(mail_agent([CALL, {**CALL, "to": "b@example.com"}]))
    group = view.blocks[0].approvals
    assert group is not None
    group.refuse_all.click()
    assert "Refuse all 2 calls?" in group.confirm.question.value and group.confirm.yes.button_style == "danger"
    group.confirm.yes.click()
    await run
    assert all(c.decision is not None and c.decision.startswith("refused") for c in group.cards)


async def test_a_card_whose_gate_is_no_longer_open_says_so_and_is_disabled() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert isinstance(card, ApprovalCard)
    card.close("closed: the run cancelled")
    assert card.approve.disabled and card.refuse.disabled and card.edit.disabled
    assert "Closed: the run cancelled" in card.status.value and "loom-closed" in card._dom_classes
    assert card.text() == "gate #turn:0:tool:0:approval: closed: the run cancelled"
    card.approve.click()  # does nothing
    assert run.status == "suspended" and card.decision is None


async def test_the_view_is_chronological_with_the_answer_once() -> None:
    t = TidyAgent()
    run = t.agent.start("tidy", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    view.cards["#turn:1:tool:0:approval"].approve.click()  # type: ignore[attr-defined]
    await run
    view.flush()
    assert list(view.blocks) == [0, 1, 2]
    first, second, last = view.blocks.values()
    assert "Let me look." in first.body.value and [r for r in first.tools.children]
    assert "Deleting it." in second.body.value and [r for r in second.tools.children]
    # its decided card folded into its tool row: the card and its turn's approvals box are gone
    assert second.approvals is None and not second.cards.children
    # turn by turn: text, then its tools, then its cards
    assert first.children.index(first.body) < first.children.index(first.tools) < first.children.index(first.cards)
    assert last.body.layout.display == "none" and "Done. I removed the stale file." in view.answer.value
    assert last.layout.display == "none"  # nothing but the answer: the block is left out
    assert "loom-capped" in view.body._dom_classes
    view.expand.click()
    assert "loom-capped" not in view.body._dom_classes and view.expand.description == "Cap height"


def test_markdown_is_rendered_and_sanitized() -> None:
    out = markdown_html("**bold** and `code`\n\n<script>alert(1)</script> [x](javascript:alert(1))")
    assert "<strong>bold</strong>" in out and "<code>code</code>" in out
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert 'href="javascript' not in out


# -- palette ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_palette_colour_has_aa_contrast_on_its_theme(theme: str) -> None:
    background = BACKGROUND[theme]
    for role, colour in THEMES[theme].items():
        assert contrast_ratio(colour, background) >= 4.5, (theme, role, colour)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_filled_button_has_aa_contrast_and_the_views_use_it(theme: str) -> None:
    for style, (fill, text) in BUTTONS[theme].items():
        assert contrast_ratio(text, fill) >= 4.5, (theme, style, fill, text)
    sheet = css()
    for style in BUTTONS[theme]:
        assert f".loom-run .jupyter-button.mod-{style}," in sheet and f"var(--loom-button-{style}-text)" in sheet
    assert contrast_ratio("#ffffff", "#388e3c") < 4.5 and contrast_ratio("#ffffff", "#f57c00") < 4.5  # JupyterLab's


def test_contrast_ratio_matches_wcag_reference_values() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # a known WCAG example
    assert contrast_ratio("#ef6c00", "#ffffff") < 4.5  # the old hard-coded orange the issue measured
    assert parse_color("rgb(17, 17, 17)") == parse_color("#111")


def test_css_defines_both_themes_and_the_view_uses_it() -> None:
    sheet = css()
    assert sheet.count("--loom-failed") == 2 and "data-jp-theme-light='false'" in sheet
    assert set(LIGHT) == set(DARK)
    from loom_nb.notebook import run_view

    assert "#ef6c00" not in run_view.STYLE and "var(--loom-failed)" in run_view.STYLE


# -- click feedback -----------------------------------------------------------------------------------
async def test_every_card_has_click_feedback_that_the_kernel_acknowledges() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert SCOPE_CLASS in card._dom_classes and isinstance(card.feedback, ClickFeedback)
    assert card.feedback.own_id == card.feedback.model_id  # the page finds its model (is it live?) by it
    before = card.feedback.acked
    card.approve.click()
    assert card.feedback.acked == before + 1
    await run


def test_the_click_feedback_module_ships_with_the_package() -> None:
    js = (asset_dir() / "click_feedback.js").read_text(encoding="utf-8")
    assert "export default" in js and "loom-feedback-scope" in js and "kernel is busy" in js
    assert "comm_live" in js and "%loom pending" in js
    assert '"widgets" = "loom_nb/_widgets"' in (REPO / "pyproject.toml").read_text(encoding="utf-8")


def test_ordered_arguments_puts_unknown_names_last() -> None:
    schema = {"properties": {"b": {}, "a": {}}}
    assert ordered_arguments({"z": 1, "a": 2, "b": 3}, schema) == [("b", 3), ("a", 2), ("z", 1)]


async def test_the_answer_is_shown_once_even_when_the_last_text_was_rendered_before_the_end() -> None:
    t = TidyAgent()
    run = t.agent.start("tidy", runtime=make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    run.gates[0].approve()
    await run.wait(until="settled")
    view.blocks[2].set_text(view.blocks[2].text)  # as if the last refresh ran while the run was running
    view.blocks[2].body.layout.display = ""
    view._on_change(run)  # the completion seen again: the view settles once more
    assert view.blocks[2].body.layout.display == "none"


async def test_every_input_of_a_card_has_a_label_not_only_a_placeholder() -> None:
    run, view = await paused(mail_agent([CALL]))
    (card,) = view.cards.values()
    assert isinstance(card, ApprovalCard)
    assert card.reason.description == "Reason" and card.reason.placeholder.startswith("optional")
    assert [f.description for f in card.form.fields.values()] == ["to", "subject", "body", "urgent"]
    card.approve.click()
    await run
