"""Linear log growth (``docs/design.md``, section 6.6): each model turn journals only a DELTA of
the transcript, and the request every turn sent is a pure fold over the journal. Checked turn by
turn against what the model actually received, through approvals, refusals, errors, tainted
results, extras, routing and compaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig, Compaction, Routes, Skill, TieredMemory, rebuild_requests
from loom_nb.effects.guard import guard_request
from loom_nb.journal import DuckDBJournal
from loom_nb.journal.events import EventKind
from loom_nb.kernel import Decision
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.providers.scripted import ScriptedModel
from tests.agent.support import (
    MODEL,
    SUMMARIZER,
    assert_rebuilt_matches,
    calls,
    data_bytes,
    events,
    make_runtime,
    raw_call,
    register_model,
    run_agent,
    summarizer_model,
)


def kitchen_tools(log: list[str]) -> list[loom.Tool]:
    @loom.tool(trusted=False)
    def search(query: str) -> list[str]:
        """Search the web."""
        log.append(f"search {query}")
        return [f"https://example.com/{query}", f"result text about {query} " * 5]

    @loom.tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        log.append(f"delete {path}")
        return f"deleted {path}"

    @loom.tool
    def flaky() -> str:
        """Always fails."""
        raise RuntimeError("backend down")

    return [search, delete, flaky]


KITCHEN_SCRIPT = [
    calls(("search", {"query": "a"}), ("nope", {}), text="Searching."),
    ModelResponse.tool_calls(
        [
            *calls(("delete", {"path": "/a"}), ("delete", {"path": "/b"})).message.tool_calls,
            raw_call("search", "{query: b", "call_2"),
        ],
        text="Deleting two.",
    ),
    calls(("flaky", {}), ("search", {"q": "wrong"}), text="Trying more."),
    calls(("search", {"query": "c"})),
    calls(("delete", {"path": "/c"}), text="One more."),
    ModelResponse.text("All done."),
]


def kitchen(log: list[str], **options: Any) -> tuple[ScriptedModel, AgentConfig]:
    """The kitchen-sink run: its scripted model, and a config with its tools (logging to ``log``) and ``options``."""
    return ScriptedModel(KITCHEN_SCRIPT), AgentConfig(
        model=MODEL, tools=kitchen_tools(log), system="You tidy.", **options
    )


async def drive(rt: Any, result: Any) -> Any:
    """Approve every gate except the one for /b, until the run settles."""
    while result.status == "suspended":
        gate = result.gates[0]
        approved = gate.payload["arguments"]["path"] != "/b"
        result = await rt.resume(result.execution_id, gate.gate_id, {"approved": approved, "reason": "kept"})
    return result


@pytest.mark.parametrize(
    "compaction",
    [
        None,
        Compaction(effect_id=SUMMARIZER, after_messages=6, keep_recent=3),
        Compaction(effect_id=SUMMARIZER, after_bytes=1500, keep_recent=3),
    ],
    ids=["uncompacted", "after_messages", "after_bytes"],
)
async def test_the_rebuilt_request_of_every_turn_is_what_the_model_received(
    compaction: Compaction | None,
) -> None:
    log: list[str] = []
    model, config = kitchen(
        log,
        skills=[Skill(name="tidy", instructions="Be tidy.")],
        skill_selector=lambda names: ["tidy"],
        memory=TieredMemory(["tidy means delete old files", "unrelated"]),
        compaction=compaction,
    )
    rt, result = await run_agent(config, model, "Please tidy up old files", summarizer=summarizer_model())
    result = await drive(rt, result)
    eid = result.execution_id

    assert result.status == "completed" and result.output["output"] == "All done."
    assert log == ["search a", "delete /a", "search c", "delete /c"]
    if compaction is not None:
        assert any(e.step_id.endswith(":compact") for e in events(rt, eid, EventKind.STEP_STARTED) if e.step_id)
    assert_rebuilt_matches(rt, eid, model, guarded=True)
    report = await rt.replay(eid)
    assert report.reproduced, report.message


async def test_a_routed_and_elevated_run_rebuilds_every_model_node() -> None:
    log: list[str] = []
    cheap = ScriptedModel([ModelResponse.text("unsure"), calls(("delete", {"path": "/x"})), ModelResponse.text("ok")])
    strong = ScriptedModel([calls(("search", {"query": "z"}))])
    rt = make_runtime()
    register_model(rt, cheap, "model.cheap")
    register_model(rt, strong, "model.strong")
    routes = Routes(
        models=["model.cheap", "model.strong"],
        policy=lambda models, request, turn: Decision(choice="model.cheap", probabilities=[0.9, 0.1]),
        elevate=lambda response, turn: response.message.text == "unsure",
    )
    _, result = await run_agent(AgentConfig(routes=routes, tools=kitchen_tools(log)), None, rt=rt)
    result = await drive(rt, result)
    eid = result.execution_id

    rebuilt = rebuild_requests(rt.journal.read(eid))
    assert list(rebuilt) == ["#turn:0", "#turn:0:elevated:1", "#turn:1", "#turn:2"]
    sent = [cheap.history[0], strong.history[0], cheap.history[1], cheap.history[2]]
    for (sid, request), received in zip(rebuilt.items(), sent, strict=True):
        assert guard_request(ModelRequest(messages=request.messages)).messages == received.messages, sid


def marked_model(turns: int) -> ScriptedModel:
    script = [calls(("mark", {"n": i}), text=f"ASSISTANT-MARK-{i}") for i in range(turns)]
    return ScriptedModel([*script, ModelResponse.text("FINAL")])


def mark_tool() -> loom.Tool:
    @loom.tool
    def mark(n: int) -> str:
        """Return a marked result."""
        return f"RESULT-MARK-{n} " + "x" * 200

    return mark


async def test_a_model_turn_journals_only_the_delta_never_earlier_turns_messages() -> None:
    model = marked_model(12)
    rt, result = await run_agent(AgentConfig(model=MODEL, tools=[mark_tool()]), model, "USER-MARK question")
    eid = result.execution_id

    inputs = {
        e.step_id: json.dumps(e.data["input"])
        for e in events(rt, eid, EventKind.STEP_STARTED)
        if e.data["effect"] == MODEL
    }
    assert "USER-MARK" in inputs["#turn:0"]
    for k in range(1, 13):
        text = inputs[f"#turn:{k}"]
        # event format 2: the previous node's message is implied by prev, the tool result is call 0's
        assert json.loads(text) == {"prev": f"#turn:{k - 1}", "add": [{"tool": 0}]}
        assert "MARK" not in text  # not the user's text, nor any assistant text or tool result
    # Each model turn's journaled input stays the same size while the request it stands for grows.
    sizes = [len(inputs[f"#turn:{k}"]) for k in range(2, 13)]
    assert max(sizes) - min(sizes) <= 3  # only the digits of the three turn indexes differ
    assert len(model.history[12].messages) == 25
    assert_rebuilt_matches(rt, eid, model)


async def test_journal_bytes_grow_linearly_with_turns_while_the_requests_grow_quadratically() -> None:
    async def measure(turns: int) -> tuple[int, int]:
        model = marked_model(turns)
        config = AgentConfig(model=MODEL, tools=[mark_tool()], max_turns=100, warn_transcript_bytes=False)
        rt, result = await run_agent(config, model)
        sent = sum(len(r.model_dump_json()) for r in model.history)
        return data_bytes(events(rt, result.execution_id)), sent

    log20, sent20 = await measure(20)
    log40, sent40 = await measure(40)
    assert 1.9 < log40 / log20 < 2.1  # linear
    assert sent40 / sent20 > 3.5  # what journaling each whole request would have cost: quadratic


async def test_the_rebuild_works_from_a_re_opened_duckdb_journal(tmp_path: Path) -> None:
    path = tmp_path / "loom.duckdb"
    log: list[str] = []
    model, config = kitchen(log, compaction=Compaction(effect_id=SUMMARIZER, after_messages=6, keep_recent=3))
    rt = make_runtime(DuckDBJournal(path))
    _, result = await run_agent(config, model, "tidy", rt=rt, summarizer=summarizer_model())
    result = await drive(rt, result)
    rt.close()
    reopened = make_runtime(DuckDBJournal(path, read_only=True))
    try:
        assert_rebuilt_matches(reopened, result.execution_id, model, guarded=True)
    finally:
        reopened.close()
