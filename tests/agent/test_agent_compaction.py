"""Compaction, the transcript growth warning, and ``chunk_deltas`` (``docs/design.md``, sections 6.7,
6.8 and 6.10).

The summary is a RECORDED step ``#turn:<i>:compact`` through the summarizer effect: journaled once,
served from the log on every re-run. The trigger (message count or running byte count) is a pure
function of journaled content, so a recovered run folds the same messages at the same point.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import (
    AgentConfig,
    AgentResult,
    Compaction,
    TranscriptGrowthWarning,
    chunk_deltas,
)
from loom_nb.agent.loop import SUMMARIZE_INSTRUCTION, _kept_suffix_by_bytes
from loom_nb.agent.transcript import SUMMARY_PREFIX
from loom_nb.errors import UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import Message, ModelRequest, ModelResponse, message_bytes
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import (
    MODEL,
    SUMMARIZER,
    BatchJournal,
    assert_rebuilt_matches,
    calls,
    events,
    install,
    make_runtime,
    prefix_journal,
    register_model,
    run_agent,
    step_ids,
    summarizer_model,
)


def note_tool(size: int = 0, *, idempotent: bool = False) -> loom.Tool:
    @loom.tool(idempotent=idempotent)
    def note(n: int, pad: int = 0) -> str:
        """Return note n (padded to ``pad`` characters)."""
        return f"note {n} ".ljust(max(size, pad), ".")

    return note


def noting(turns: int, *, pads: Sequence[int] = ()) -> ScriptedModel:
    """Calls ``note`` once per turn for ``turns`` turns (turn i padded to pads[i]), then answers.

    The turn is read from the newest message (which every fold keeps), never from a call count, so
    a fresh model in a recovering runtime answers as the first one would have.
    """

    def respond(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        i = int(last.text.split()[1]) + 1 if last.role == "tool" else 0
        if i >= turns:
            return ModelResponse.text("all noted")
        return calls(("note", {"n": i, "pad": pads[i] if i < len(pads) else 0}), text=f"step {i}")

    return ScriptedModel(respond)


def compact_steps(rt: Any, eid: str) -> list[str]:
    return list(dict.fromkeys(sid for sid in step_ids(rt, eid) if sid.endswith(":compact")))


def started(rt: Any, eid: str, sid: str) -> dict[str, Any]:
    """The data of a step's step_started (every attempt journals the same input)."""
    attempts = [e.data for e in events(rt, eid, EventKind.STEP_STARTED) if e.step_id == sid]
    assert attempts, f"no step {sid!r}"
    assert all(a["input"] == attempts[0]["input"] for a in attempts)
    return attempts[0]


# -- folding by message count ----------------------------------------------------------------------------
async def test_the_transcript_folds_past_after_messages_and_stops_tracking_conversation_length() -> None:
    model = noting(8)
    summarizer = summarizer_model()
    config = AgentConfig(
        model=MODEL,
        tools=[note_tool()],
        system="sys",
        compaction=Compaction(effect_id=SUMMARIZER, after_messages=6, keep_recent=2),
    )
    rt, result = await run_agent(config, model, summarizer=summarizer)
    eid = result.execution_id

    assert AgentResult.model_validate(result.output).output == "all noted"
    # sys + user, then two messages a turn until past 6 (system excluded); then bounded.
    assert [len(r.messages) for r in model.history] == [2, 4, 6, 4, 6, 4, 6, 4, 6]
    assert compact_steps(rt, eid) == ["#turn:3:compact", "#turn:5:compact", "#turn:7:compact"]
    # The first fold summarised the five oldest messages (the whole transcript but the newest two).
    before = model.history[2].messages
    assert len(summarizer.history) == 3
    assert summarizer.history[0].messages[0] == Message.system(SUMMARIZE_INSTRUCTION)
    assert summarizer.history[0].messages[1:] == before[1:]  # all but the system prompt...
    folded = model.history[3].messages
    assert folded[0] == Message.system("sys")
    assert folded[1] == Message(role="user", text=SUMMARY_PREFIX + "SUMMARY-1: 5 messages")
    assert [m.text for m in folded[2:]] == ["step 2", "note 2 "]
    assert [m.text for m in summarizer.history[0].messages[1:]] == [
        "hello",
        "step 0",
        "note 0 ",
        "step 1",
        "note 1 ",
    ]
    assert [m.text for m in before[-2:]] == ["step 1", "note 1 "]  # ...which was then answered by turn 2
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced
    assert len(summarizer.history) == 3


