"""The kept suffix of a compaction, boundary by boundary, as ``docs/design.md`` (section 6.7) states
it: at most ``keep_recent`` messages after the summary (bytes: the longest newest run within
``after_bytes / 2``, floored at 1), shrunk *forwards* so it never starts with a tool result whose call
is folded. The one exception: the floor keeps a newest message that is a tool result, so its call
(and that call's other results) come too."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from loom_nb.agent import AgentConfig, Compaction
from loom_nb.agent.compaction import BACKWARD_RULE, KEEP_RULE, keep_rule_of, whole_calls
from loom_nb.errors import UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelRequest, ModelResponse, message_bytes
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import MODEL, SUMMARIZER, assert_rebuilt_matches, events, run_agent, summarizer_model
from tests.agent.test_agent_compaction import compact_steps, note_tool, noting


def keep_of(rt: Any, eid: str, sid: str) -> int:
    (data,) = [e.data for e in events(rt, eid, EventKind.STEP_STARTED) if e.step_id == sid]
    assert data["input"]["keep_rule"] == KEEP_RULE
    return int(data["input"]["keep"])


def non_system(request: ModelRequest) -> list[str]:
    return [m.role for m in request.messages if m.role != "system"]


# -- the messages rule -------------------------------------------------------------------------------
async def test_after_messages_5_keep_recent_3_sends_at_most_keep_recent_plus_one() -> None:
    """Observed before: 5 non-system messages after ``#turn:3:compact`` (the suffix was extended back
    to the call of the tool result it started with). Now the orphaned result is folded instead."""
    model = noting(6)
    config = AgentConfig(
        model=MODEL,
        tools=[note_tool()],
        system="sys",
        compaction=Compaction(effect_id=SUMMARIZER, after_messages=5, keep_recent=3),
    )
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    eid = result.execution_id
    folds = compact_steps(rt, eid)
    assert folds[0] == "#turn:3:compact"
    assert keep_of(rt, eid, "#turn:3:compact") == 2  # the newest 3 start with a tool result: folded
    assert non_system(model.history[3]) == ["user", "assistant", "tool"]  # summary + 2 (allowed 4)
    for sid in folds:
        turn = int(sid.split(":")[1])
        assert keep_of(rt, eid, sid) <= 3
        assert len(non_system(model.history[turn])) <= 3 + 1, sid
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced


# -- the bytes rule ----------------------------------------------------------------------------------
async def test_three_newest_fitting_exactly_in_half_after_bytes_keep_at_most_three() -> None:
    """Observed before: 4 kept. The rule keeps the three newest (exactly ``after_bytes / 2``); the
    oldest of them is a tool result whose call falls outside, so it is folded: 2 are kept."""
    pads = [300, 300, 0]
    user = "u" * 1000
    dry = noting(3, pads=pads)
    await run_agent(AgentConfig(model=MODEL, tools=[note_tool()]), dry, user)
    at_fold = dry.history[2].messages  # [user, a0, t0, a1, t1]
    assert [m.role for m in at_fold] == ["user", "assistant", "tool", "assistant", "tool"]
    half = sum(message_bytes(m) for m in at_fold[-3:])
    assert sum(message_bytes(m) for m in dry.history[1].messages) <= 2 * half  # no fold at turn 1
    assert sum(message_bytes(m) for m in at_fold) > 2 * half  # a fold at turn 2

    model = noting(3, pads=pads)
    compaction = Compaction(effect_id=SUMMARIZER, after_bytes=2 * half, keep_recent=4)
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, user, summarizer=summarizer_model())
    eid = result.execution_id
    assert compact_steps(rt, eid)[0] == "#turn:2:compact"
    assert keep_of(rt, eid, "#turn:2:compact") == 2
    assert model.history[2].messages[1:] == at_fold[-2:]
    assert_rebuilt_matches(rt, eid, model)


async def test_a_newest_tool_result_alone_over_half_is_kept_with_its_call_the_one_exception() -> None:
    """The floor keeps the newest message; it is a tool result, so its call comes too (2, not 1)."""
    model = noting(3, pads=[0, 3000])
    compaction = Compaction(effect_id=SUMMARIZER, after_bytes=2000, keep_recent=4)
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    eid = result.execution_id
    assert compact_steps(rt, eid)[0] == "#turn:2:compact"
    assert keep_of(rt, eid, "#turn:2:compact") == 2
    assert [m.role for m in model.history[2].messages] == ["user", "assistant", "tool"]
    assert model.history[2].messages[-1].text.startswith("note 1 ...")


async def test_keep_recent_1_keeps_the_newest_tool_result_and_its_call_only() -> None:
    model = noting(5)
    compaction = Compaction(effect_id=SUMMARIZER, after_messages=2, keep_recent=1)
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    eid = result.execution_id
    folds = compact_steps(rt, eid)
    assert folds
    for sid in folds:
        assert keep_of(rt, eid, sid) == 2, sid  # the exception: the newest is a tool result
        turn = int(sid.split(":")[1])
        assert non_system(model.history[turn]) == ["user", "assistant", "tool"]


async def test_parallel_results_come_with_their_call_in_the_exception() -> None:
    """A turn with two calls: the floor keeps the newest result, so the call and both results come."""

    def respond(request: ModelRequest) -> ModelResponse:
        tools = sum(1 for m in request.messages if m.role == "tool")
        if any(m.text.startswith("[Summary") for m in request.messages) or tools >= 4:
            return ModelResponse.text("done")
        return ModelResponse.tool_calls([("note", {"n": tools}), ("note", {"n": tools + 1})])

    model = ScriptedModel(respond)
    compaction = Compaction(effect_id=SUMMARIZER, after_messages=4, keep_recent=1)
    config = AgentConfig(model=MODEL, tools=[note_tool()], compaction=compaction)
    rt, result = await run_agent(config, model, summarizer=summarizer_model())
    eid = result.execution_id
    (sid,) = compact_steps(rt, eid)
    assert keep_of(rt, eid, sid) == 3
    assert non_system(model.history[-1]) == ["user", "assistant", "tool", "tool"]


# -- the pure rule -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("roles", "keep", "kept"),
    [
        (["user", "assistant", "tool", "assistant", "tool"], 3, 2),  # shrunk forwards
        (["user", "assistant", "tool", "assistant", "tool"], 1, 2),  # the exception
        (["user", "assistant", "tool", "user"], 1, 1),  # floor on a newest user message: just it
        (["user", "assistant", "tool", "tool", "user"], 2, 1),  # two results shrunk past
        (["user", "assistant", "tool", "tool"], 1, 3),  # the exception takes every result of the call
        (["user", "assistant", "tool", "assistant"], 2, 1),
    ],
)
def test_whole_calls(roles: list[str], keep: int, kept: int) -> None:
    assert whole_calls(roles, keep) == kept


def valid_transcripts(n: int) -> list[tuple[str, ...]]:
    """Every role sequence a transcript can have: a tool result follows its call or another result."""
    out = []
    for roles in itertools.product(["user", "assistant", "tool"], repeat=n):
        if roles[0] == "user" and all(
            r != "tool" or roles[i - 1] in ("assistant", "tool") for i, r in enumerate(roles)
        ):
            out.append(roles)
    return out


@pytest.mark.parametrize("n", range(1, 8))
def test_only_a_newest_tool_result_goes_past_the_cap_and_no_suffix_starts_orphaned(n: int) -> None:
    for roles in valid_transcripts(n):
        for keep in range(1, n + 1):
            kept = whole_calls(roles, keep)
            assert kept >= 1
            if kept < n:
                assert roles[n - kept] != "tool", (roles, keep)
            if kept > keep:
                assert roles[-1] == "tool", (roles, keep)  # the one exception
                assert roles[n - kept] == "assistant" and all(r == "tool" for r in roles[n - kept + 1 :])


def test_the_backward_rule_of_old_journals_extends_back() -> None:
    assert whole_calls(["user", "assistant", "tool", "assistant", "tool"], 3, rule=BACKWARD_RULE) == 4
    assert keep_rule_of(None) == KEEP_RULE
    assert keep_rule_of({"keep": 4}) == BACKWARD_RULE
    assert keep_rule_of({"keep": 2, "keep_rule": 2}) == KEEP_RULE
    with pytest.raises(UsageError, match=r"'#turn:3:compact' was recorded with keep_rule=9"):
        keep_rule_of({"keep": 2, "keep_rule": 9}, step_id="#turn:3:compact")
