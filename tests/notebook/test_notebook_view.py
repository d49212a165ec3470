"""The live run view: cards that resume runs through the public ``Gate`` API, text fallbacks,
throttled streaming that keeps every delta, and the step timeline (no kernel: ``Button.click()``
runs the same handlers a browser click does)."""

from __future__ import annotations

import asyncio
import html
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent.run import Run
from loom_nb.journal import digest_value
from loom_nb.kernel import ExecutionContext
from loom_nb.messages import ModelRequest
from loom_nb.notebook.cards import ApprovalCard, GateCard, InDoubtCard
from loom_nb.notebook.run_view import RunView
from loom_nb.notebook.throttle import Throttle
from loom_nb.notebook.timeline import TimelineWidget, asset_dir, timeline
from tests.agent.support import tidy_tools
from tests.notebook.support import TidyAgent, folded_away, last_tool_text, make_runtime

GATE = "#turn:1:tool:0:approval"
TASK = "Remove the stale files in /tmp/x"


def resolutions(run: Run) -> list[tuple[str | None, Any]]:
    return [(e.step_id, e.data["payload"]) for e in run.runtime.journal.read(run.id) if e.kind == "gate_resolved"]


async def paused_view(t: TidyAgent, rt: loom.Runtime | None = None) -> tuple[Run, RunView]:
    run = t.agent.start(TASK, runtime=rt or make_runtime())
    view = RunView(run)
    await run.wait(until="paused")
    assert run.status == "suspended"
    return run, view


# -- approval cards ------------------------------------------------------------------------------
async def test_approve_click_resumes_the_run_and_disables_the_card() -> None:
    t = TidyAgent()
    run, view = await paused_view(t)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    assert "loom-approve" in card.approve._dom_classes and "loom-refuse" in card.refuse._dom_classes
    assert "loom-card" in card._dom_classes and "loom-reason" in card.reason._dom_classes
    args = html.unescape(card.children[1].value)  # a table in the tool's parameter order
    assert "<th title='The file.'>path</th><td><code>/tmp/x/stale.log</code></td>" in args
    assert "Waiting for your approval" in card.status.value
    card.approve.click()
    assert card.approve.disabled and card.refuse.disabled and card.reason.disabled
    card.approve.click()  # a double click cannot resume twice
    card.refuse.click()
    result = await run
    assert result.output == "Done. I removed the stale file."
    assert t.deleted == ["/tmp/x/stale.log"]
    # the approval is bound to the digest of the arguments the card showed
    assert resolutions(run) == [(GATE, {"approved": True, "reason": None, "digest": digest_value(card.gate.arguments)})]
    assert card.decision is not None and card.decision.startswith("approved at ")
    assert "Approved at" in card.status.value
    assert "completed" in view.status.value and "loom-run-status" in view.status._dom_classes
    assert "Done. I removed the stale file." in view.answer.value and "loom-answer" in view.answer._dom_classes
    assert view.progress.value == 3 and view.progress.bar_style == "success"
    assert "usage: " in view.usage.value


async def test_refuse_with_a_reason_reaches_the_model() -> None:
    t = TidyAgent()
    run, view = await paused_view(t)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    card.reason.value = "  it is still in use  "
    card.refuse.click()
    result = await run
    assert t.deleted == []
    assert last_tool_text(t.model.history[-1]) == "The user refused to run delete_file. Reason: it is still in use"
    assert result.output == "Understood: The user refused to run delete_file. Reason: it is still in use"
    assert resolutions(run) == [(GATE, {"approved": False, "reason": "it is still in use"})]
    assert card.decision is not None and card.decision.startswith("refused (it is still in use) at ")
    assert "refused" in view.tool_rows["#turn:1:tool:0"].text()