async def test_the_summary_is_its_own_recorded_compact_step_served_on_every_re_run() -> None:
    """Would fail with the summary computed inline: there would be no :compact step, the resume
    would ask the (drifting) summarizer again, and the re-sent turn would carry another summary."""
    wiped: list[str] = []

    @loom.tool(needs_approval=True)
    def wipe() -> str:
        """Destructive."""
        wiped.append("wiped")
        return "wiped"

    script = [*(calls(("note", {"n": i})) for i in range(3)), calls(("wipe", {})), ModelResponse.text("ok")]
    model = ScriptedModel(script)
    summarizer = summarizer_model()  # SUMMARY-1, SUMMARY-2...: a different text on every call
    config = AgentConfig(
        model=MODEL,
        tools=[note_tool(), wipe],
        compaction=Compaction(effect_id=SUMMARIZER, after_messages=5, keep_recent=2),
    )
    rt, result = await run_agent(config, model, summarizer=summarizer)
    eid = result.execution_id
    assert result.status == "suspended"

    data = started(rt, eid, "#turn:3:compact")
    assert data["effect"] == SUMMARIZER
    assert data["input"] == {
        "prev": "#turn:2",
        "add": [{"tool": 0}],  # event format 2: #turn:2's message is implied by prev; call 0's result
        "keep": 2,
        "keep_rule": 2,
    }
    (done,) = [e for e in events(rt, eid, EventKind.STEP_COMPLETED) if e.step_id == "#turn:3:compact"]
    assert done.data["output"]["message"]["text"] == "SUMMARY-1: 5 messages"
    assert started(rt, eid, "#turn:3")["input"] == {"prev": "#turn:3:compact", "add": []}

    resumed = await rt.resume(eid, "#turn:3:tool:0:approval", {"approved": True})
    assert resumed.status == "completed" and wiped == ["wiped"]
    assert len(summarizer.history) == 1  # served on the resume's re-run, never asked again
    summaries = [m.text for r in model.history for m in r.messages if m.text.startswith(SUMMARY_PREFIX)]
    assert summaries == [SUMMARY_PREFIX + "SUMMARY-1: 5 messages"] * 2  # turns 3 and 4
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced
    assert len(summarizer.history) == 1


async def test_an_unconfigured_loop_keeps_growing() -> None:
    model = noting(8)
    rt, result = await run_agent(AgentConfig(model=MODEL, tools=[note_tool()]), model)
    assert [len(r.messages) for r in model.history] == [1 + 2 * i for i in range(9)]
    assert compact_steps(rt, result.execution_id) == []


# -- folding by bytes -------------------------------------------------------------------------------------
async def test_an_oversized_tool_result_crosses_after_bytes_with_after_messages_unmet() -> None:
    model = noting(3, pads=[3000])
    summarizer = summarizer_model()
    compaction = Compaction(effect_id=SUMMARIZER, after_messages=50, after_bytes=2000, keep_recent=4)
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer)
    eid = result.execution_id

    big = "note 0 ".ljust(3000, ".")
    assert max(len(r.messages) for r in model.history) < 50  # the message trigger never fired
    assert compact_steps(rt, eid) == ["#turn:1:compact", "#turn:2:compact"]
    # Turn 1: the newest message alone is over the half budget: it is kept (floor of 1), and it is a
    # tool result, so the assistant message that called it comes too (the one exception to the cap).
    assert started(rt, eid, "#turn:1:compact")["input"]["keep"] == 2
    assert [m.role for m in model.history[1].messages] == ["user", "assistant", "tool"]
    assert model.history[1].messages[0].text.startswith("[Summary")
    assert model.history[1].messages[-1].text == big
    # Turn 2: the two small newest messages fit in after_bytes / 2, so the oversized one folds away.
    assert started(rt, eid, "#turn:2:compact")["input"]["keep"] == 2
    assert summarizer.history[1].messages[-1].text == big
    assert all(big not in [m.text for m in r.messages] for r in model.history[2:])
    assert_rebuilt_matches(rt, eid, model)


