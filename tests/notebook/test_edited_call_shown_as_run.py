"""Edit, then approve: every view says the call ran with the edited arguments, the model's beside
them (the row's diff, the folded card, ``frames().tool_calls()``, the timeline, the trace spans), and
the rebuilt request tells the model what ran. ``agent/tool_calls.py`` owns the rule."""

from __future__ import annotations

import loom_nb as loom
from loom_nb.agent import rebuild_requests
from loom_nb.journal.canonical import digest_value
from loom_nb.notebook.cards import ApprovalCard
from loom_nb.notebook.run_view import RunView
from loom_nb.notebook.timeline import TimelineWidget
from loom_nb.tracing.spans import span_specs
from tests.notebook.support import TidyAgent, make_runtime
from tests.notebook.test_notebook_view import GATE, paused_view

STEP = "#turn:1:tool:0"
MODEL = {"path": "/tmp/x/stale.log"}
EDITED = {"path": "/tmp/x/renamed.log"}
ROW = (
    "  tool delete_file(path='/tmp/x/renamed.log') done, approved with edited arguments "
    "[edited: path: '/tmp/x/stale.log' → '/tmp/x/renamed.log'] -> deleted /tmp/x/renamed.log"
)


async def edited_run() -> tuple[loom.Runtime, loom.Run, RunView, TidyAgent]:
    t, rt = TidyAgent(), make_runtime()
    run, view = await paused_view(t, rt)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    card.toggle_edit()
    card.form.fields["path"].value = EDITED["path"]
    card.approve.click()
    await run
    assert t.deleted == [EDITED["path"]]
    return rt, run, view, t


async def test_the_row_and_a_rebuilt_view_show_the_edited_arguments_and_the_change() -> None:
    _, run, view, _ = await edited_run()
    assert ROW in view.text().splitlines()
    assert ROW in RunView(run).text().splitlines()  # rebuilt from the journal alone
    row = view.tool_rows[STEP]
    assert row.arguments == EDITED and row.requested == MODEL
    assert "renamed.log" in row.widget.value and "stale.log" in row.widget.value  # the diff in the row


async def test_the_folded_card_says_what_ran() -> None:
    _, _, view, _ = await edited_run()
    card = view.cards[GATE]
    assert card.summary() == (
        "delete_file(path='/tmp/x/renamed.log') [edited: path: '/tmp/x/stale.log' → '/tmp/x/renamed.log']"
    )


async def test_frames_timeline_spans_and_requests_name_the_edited_arguments() -> None:
    rt, run, _, _ = await edited_run()
    calls = loom.frames(rt).tool_calls(run.id)
    edited = calls[calls["step_id"] == STEP].iloc[0]
    assert (edited["arguments"], edited["requested_arguments"], edited["edited"]) == (EDITED, MODEL, True)
    assert edited["status"] == "completed" and edited["result_preview"] == "deleted /tmp/x/renamed.log"
    assert not calls[calls["step_id"] != STEP]["edited"].any()

    timeline = TimelineWidget(run.id, rt)
    (label,) = [b["label"] for b in timeline.bars if b["id"] == STEP]
    assert label == f"{STEP} delete_file(path='/tmp/x/renamed.log') · edited"
    timeline.stop()

    events = rt.journal.read(run.id)
    specs = {s.key: s for s in span_specs(events)}
    for key in (("step", STEP), ("gate", GATE)):
        attributes = specs[key].attributes
        assert attributes["loom.tool.edited"] is True, key
        assert attributes["loom.tool.arguments_digest"] == digest_value(EDITED)
        assert attributes["loom.tool.requested_arguments_digest"] == digest_value(MODEL)
    assert "loom.tool.edited" not in specs[("step", "#turn:0:tool:0")].attributes

    request = rebuild_requests(events)["#turn:2"]
    told = [m.text for m in request.messages if m.role == "tool"][-1]
    assert '{"path":"/tmp/x/renamed.log"}' in told and told.endswith("deleted /tmp/x/renamed.log")