async def test_a_second_card_clicked_while_the_run_moves_waits_for_its_gate() -> None:
    t = TidyAgent(paths=("/tmp/x/a", "/tmp/x/b"))
    run, view = await paused_view(t)
    first, second = view.cards.values()
    assert isinstance(first, ApprovalCard) and isinstance(second, ApprovalCard)
    first.approve.click()
    assert run.status == "running"  # the resume is a task on the loop
    second.approve.click()
    assert "waiting for the run" in second.status.value
    await run
    assert t.deleted == ["/tmp/x/a", "/tmp/x/b"]
    assert [gid for gid, _ in resolutions(run)] == ["#turn:1:tool:0:approval", "#turn:1:tool:1:approval"]
    assert first.decided and second.decided and second.decision is not None


async def test_a_gate_resolved_from_code_updates_its_card() -> None:
    t = TidyAgent()
    run, view = await paused_view(t)
    run.gates[0].approve("from a cell")
    await run
    card = view.cards[GATE]
    assert card.approve.disabled and card.decision is not None
    assert card.decision.startswith("approved (from a cell) at ")


async def test_an_error_on_click_shows_on_the_card_and_reenables_it() -> None:
    t = TidyAgent()
    run, view = await paused_view(t)
    card = view.cards[GATE]
    assert isinstance(card, ApprovalCard)
    card.gate.resolution = "taken"  # as if this Gate object had been resolved already
    card.approve.click()
    assert "UsageError: gate '#turn:1:tool:0:approval' of execution" in html.unescape(card.status.value)
    assert "is already decided: answered" in html.unescape(card.status.value)
    assert not card.approve.disabled and not card.decided
    card.gate.resolution = None
    card.approve.click()
    await run
    assert run.status == "completed"


# -- in-doubt cards ------------------------------------------------------------------------------
class Crash(BaseException):
    """Stands for the process dying in the middle of a tool call."""


InDoubt = tuple[Run, RunView, InDoubtCard, list[int]]


@pytest.fixture
async def in_doubt(rt: loom.Runtime) -> InDoubt:
    """A run whose non-idempotent tool was cut in flight, recovered onto an InDoubt gate: the run, its
    view, the view's in-doubt card and the amounts the tool was called with."""
    calls: list[int] = []

    @loom.tool
    def charge(amount: int) -> str:
        """Charge a card (not idempotent)."""
        calls.append(amount)
        if len(calls) == 1:
            raise Crash
        return f"charged {amount}"

    def respond(request: ModelRequest) -> loom.ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            return loom.ModelResponse.tool_calls([("charge", {"amount": 5})], text="Charging.")
        return loom.ModelResponse.text(f"Result: {last_tool_text(request)}")

    agent = loom.Agent(model=loom.ScriptedModel(respond), tools=[charge], name="pay")
    crashed = agent.start("charge 5", runtime=rt)
    await crashed.wait()
    assert isinstance(crashed.exception(), Crash)
    assert rt.journal.get_execution(crashed.id).status == "running"  # type: ignore[union-attr]
    (state,) = await rt.recover()
    assert state.status == "suspended"
    run = agent.attach(crashed.id, runtime=rt)
    view = RunView(run)
    card = view.cards["#turn:0:tool:0:in_doubt"]
    assert isinstance(card, InDoubtCard)
    assert "loom-in-doubt" in card._dom_classes and "in doubt" in view.tool_rows["#turn:0:tool:0"].text()
    return run, view, card, calls


async def test_in_doubt_happened_records_the_output(in_doubt: InDoubt) -> None:
    run, _, card, calls = in_doubt
    card.output.value = '"receipt-7"'
    card.happened.click()
    assert card.happened.disabled and card.run_again.disabled and card.fail.disabled
    result = await run
    assert result.output == "Result: receipt-7" and calls == [5]  # not charged twice
    assert card.decision is not None and card.decision.startswith("marked as happened (output receipt-7)")