@pytest.mark.parametrize(
    "compaction",
    [
        Compaction(effect_id=SUMMARIZER, after_messages=50, after_bytes=100_000),
        Compaction(effect_id=SUMMARIZER, after_messages=50),
        Compaction(effect_id=SUMMARIZER, after_bytes=100_000),
    ],
    ids=["both", "messages", "bytes"],
)
async def test_below_both_thresholds_nothing_is_compacted(compaction: Compaction) -> None:
    model = noting(6)
    summarizer = summarizer_model()
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer)
    assert result.status == "completed"
    assert compact_steps(rt, result.execution_id) == []
    assert summarizer.history == []
    assert [len(r.messages) for r in model.history] == [1 + 2 * i for i in range(7)]


@pytest.mark.parametrize(
    "compaction",
    [
        Compaction(effect_id=SUMMARIZER, after_bytes=2000),
        Compaction(effect_id=SUMMARIZER, after_messages=0, keep_recent=1),
    ],
    ids=["bytes", "messages"],
)
async def test_a_single_message_alone_over_the_threshold_is_not_summarised(compaction: Compaction) -> None:
    model = ScriptedModel([ModelResponse.text("read it")])
    summarizer = summarizer_model()
    config = AgentConfig(model=MODEL, system="sys", compaction=compaction)
    rt, result = await run_agent(config, model, "x" * 5000, summarizer=summarizer)
    assert result.status == "completed"
    assert compact_steps(rt, result.execution_id) == []
    assert summarizer.history == []
    assert model.history[0].messages == (Message.system("sys"), Message.user("x" * 5000))


async def test_when_the_kept_suffix_is_every_message_the_fold_is_skipped() -> None:
    """A system prompt counts toward after_bytes but is never folded: with it alone over the
    threshold, the byte trigger fires while every other message fits in the kept suffix, and the loop
    skips rather than paying for a summary that folds nothing."""
    model = noting(2)
    summarizer = summarizer_model()
    compaction = Compaction(effect_id=SUMMARIZER, after_bytes=2000, keep_recent=8)
    config = AgentConfig(model=MODEL, tools=[note_tool()], system="s" * 3000, compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer)
    assert result.status == "completed"
    assert [len(r.messages) for r in model.history] == [2, 4, 6]
    assert compact_steps(rt, result.execution_id) == []
    assert summarizer.history == []


# -- the kept-suffix rule ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sizes", "budget", "keep_recent", "kept"),
    [
        ([100, 100, 100, 100], 250, 4, 2),  # the longest newest run within the budget
        ([100, 100, 150], 250, 4, 2),  # exactly at the budget is within it
        ([100, 100, 100, 100], 1000, 3, 3),  # at most keep_recent
        ([100, 5000], 250, 4, 1),  # at least 1: the newest message always reaches the model
        ([100, 100, 5000, 100], 250, 4, 1),  # a run: an older small message past a big one is not kept
        ([5000, 100, 100], 250, 4, 2),
    ],
)
def test_the_byte_triggers_kept_suffix(sizes: list[int], budget: float, keep_recent: int, kept: int) -> None:
    assert _kept_suffix_by_bytes(sizes, budget, keep_recent) == kept


def expected_keep(messages: Sequence[Message], after_bytes: int, keep_recent: int) -> int:
    """The record's rule, re-derived independently of the loop."""
    kept, total = 0, 0
    for m in reversed(messages):
        size = message_bytes(m)
        if kept == keep_recent or (kept and total + size > after_bytes / 2):
            break
        kept, total = kept + 1, total + size
    keep = max(kept, 1)
    # ...shrunk forwards so the kept suffix never starts with a tool result whose call was folded,
    # unless that leaves nothing: then the newest message is a tool result and its call comes too.
    shrunk = keep
    while shrunk and messages[len(messages) - shrunk].role == "tool":
        shrunk -= 1
    if shrunk:
        return shrunk
    while keep < len(messages) and messages[len(messages) - keep].role == "tool":
        keep += 1
    return keep


