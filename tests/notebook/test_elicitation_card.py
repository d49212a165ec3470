"""The card of an MCP server's question (``loom_nb/notebook/elicitation_card.py``): shown in the live
view while the server's call waits, a form built from the requested schema (in the server's order),
a wrong answer shown on the card naming the field, Submit sending the answer; against the real MCP
server of ``tests/effects/mcp_elicit_server.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import ipywidgets as widgets
import pytest

from loom_nb.notebook.elicitation_card import NOTHING_CHOSEN, ElicitationCard
from loom_nb.notebook.run_view import RunView
from tests.effects.support import calls, mcp_runtime, scripted_agent, tool_texts
from tests.effects.test_mcp_elicitation import booking_tools, question_of, server_calls


@pytest.mark.slow
async def test_the_card_is_a_form_of_the_requested_schema_and_submit_answers_the_server(tmp_path: Path) -> None:
    rt = mcp_runtime()
    bot, model = scripted_agent(booking_tools(tmp_path, "book"), calls(("book", {"room": "12"})))
    run = bot.start("book room 12", runtime=rt)
    view = RunView(run)
    gate = await question_of(run)
    card = view.cards[gate.gate_id]  # shown while the run moves: the call waits for it
    assert isinstance(card, ElicitationCard)
    assert run.status == "running"
    title = card.children[0].value
    assert "asks</b> (during <code>book</code>)" in title and "Which day for 12?" in card.children[1].value
    assert list(card.fields) == ["day", "nights", "breakfast", "view"]  # the server's order, not sorted
    day, nights, breakfast, view_field = card.fields.values()
    assert isinstance(day, widgets.Text) and day.description == "Day *" and day.placeholder == "Day of arrival"
    assert isinstance(nights, widgets.Text) and nights.value == "1"
    assert isinstance(breakfast, widgets.Checkbox) and breakfast.value is False
    assert isinstance(view_field, widgets.Dropdown)
    assert [label for label, _ in view_field.options] == [NOTHING_CHOSEN, "sea", "garden"]
    assert view_field.value == "garden"

    nights.value = "two"
    card.submit.click()  # no day, nights not a number: refused on the card, nothing recorded
    assert not card.decided
    assert "field day is required" in card.status.value.replace("&#x27;", "")
    assert "nights" in card.status.value and "is not of type" in card.status.value
    assert server_calls(tmp_path) == ["ask 12"]

    day.value, nights.value, breakfast.value, view_field.value = "monday", "3", True, "sea"
    card.submit.click()
    async with asyncio.timeout(60):
        await run
    assert run.status == "completed"
    assert "booked 12 on monday for 3 night(s), breakfast True, sea view" in tool_texts(model)[0]
    assert card.decided and "answered" in card.text()
    rt.close()