async def test_in_doubt_run_again_invokes_the_tool_again(in_doubt: InDoubt) -> None:
    run, _, card, calls = in_doubt
    card.run_again.click()
    result = await run
    assert result.output == "Result: charged 5" and calls == [5, 5]
    assert card.decision is not None and card.decision.startswith("run again at ")


async def test_in_doubt_fail_records_a_failed_step(in_doubt: InDoubt) -> None:
    run, view, card, calls = in_doubt
    card.reason.value = "the provider has no record"
    card.fail.click()
    result = await run
    assert calls == [5]
    assert result.output.startswith("Result: Error: the tool 'charge' failed: InDoubtError")
    assert "the provider has no record" in result.output
    assert card.decision is not None and card.decision.startswith("marked as failed (the provider has no record)")
    assert "failed" in view.tool_rows["#turn:0:tool:0"].text()


async def test_a_custom_gate_gets_a_json_resume_card(rt: loom.Runtime) -> None:

    async def ask(ctx: ExecutionContext, input: Any) -> Any:
        answer = await ctx.gate("question", "Question", payload={"q": input})
        return {"answer": answer}

    rt.flows.register(ask, "ask")
    state = await rt.start("ask", "how many?")
    run = Run.attach(rt, state.execution_id)
    view = RunView(run)
    card = view.cards["question"]
    assert type(card) is GateCard and '"q": "how many?"' in html.unescape(card.children[1].value)
    card.payload_box.value = '{"n": 42}'
    card.buttons[0].click()
    await run.wait()
    assert run.status == "completed"
    assert run.runtime.result(run.id).output == {"answer": {"n": 42}}


# -- failures and text fallbacks -----------------------------------------------------------------
async def test_a_failing_run_shows_its_error() -> None:
    def respond(request: ModelRequest) -> loom.ModelResponse:
        raise ValueError("the model is down: check the API key")

    agent = loom.Agent(model=loom.ScriptedModel(respond), name="broken", model_retry=None)
    run = agent.start("hello", runtime=make_runtime())
    view = RunView(run)
    with pytest.raises(ValueError, match="the model is down"):
        await run
    assert isinstance(run.exception(), ValueError)
    assert "failed" in view.status.value and view.progress.bar_style == "danger"
    assert "ValueError: the model is down: check the API key" in view.error.value
    assert "  error: ValueError: the model is down: check the API key" in view.text()


async def test_text_fallbacks() -> None:
    t = TidyAgent()
    run, view = await paused_view(t)
    text = view.text()
    assert text.splitlines()[0] == f"loom run {run.id} (agent:tidy): suspended, turn 2/20"
    assert "  Let me look.\n  Deleting it." in text
    assert "  tool search(query='stale') done" in text
    assert (
        f"<Gate {GATE}: approve delete_file(path='/tmp/x/stale.log')?> -> "
        f"%loom resume {run.id} '{GATE}' --approve | --refuse [--reason R]"
    ) in text
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == text and len(text) > 110  # whole, not cut at 110 characters
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == view.model_id
    card = view.cards[GATE]
    assert repr(card).startswith(f"ApprovalCard(<Gate {GATE}: approve delete_file(")
    assert card._repr_mimebundle_()["text/plain"] == repr(card)
    card.approve.click()
    await run
    text = view.text()
    # the decided card folds into its tool row (no clock times in the text form)
    assert "  tool delete_file(path='/tmp/x/stale.log') done, approved -> deleted /tmp/x/stale.log\n" in text
    assert f"gate {GATE}" not in text and GATE in view.folded and folded_away(view, card)
    row = html.unescape(view.tool_rows["#turn:1:tool:0"].widget.value)
    assert "<span class='loom-decision'>· approved at " in row
    assert "  answer: Done. I removed the stale file." in text
    assert "  usage: " in text and "over 3 model call(s)" in text