async def test_every_byte_fold_keeps_exactly_the_rules_suffix() -> None:
    pads = [300, 50, 900, 20, 20, 700, 10, 400, 30, 30]
    model = noting(len(pads), pads=pads)
    compaction = Compaction(effect_id=SUMMARIZER, after_bytes=1500, keep_recent=3)
    config = AgentConfig(model=MODEL, tools=[note_tool()], system="sys", compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    eid = result.execution_id

    folds = compact_steps(rt, eid)
    assert len(folds) >= 3
    for sid in folds:
        turn = int(sid.split(":")[1])
        before = model.history[turn - 1]
        response = model.history[turn].messages  # the request after the fold
        # The transcript at the fold: the previous request plus that turn's answer and tool result.
        prior = [*before.messages[1:], *(m for m in response[-2:])]
        keep = started(rt, eid, sid)["input"]["keep"]
        assert keep == expected_keep(prior, 1500, 3), sid
        assert response[2:] == tuple(prior[len(prior) - keep :])
        assert sum(message_bytes(m) for m in prior) > 1500
    assert_rebuilt_matches(rt, eid, model)


def test_compaction_needs_a_threshold_and_accepts_after_bytes_alone() -> None:
    with pytest.raises(
        UsageError,
        match=r"^Compaction needs a threshold: set after_messages=\.\.\., after_bytes=\.\.\., or both$",
    ):
        Compaction(effect_id=SUMMARIZER)
    alone = Compaction(effect_id=SUMMARIZER, after_bytes=4096)
    assert (alone.after_bytes, alone.after_messages, alone.keep_recent) == (4096, None, 4)
    assert Compaction(effect_id=SUMMARIZER, after_messages=10).after_bytes is None
    with pytest.raises(UsageError, match="keep_recent must be at least 1"):
        Compaction(effect_id=SUMMARIZER, after_messages=10, keep_recent=0)


# -- crash and recovery ------------------------------------------------------------------------------------
def stable_summarizer() -> ScriptedModel:
    """A summary that depends only on what it is sent (as a real one would, at temperature 0)."""

    def summarize(request: ModelRequest) -> ModelResponse:
        texts = [m.text[:12] for m in request.messages if m.role != "system"]
        return ModelResponse.text("SUMMARY of " + " | ".join(texts))

    return ScriptedModel(summarize, name="summarizer")


async def test_a_crashed_and_recovered_run_recomputes_the_identical_compact_steps() -> None:
    pads = [900, 20, 20, 700, 10, 400, 30]

    def config() -> AgentConfig:
        return AgentConfig(
            model=MODEL,
            tools=[note_tool(idempotent=True)],
            compaction=Compaction(effect_id=SUMMARIZER, after_messages=5, after_bytes=1500, keep_recent=2),
        )

    journal = BatchJournal()
    rt, result = await run_agent(
        config(), noting(len(pads), pads=pads), rt=make_runtime(journal), summarizer=stable_summarizer()
    )
    eid = result.execution_id
    original = {e.step_id: e.data for e in events(rt, eid, EventKind.STEP_STARTED)}
    folds = compact_steps(rt, eid)
    assert len(folds) >= 3

    for cut in journal.boundaries[:-1]:  # a crash right after every commit but the last
        rt2 = make_runtime(prefix_journal(rt.journal, eid, cut))
        register_model(rt2, noting(len(pads), pads=pads))
        register_model(rt2, stable_summarizer(), SUMMARIZER, kind="summarizer")
        install(rt2, config())
        (recovered,) = await rt2.recover()
        assert recovered.status == "completed", (cut, recovered.error)
        assert recovered.output == result.output
        assert compact_steps(rt2, eid) == folds, cut
        for sid in folds:
            again = started(rt2, eid, sid)
            assert again["input"] == original[sid]["input"], (
                cut,
                sid,
            )
        report = await rt2.replay(eid)
        assert report.reproduced, (cut, report.message)


# -- the growth warning ------------------------------------------------------------------------------------
def warned(rt: Any, eid: str) -> list[dict[str, Any]]:
    return [e.data for e in events(rt, eid, EventKind.WARNING)]


async def test_an_uncompacted_transcript_past_warn_transcript_bytes_warns_once_per_run() -> None:
    wiped: list[str] = []

    @loom.tool(needs_approval=True)
    def wipe() -> str:
        """Destructive."""
        wiped.append("wiped")
        return "wiped"

    script = [
        *(calls(("note", {"n": i, "pad": 300})) for i in range(4)),
        calls(("wipe", {})),
        calls(("note", {"n": 9, "pad": 300})),
        ModelResponse.text("ok"),
    ]
    config = AgentConfig(model=MODEL, tools=[note_tool(), wipe], warn_transcript_bytes=1000)
    with pytest.warns(TranscriptGrowthWarning) as record:
        rt, result = await run_agent(config, ScriptedModel(script))
        assert result.status == "suspended"
        resumed = await rt.resume(result.execution_id, "#turn:4:tool:0:approval", {"approved": True})
        assert resumed.status == "completed"
    eid = result.execution_id

    growth = [w for w in record if issubclass(w.category, TranscriptGrowthWarning)]
    assert len(growth) == 1 and len(record) == 1
    message = str(growth[0].message)
    assert f"execution {eid}: the agent transcript is " in message
    assert "past warn_transcript_bytes=1,000, and nothing compacts it" in message
    assert "Set compaction=loom.Compaction(...), or warn_transcript_bytes=False to silence this." in message
    (event,) = warned(rt, eid)
    assert (event["code"], event["limit"], event["message"]) == ("transcript_bytes", 1000, message)
    assert event["bytes"] > 1000


@pytest.mark.parametrize(
    "options",
    [
        {"warn_transcript_bytes": False},
        {"warn_transcript_bytes": 1000, "compaction": Compaction(effect_id=SUMMARIZER, after_messages=500)},
    ],
    ids=["disabled", "compaction-configured"],
)
async def test_no_growth_warning_when_disabled_or_when_compaction_is_configured(
    options: dict[str, Any],
) -> None:
    model = noting(6, pads=[400] * 6)
    config = AgentConfig(model=MODEL, tools=[note_tool()], **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rt, result = await run_agent(config, model, summarizer=summarizer_model())
    assert result.status == "completed"
    assert sum(len(m.text) for m in model.history[-1].messages) > 2000  # well past the limit
    assert [w for w in caught if issubclass(w.category, TranscriptGrowthWarning)] == []
    assert warned(rt, result.execution_id) == []


# -- chunk_deltas ----------------------------------------------------------------------------------------
def test_chunk_deltas_cuts_at_sentence_boundaries() -> None:
    out: list[str] = []
    chunker = chunk_deltas(out.append, min_chars=10)
    chunker("Hello world. This is")
    assert out == ["Hello world. "]
    chunker(" it! And")
    assert out == ["Hello world. ", "This is it! "]
    chunker(" a line\nthen")
    assert out[-1] == "And a line\n"
    chunker.flush()
    assert out == ["Hello world. ", "This is it! ", "And a line\n", "then"]
    assert chunker.chunks == 4


def test_chunk_deltas_waits_for_min_chars_and_never_cuts_mid_sentence() -> None:
    out: list[str] = []
    chunker = chunk_deltas(out.append, min_chars=20)
    chunker("Hi. Ok. ")
    assert out == []  # boundaries, but under min_chars
    chunker("This is longer now. Tail")
    assert out == ["Hi. Ok. This is longer now. "]
    chunker("and it goes on and on without any end at all")
    assert out == ["Hi. Ok. This is longer now. "]  # long, but no boundary yet
    chunker.flush()
    assert out[-1] == "Tailand it goes on and on without any end at all"


def test_chunk_deltas_flush_emits_the_rest_once_and_nothing_when_empty() -> None:
    out: list[str] = []
    chunker = chunk_deltas(out.append, min_chars=40)
    chunker.flush()
    assert out == [] and chunker.chunks == 0
    for word in ["Short.", "Still", "short"]:
        chunker(word + " ")
    assert out == []
    chunker.flush()
    chunker.flush()
    assert out == ["Short. Still short "] and chunker.chunks == 1


@pytest.mark.parametrize("after_bytes,after_messages", [(1500, None), (None, 3), (900, 4)])
async def test_no_request_after_a_fold_holds_a_tool_result_without_its_call(
    after_bytes: int | None, after_messages: int | None
) -> None:
    pads = [300, 50, 900, 20, 20, 700, 10, 400, 30, 30]
    model = noting(len(pads), pads=pads)
    compaction = Compaction(effect_id=SUMMARIZER, after_bytes=after_bytes, after_messages=after_messages, keep_recent=3)
    config = AgentConfig(model=MODEL, tools=[note_tool()], system="sys", compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    assert compact_steps(rt, result.execution_id), "the scenario must fold at least once"
    for i, request in enumerate(model.history):
        called: set[str] = set()
        for m in request.messages:
            if m.role == "assistant":
                called |= {c.id for c in m.tool_calls}
            if m.role == "tool":
                assert m.tool_call_id in called, f"request {i}: tool result {m.tool_call_id} without its call"