# -- streaming and throttling --------------------------------------------------------------------
def test_throttle_coalesces_and_keeps_the_last_request() -> None:
    now = [0.0]
    calls: list[float] = []
    throttle = Throttle(lambda: calls.append(now[0]), interval=0.05, clock=lambda: now[0])
    throttle.request()
    for t in (0.01, 0.02, 0.03):
        now[0] = t
        throttle.request()
    assert calls == [0.0] and throttle.pending
    now[0] = 0.06
    throttle.request()
    assert calls == [0.0, 0.06] and not throttle.pending
    now[0] = 0.07
    throttle.request()
    throttle.flush()
    assert calls == [0.0, 0.06, 0.07]
    throttle.flush()
    assert len(calls) == 3


async def test_throttle_schedules_the_trailing_refresh_on_the_loop() -> None:
    calls: list[int] = []
    throttle = Throttle(lambda: calls.append(1), interval=0.02)
    for _ in range(1000):
        throttle.request()
    assert len(calls) == 1
    await asyncio.sleep(0.06)
    assert len(calls) == 2 and not throttle.pending


@pytest.mark.slow
async def test_view_keeps_every_delta_but_refreshes_at_most_20_times_a_second() -> None:
    view = RunView(Run(make_runtime(), "stream-1"))
    deltas = [f"w{i} " for i in range(10_000)]
    for i, d in enumerate(deltas):
        view.on_delta("stream-1", f"#turn:{i // 5000}", d)
    assert view.deltas == 10_000 and view.refreshes == 1
    await asyncio.sleep(0.1)
    assert view.refreshes == 2
    expected = "".join(deltas[:5000]) + "\n" + "".join(deltas[5000:])
    assert view.text_so_far == expected
    assert [view.blocks[t].text for t in (0, 1)] == ["".join(deltas[:5000]), "".join(deltas[5000:])]
    # a slow stream: 60 deltas over ~0.6 s refresh at most ~20 times a second
    before = view.refreshes
    loop = asyncio.get_running_loop()
    began = loop.time()
    for i in range(60):
        view.on_delta("stream-1", "#turn:2", f"s{i} ")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.06)
    elapsed = loop.time() - began
    assert view.refreshes - before <= elapsed / 0.05 + 2
    assert view.text_so_far.endswith("".join(f"s{i} " for i in range(60)))


async def test_a_live_run_streams_every_word_into_the_view() -> None:
    t = TidyAgent(delta_delay=0.001)
    run, view = await paused_view(t)
    view.cards[GATE].approve.click()  # type: ignore[attr-defined]
    await run
    assert view.text_so_far == "Let me look.\nDeleting it.\nDone. I removed the stale file."
    assert view.deltas == 11  # one per word
    # per turn, in order, as Markdown; the last turn's text is the answer, shown once (in the answer)
    assert [b.body.value for b in view.blocks.values()][:2] == [
        "<div class='loom-markdown'><p>Let me look.</p>\n</div>",
        "<div class='loom-markdown'><p>Deleting it.</p>\n</div>",
    ]
    assert view.blocks[2].body.layout.display == "none"
    assert view.answer.value.count("Done. I removed the stale file.") == 1


async def test_an_attached_view_rebuilds_from_the_journal() -> None:
    t = TidyAgent()
    rt = make_runtime()
    run, _ = await paused_view(t, rt)
    view = RunView(Run.attach(rt, run.id, agent=t.agent))  # as %loom show / pending after a restart
    assert view.text_so_far == "Let me look.\nDeleting it."  # from the journal's stream chunks
    assert list(view.tool_rows) == ["#turn:0:tool:0", "#turn:1:tool:0"]
    assert view.turn == 2 and view.progress.value == 2 and list(view.cards) == [GATE]


# -- timeline ------------------------------------------------------------------------------------
async def test_timeline_follows_the_run() -> None:
    assert (asset_dir() / "timeline.js").read_text().count("export default") == 1
    t = TidyAgent()
    rt = make_runtime()
    run = t.agent.start(TASK, runtime=rt)
    await run.wait(until="paused")
    widget = timeline(run.id, runtime=rt)
    assert isinstance(widget, TimelineWidget) and widget.status == "suspended"
    assert [(b["id"], b["kind"]) for b in widget.bars] == [
        ("#turn:0", "model"),
        ("#turn:0:tool:0", "tool"),
        ("#turn:1", "model"),
        (GATE, "gate"),
    ]
    assert widget.bars[-1]["end"] is None and widget.bars[-1]["status"] == "waiting"
    run.gates[0].approve()
    await run
    await asyncio.sleep(0.06)
    assert widget.status == "completed"
    assert [b["kind"] for b in widget.bars] == ["model", "tool", "model", "gate", "tool", "model"]
    assert all(b["end"] is not None and b["end"] >= b["start"] for b in widget.bars)
    text = repr(widget)
    assert text.startswith(f"timeline {run.id}: completed, 6 bar(s) over ") and "█" in text
    data, _ = widget._repr_mimebundle_()
    assert data["text/plain"] == text
    with pytest.raises(loom.UsageError, match="no execution 'nope'"):
        timeline("nope", runtime=rt)


# -- sessions ------------------------------------------------------------------------------------
async def test_a_session_run_shows_its_session_and_its_card_resumes_it() -> None:
    deleted: list[str] = []
    search, delete_file = tidy_tools(deleted)

    def respond(request: ModelRequest) -> loom.ModelResponse:
        if request.messages[-1].role == "user":  # each new message: delete one file (a gate)
            return loom.ModelResponse.tool_calls([("delete_file", {"path": f"/tmp/{len(deleted)}"})])
        return loom.ModelResponse.text(f"{sum(m.role == 'user' for m in request.messages)} message(s) done")

    model = loom.ScriptedModel(respond)
    agent = loom.Agent(model=model, tools=[search, delete_file], name="chat")
    rt = make_runtime()
    session = agent.session("t", runtime=rt)
    views = []
    for i, message in enumerate([TASK, "And the other folder?"]):
        run = session.start(message)
        view = RunView(run)  # watching live, before the run's first event commits
        views.append(view)
        await run.wait(until="paused")
        label = f"session t, run {i}: " + ("continues session:chat:t:0" if i else "its first run")
        assert label in html.unescape(view.session.value) and "loom-session" in view.session._dom_classes
        assert view.text().splitlines()[1] == "  " + label
        (card,) = view.cards.values()
        card.approve.click()
        assert (await run).output == f"{i + 1} message(s) done"
        assert "completed" in view.status.value
    assert deleted == ["/tmp/0", "/tmp/1"]
    again = RunView(Run.attach(rt, "session:chat:t:1", agent=agent))  # read back from the journal
    assert again.text().splitlines()[1] == "  session t, run 1: continues session:chat:t:0"
    for v in [*views, again]:
        v.close()


# -- typed output --------------------------------------------------------------------------------------
async def test_the_live_view_shows_a_typed_answer_as_json_with_its_type() -> None:
    from pydantic import BaseModel

    class Forecast(BaseModel):
        """A forecast."""

        city: str
        celsius: int

    model = loom.ScriptedModel(
        [
            loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": "cold"})]),
            loom.ModelResponse.tool_calls([("final_result", {"city": "Oslo", "celsius": 4})]),
        ]
    )
    agent = loom.Agent(model, output_type=Forecast, name="typed-view")
    run = agent.start("Forecast?", runtime=make_runtime())
    view = RunView(run)
    result = await run
    assert result.output == Forecast(city="Oslo", celsius=4)
    shown = html.unescape(view.answer.value)
    assert 'Forecast {\n  "city": "Oslo",\n  "celsius": 4\n}' in shown
    assert 'answer: Forecast {"city":"Oslo","celsius":4}' in view.text()
    assert "completed" in view.status.value
    assert repr(run).endswith('output=Forecast {"city":"Oslo","celsius":4}>')
