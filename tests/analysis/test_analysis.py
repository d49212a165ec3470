"""``loom_nb.analysis``: frames over real agent journals (in memory and DuckDB), replay, diff, fork,
log growth, SQL, pinned columns and dtypes, plots."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import loom_nb as loom
import loom_nb.analysis as analysis
from loom_nb.analysis import Frames, frames
from loom_nb.errors import UsageError
from loom_nb.journal import Event, EventKind, digest_value
from tests.analysis.support import (
    DELETED,
    JOURNALS,
    make_runtime,
    messy_run,
    routed_agent,
    routed_probabilities,
    routed_run,
    search,
    tidy_agent,
    tidy_model,
    tidy_run,
    usage,
)

ROOT = Path(__file__).resolve().parents[2]

#: The pinned columns and dtypes of every frame (docs/analysis.md documents the same).
EXPECTED: dict[str, dict[str, str]] = {
    "events": {
        "execution_id": "str",
        "seq": "int64",
        "kind": "str",
        "step_id": "str",
        "at": "datetime64[us]",
        "turn": "Int64",
        "bytes": "int64",
        "data": "str",
    },
    "executions": {
        "execution_id": "str",
        "flow": "str",
        "status": "str",
        "created_at": "datetime64[us]",
        "updated_at": "datetime64[us]",
        "principal": "str",
        "forked_from": "str",
        "at_step": "str",
        "parent_execution_id": "str",
        "parent_step": "str",
        "turns": "int64",
        "events": "int64",
        "bytes": "int64",
        "duration_seconds": "float64",
        "input": "object",
        "output": "object",
        "error_type": "str",
        "error_message": "str",
    },
    "steps": {
        "execution_id": "str",
        "step_id": "str",
        "seq": "int64",
        "kind": "str",
        "effect": "str",
        "turn": "Int64",
        "tool_index": "Int64",
        "status": "str",
        "attempts": "int64",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
        "input_bytes": "Int64",
        "output_bytes": "Int64",
        "input_tokens": "Int64",
        "output_tokens": "Int64",
        "cost": "float64",
        "in_doubt": "bool",
        "error_type": "str",
        "error_message": "str",
    },
    "turns": {
        "execution_id": "str",
        "turn": "int64",
        "node": "str",
        "status": "str",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
        "model_calls": "int64",
        "tool_calls": "int64",
        "tool_steps": "int64",
        "gates": "int64",
        "decisions": "int64",
        "compacted": "bool",
        "input_tokens": "int64",
        "output_tokens": "int64",
        "cost": "float64",
        "finish_reason": "str",
        "text": "str",
    },
    "tool_calls": {
        "execution_id": "str",
        "turn": "int64",
        "tool_index": "int64",
        "node": "str",
        "call_id": "str",
        "name": "str",
        "arguments": "object",
        "requested_arguments": "object",
        "edited": "bool",
        "answered_at": "datetime64[us]",
        "step_id": "str",
        "status": "str",
        "approved": "boolean",
        "reason": "str",
        "result_preview": "str",
        "error": "str",
        "started_at": "datetime64[us]",
        "ended_at": "datetime64[us]",
        "duration_ms": "float64",
    },
    "gates": {
        "execution_id": "str",
        "gate_id": "str",
        "seq": "int64",
        "kind": "str",
        "turn": "Int64",
        "tool_index": "Int64",
        "status": "str",
        "opened_at": "datetime64[us]",
        "resolved_at": "datetime64[us]",
        "wait_seconds": "float64",
        "payload": "object",
        "answer": "object",
        "approved": "boolean",
        "reason": "str",
        "schema": "str",
    },
    "decisions": {
        "execution_id": "str",
        "decision_id": "str",
        "seq": "int64",
        "turn": "Int64",
        "at": "datetime64[us]",
        "policy": "str",
        "options": "object",
        "choice": "object",
        "probabilities": "object",
        "propensity": "float64",
    },
    "usage": {
        "execution_id": "str",
        "flow": "str",
        "calls": "int64",
        "model_calls": "int64",
        "input_tokens": "int64",
        "output_tokens": "int64",
        "total_tokens": "int64",
        "cost": "float64",
    },
    "streams": {
        "execution_id": "str",
        "seq": "int64",
        "at": "datetime64[us]",
        "turn": "Int64",
        "channel": "str",
        "text": "str",
    },
    "log_growth": {
        "execution_id": "str",
        "turn": "int64",
        "events": "int64",
        "bytes": "int64",
        "cumulative_events": "int64",
        "cumulative_bytes": "int64",
    },
    "transcript": {
        "role": "str",
        "text": "str",
        "tool_calls": "object",
        "tool_call_id": "str",
        "name": "str",
        "is_error": "bool",
        "tainted": "bool",
    },
    "outputs": {
        "execution_id": "str",
        "flow": "str",
        "status": "str",
        "output_type": "str",
        "output_mode": "str",
        "attempts": "int64",
        "failed_attempts": "int64",
        "output_json": "object",
        "output": "object",
    },
}
VIEWS = [v for v in EXPECTED if v not in ("transcript", "outputs")]


def dtypes(df: Any) -> dict[str, str]:
    return {c: str(t) for c, t in df.dtypes.items()}


def ts(seconds: float) -> pd.Timestamp:
    """The fake clock's epoch (2026-01-01) plus ``seconds``."""
    return pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=seconds)


# -- frames of one approved / refused run ------------------------------------------------------------
async def test_steps_of_a_gated_run(rt: loom.Runtime) -> None:
    eid = await tidy_run(rt)
    steps = frames(rt).steps(eid)
    assert list(steps["step_id"]) == [
        "#turn:0",
        "#turn:0:tool:0",
        "#turn:1",
        "#turn:1:tool:0:approval",
        "#turn:1:tool:1:approval",
        "#turn:1:tool:0",
        "#turn:2",
    ]
    assert list(steps["kind"]) == ["model", "tool", "model", "gate", "gate", "tool", "model"]
    assert set(steps["status"]) == {"completed"}
    assert list(steps["attempts"]) == [1] * 7
    assert list(steps["effect"].fillna("-")) == [
        "model.agent",
        "tools.search",
        "model.agent",
        "-",
        "-",
        "tools.delete_file",
        "model.agent",
    ]
    assert list(steps["turn"]) == [0, 0, 1, 1, 1, 1, 2]
    assert steps["tool_index"].tolist() == [pd.NA, 0, pd.NA, 0, 1, 0, pd.NA]
    effects = steps[steps["kind"] != "gate"]
    assert set(effects["duration_ms"]) == {500.0}  # one fake-clock tick from started to completed
    models = steps[steps["kind"] == "model"]
    assert models["input_tokens"].tolist() == [usage(n).input_tokens for n in range(3)]
    assert models["output_tokens"].tolist() == [usage(n).output_tokens for n in range(3)]
    assert models["cost"].round(6).tolist() == [0.001, 0.002, 0.003]
    assert steps.loc[steps["kind"] == "tool", "input_tokens"].isna().all()
    assert (steps["input_bytes"] > 0).all() and (steps["output_bytes"] > 0).all()
    assert not steps["in_doubt"].any()
    # the model step's input is the journaled delta: the first turn's holds system + user + tools
    assert steps["input_bytes"].iloc[0] > steps["input_bytes"].iloc[2]


async def test_gates_wait_on_the_fake_clock_and_keep_the_answers(rt: loom.Runtime) -> None:
    eid = await tidy_run(rt, wait=60.0)
    gates = frames(rt).gates(eid)
    assert list(gates["gate_id"]) == ["#turn:1:tool:0:approval", "#turn:1:tool:1:approval"]
    assert set(gates["kind"]) == {"AgentToolApproval"}
    assert set(gates["status"]) == {"resolved"}
    events = {(e.kind, e.step_id): e.at for e in rt.journal.read(eid)}
    for row in gates.itertuples():
        expected = events[("gate_resolved", row.gate_id)] - events[("gate_opened", row.gate_id)]
        assert row.wait_seconds == pytest.approx(expected)
        assert row.opened_at == ts(events[("gate_opened", row.gate_id)] - events[("execution_started", None)])
    # both opened before the suspension; the first waited 60 s (+ ticks), the second 60 s more
    assert gates["wait_seconds"].tolist() == pytest.approx([61.5, 121.5])
    assert gates["approved"].tolist() == [True, False]
    assert gates["reason"].tolist()[1] == "keep b"
    assert gates["answer"].tolist() == [  # gate.approve() binds the digest of the arguments it approves
        {"approved": True, "reason": None, "digest": digest_value({"path": "/tmp/x/stale.log"})},
        {"approved": False, "reason": "keep b"},
    ]
    assert gates["payload"].iloc[1] == {
        "tool": "delete_file",
        "arguments": {"path": "/tmp/x/b"},
        "call_id": "call_1",
        "turn": 1,
    }
    assert gates["turn"].tolist() == [1, 1] and gates["tool_index"].tolist() == [0, 1]


async def test_tool_calls_show_approvals_refusals_and_results(rt: loom.Runtime) -> None:
    DELETED.clear()
    eid = await tidy_run(rt)
    calls = frames(rt).tool_calls(eid)
    assert calls[["turn", "tool_index", "name"]].values.tolist() == [
        [0, 0, "search"],
        [1, 0, "delete_file"],
        [1, 1, "delete_file"],
    ]
    assert calls["arguments"].tolist() == [
        {"query": "stale"},
        {"path": "/tmp/x/stale.log"},
        {"path": "/tmp/x/b"},
    ]
    assert calls["status"].tolist() == ["completed", "completed", "refused"]
    assert calls["approved"].tolist() == [pd.NA, True, False]  # null when no gate
    assert calls["reason"].isna().tolist() == [True, True, False] and calls["reason"].iloc[2] == "keep b"
    assert calls["result_preview"].tolist()[:2] == ['["/tmp/x/stale.log"]', "deleted /tmp/x/stale.log"]
    assert pd.isna(calls["result_preview"].iloc[2])
    assert calls["error"].isna().all()
    assert calls["step_id"].tolist()[:2] == ["#turn:0:tool:0", "#turn:1:tool:0"]
    assert calls["call_id"].tolist() == ["call_0", "call_0", "call_1"]
    assert DELETED == ["/tmp/x/stale.log"]


async def test_tool_calls_that_go_wrong(rt: loom.Runtime) -> None:
    eid = await messy_run(rt)
    calls = frames(rt).tool_calls(eid)
    assert calls["name"].tolist() == ["no_such_tool", "explode", "search"]
    assert calls["status"].tolist() == ["invalid", "failed", "completed"]
    assert calls["error"].iloc[0].startswith("Error: there is no tool named 'no_such_tool'")
    assert calls["error"].iloc[1] == "builtins:ValueError: boom: testing"
    assert pd.isna(calls["error"].iloc[2])
    steps = frames(rt).steps(eid).set_index("step_id")
    assert steps.loc["#turn:0:tool:1", "status"] == "failed"
    assert steps.loc["#turn:0:tool:1", "error_message"] == "boom: testing"
    assert pd.isna(steps.loc["#turn:0:tool:2", "error_type"])


async def test_turns_usage_and_streams(rt: loom.Runtime) -> None:
    eid = await tidy_run(rt)
    f = frames(rt)
    turns = f.turns(eid)
    assert turns["turn"].tolist() == [0, 1, 2]
    assert turns["node"].tolist() == ["#turn:0", "#turn:1", "#turn:2"]
    assert turns["tool_calls"].tolist() == [1, 2, 0]
    assert turns["tool_steps"].tolist() == [1, 1, 0]
    assert turns["gates"].tolist() == [0, 2, 0]
    assert turns["finish_reason"].tolist() == ["tool_calls", "tool_calls", "stop"]
    assert turns["text"].tolist() == ["Let me look.", "Deleting them.", "Done. I removed the stale file."]
    assert turns["input_tokens"].sum() == sum(usage(n).input_tokens for n in range(3))
    assert not turns["compacted"].any()
    use = f.usage(eid)
    totals = rt.usage(eid)
    assert use[["calls", "input_tokens", "output_tokens"]].iloc[0].tolist() == [
        totals.calls,
        totals.input_tokens,
        totals.output_tokens,
    ]
    assert use["cost"].iloc[0] == pytest.approx(totals.cost)
    assert use["model_calls"].iloc[0] == 3 and use["calls"].iloc[0] == 5
    assert use["total_tokens"].iloc[0] == totals.input_tokens + totals.output_tokens
    streams = f.streams(eid)
    assert streams["text"].tolist() == turns["text"].tolist()
    assert streams["turn"].tolist() == [0, 1, 2] and set(streams["channel"]) == {"assistant"}


async def test_executions_events_and_log_growth(rt: loom.Runtime) -> None:
    done = await tidy_run(rt)
    waiting = tidy_agent().start("again", runtime=rt)
    await waiting.wait(until="paused")
    f = frames(rt)
    runs = f.executions().set_index("execution_id")
    assert runs.loc[done, "status"] == "completed" and runs.loc[waiting.id, "status"] == "suspended"
    assert runs.loc[done, "flow"] == "agent:agent" and runs.loc[done, "turns"] == 3
    assert runs.loc[done, "input"] == "Remove the stale files in /tmp/x"
    assert runs.loc[done, "output"]["output"] == "Done. I removed the stale file."
    assert pd.isna(runs.loc[waiting.id, "output"]) or runs.loc[waiting.id, "output"] is None
    events = f.events(done)
    assert len(events) == len(rt.journal.read(done)) == runs.loc[done, "events"]
    assert events["seq"].tolist() == list(range(1, len(events) + 1))
    assert events["bytes"].sum() == runs.loc[done, "bytes"]
    assert events["turn"].iloc[0] is pd.NA and events["turn"].iloc[-1] == 2
    growth = f.log_growth(done)
    assert growth["turn"].tolist() == [0, 1, 2]
    assert growth["events"].sum() == len(events)
    assert growth["cumulative_bytes"].iloc[-1] == events["bytes"].sum()
    assert growth["cumulative_bytes"].is_monotonic_increasing
    assert growth["bytes"].tolist() == events.groupby(events["turn"].fillna(0))["bytes"].sum().tolist()
    assert analysis.log_growth(done, runtime=rt).equals(growth)
    assert len(f.events()) == len(f.events(done)) + len(f.events(waiting.id))


async def test_a_submitted_run_is_queued_until_a_worker_journals_its_first_step(rt: loom.Runtime) -> None:
    """``executions()`` says ``queued`` for a run submitted for the workers while only its
    ``execution_started`` is journaled (the projection's ``queued``), ``running`` once a step is."""
    agent = tidy_agent()
    agent.submit("queued work", "job-q", runtime=rt, view=False)
    assert frames(rt).executions().set_index("execution_id").loc["job-q", "status"] == "queued"
    rt.journal.append([Event("job-q", 2, EventKind.VALUE_RECORDED, "#value:1", 2.0, {"value": 1})])
    assert frames(rt).executions().set_index("execution_id").loc["job-q", "status"] == "running"


async def test_failed_execution(rt: loom.Runtime) -> None:
    model = loom.ScriptedModel([])  # an empty script: the first model call fails
    agent = loom.Agent(model=model, name="broken", model_retry=None)
    run = agent.start("hi", runtime=rt)
    with pytest.raises(Exception):  # noqa: B017 - whatever the scripted model raises
        await run
    f = frames(rt)
    row = f.executions().iloc[0]
    assert row["status"] == "failed" and isinstance(row["error_type"], str) and row["error_message"]
    steps = f.steps(run.id)
    assert steps["status"].tolist() == ["failed"]
    assert steps["error_type"].iloc[0] == row["error_type"]
    assert f.turns(run.id)["status"].tolist() == ["failed"]


@pytest.mark.slow
async def test_decisions_with_propensities(rt: loom.Runtime) -> None:
    eid = await routed_run(rt, turns=3)
    decisions = frames(rt).decisions(eid)
    assert decisions["decision_id"].tolist() == ["#turn:0:route", "#turn:1:route", "#turn:2:route"]
    assert set(decisions["policy"]) == {"router"}
    assert decisions["options"].tolist() == [["model.small", "model.large"]] * 3
    assert decisions["choice"].tolist() == ["model.small", "model.large", "model.small"]
    assert decisions["probabilities"].tolist() == [routed_probabilities(t) for t in range(3)]
    assert decisions["propensity"].tolist() == pytest.approx([0.8, 0.6, 0.8])
    assert decisions["turn"].tolist() == [0, 1, 2]
    steps = frames(rt).steps(eid)
    assert steps.loc[steps["kind"] == "decision", "step_id"].tolist() == decisions["decision_id"].tolist()
    models = steps.loc[steps["kind"] == "model", "effect"].tolist()
    assert models == ["model.small", "model.large", "model.small"]
    assert frames(rt).turns(eid)["decisions"].tolist() == [1, 1, 1]


@pytest.mark.slow
async def test_in_doubt_steps_and_their_gate(rt: loom.Runtime) -> None:
    class Crash(BaseException):
        pass

    state = {"crash": True}

    @loom.tool
    def launch(target: str) -> str:
        """Launch something (not idempotent).

        Args:
            target: Where.
        """
        if state["crash"]:
            raise Crash()
        return "launched"

    script = [loom.ModelResponse.tool_calls([("launch", {"target": "moon"})]), loom.ModelResponse.text("ok")]
    agent = loom.Agent(model=loom.ScriptedModel(script), tools=[launch], name="crashy")
    agent.register(rt)
    with pytest.raises(Crash):
        await rt.start(agent.flow_name, "go", execution_id="crash-1")
    state["crash"] = False
    f = frames(rt)
    assert f.steps("crash-1").set_index("step_id").loc["#turn:0:tool:0", "status"] == "running"
    (result,) = await rt.recover()
    assert result.status == "suspended"
    steps = f.steps("crash-1").set_index("step_id")
    assert steps.loc["#turn:0:tool:0", "status"] == "in_doubt"
    assert bool(steps.loc["#turn:0:tool:0", "in_doubt"])
    assert steps.loc["#turn:0:tool:0:in_doubt", ["kind", "status"]].tolist() == ["gate", "running"]
    gate = f.gates("crash-1").iloc[0]
    assert gate["kind"] == "InDoubt" and gate["status"] == "open" and pd.isna(gate["wait_seconds"])
    assert gate["payload"]["effect"] == "tools.launch"
    assert f.tool_calls("crash-1")["status"].tolist() == ["in_doubt"]
    happened = loom.InDoubtResolution(action="happened", output="by hand")
    await rt.resume("crash-1", "#turn:0:tool:0:in_doubt", happened)
    step = f.steps("crash-1").set_index("step_id").loc["#turn:0:tool:0"]
    assert step["status"] == "completed" and bool(step["in_doubt"])
    assert f.gates("crash-1")["answer"].iloc[0]["action"] == "happened"
    assert f.tool_calls("crash-1")["result_preview"].tolist() == ["by hand"]
    assert f.executions().set_index("execution_id").loc["crash-1", "status"] == "completed"


async def test_compaction_steps(rt: loom.Runtime) -> None:
    def respond(request: Any) -> loom.ModelResponse:
        n = sum(1 for m in request.messages if m.role == "assistant")
        if n < 3 and not any(m.text.startswith("[Summary") for m in request.messages):
            return loom.ModelResponse.tool_calls([("search", {"query": f"q{n}"})], text=f"step {n}")
        return loom.ModelResponse.text("finished")

    summary = loom.ModelResponse.text("summary", usage=loom.Usage(input_tokens=7))
    summarizer = loom.ScriptedModel([summary] * 5)
    agent = loom.Agent(
        model=loom.ScriptedModel(respond),
        tools=[search],
        name="compacting",
        compaction=loom.Compaction(effect_id="summarize", after_messages=3, keep_recent=1),
        summarizer=summarizer,
    )
    run = agent.start("go", runtime=rt)
    await run
    f = frames(rt)
    steps = f.steps(run.id)
    compact = steps[steps["kind"] == "compact"]
    assert len(compact) >= 1 and set(compact["effect"]) == {"summarize"}
    assert set(compact["input_tokens"]) == {7}
    turns = f.turns(run.id)
    assert turns["compacted"].sum() == len(compact)
    # a compaction's tokens count toward its turn
    turn = int(compact["turn"].iloc[0])
    assert turns.set_index("turn").loc[turn, "input_tokens"] >= 7


async def test_transcript_is_what_the_model_was_sent(rt: loom.Runtime) -> None:
    model = tidy_model()
    eid = await tidy_run(rt, agent=tidy_agent(model))
    f = frames(rt)
    for turn, request in enumerate(model.history):
        df = f.transcript(eid, turn)
        assert dtypes(df) == EXPECTED["transcript"]
        assert df["role"].tolist() == [m.role for m in request.messages]
        assert df["text"].tolist() == [m.text for m in request.messages]
        assert df["is_error"].tolist() == [m.is_error for m in request.messages]
    last = f.transcript(eid, 2)
    assert last["tool_call_id"].tolist()[-2:] == ["call_0", "call_1"]
    assert last["is_error"].tolist()[-1] and "Reason: keep b" in last["text"].iloc[-1]
    assert last["tool_calls"].iloc[4][1]["arguments"] == {"path": "/tmp/x/b"}
    with pytest.raises(UsageError, match="no model turn 9"):
        f.transcript(eid, 9)
    with pytest.raises(UsageError, match="no execution"):
        f.transcript("nope", 0)


# -- replay, fork, diff ---------------------------------------------------------------------------------
async def test_replay_reports(rt: loom.Runtime) -> None:
    a = await tidy_run(rt)
    b = await routed_run(rt)
    f = frames(rt)
    report = await f.replay()
    assert dtypes(report) == {
        "execution_id": "str",
        "reproduced": "bool",
        "recorded_status": "str",
        "replayed_status": "str",
        "served": "int64",
        "message": "str",
        "seconds": "float64",
        "children": "str",
    }
    assert report["execution_id"].tolist() == [a, b] and set(report["children"]) == {""}
    assert report["reproduced"].all() and set(report["message"]) == {"reproduced"}
    one = await f.replay(a)
    assert len(one) == 1 and one["served"].iloc[0] == 7
    # change the agent (its system prompt): the log no longer reproduces
    loom.Agent(model=tidy_model(), tools=tidy_agent().config.tools, system="Something else.").register(rt)
    changed = await f.replay(a)
    assert not changed["reproduced"].iloc[0] and changed["replayed_status"].iloc[0] == "diverged"
    assert "#turn:0" in changed["message"].iloc[0]
    with pytest.raises(UsageError, match=r"await frames\.replay"):
        f.replay_sync(a)
    # a flow this process does not know: reported, the others still replay
    other = make_runtime("memory")
    await routed_run(other)
    rt.flows = other.flows  # the tidy agent's flow is not in that registry
    mixed = await f.replay()
    assert mixed["replayed_status"].tolist() == ["flow_not_found", "completed"]
    assert "no flow named 'agent:agent'" in mixed["message"].iloc[0]
    with pytest.raises(UsageError, match="no execution 'nope'"):
        await f.replay("nope")


def test_replay_and_fork_sync_outside_a_loop() -> None:
    rt = make_runtime("duckdb")
    eid = asyncio.run(routed_run(rt))
    f = frames(rt)
    assert f.replay_sync(eid)["reproduced"].tolist() == [True]
    fork = f.fork_sync(eid, "#turn:1", new_execution_id="forked")
    assert fork.status == "completed"
    assert f.diff(eid, "forked").identical
    rt.close()


@pytest.mark.slow
async def test_fork_lineage_and_diff(rt: loom.Runtime) -> None:
    eid = await routed_run(rt, turns=3)
    f = frames(rt)
    same = await f.fork(eid, "#turn:1:route", new_execution_id="same")
    assert same.status == "completed"
    d = f.diff(eid, "same")
    assert d.identical and d.first_divergence is None and d.steps["same"].all()
    assert dtypes(d.steps) == {c: "bool" if c == "same" else "str" for c in analysis.DIFF_COLUMNS}
    assert "identical" in repr(d)

    # a different model from turn 1 on: the fork diverges exactly there
    def other(request: Any) -> loom.ModelResponse:
        return loom.ModelResponse.text("A different answer.", usage=usage(9))

    agent, _ = routed_agent(3, respond=other)
    agent.register(rt)
    changed = await f.fork(eid, "#turn:1")
    assert changed.status == "completed"
    runs = f.executions().set_index("execution_id")
    assert runs.loc[changed.execution_id, ["forked_from", "at_step"]].tolist() == [eid, "#turn:1"]
    assert runs.loc["same", ["forked_from", "at_step"]].tolist() == [eid, "#turn:1:route"]
    assert pd.isna(runs.loc[eid, "forked_from"])
    d = f.diff(eid, changed.execution_id)
    assert d.first_divergence == "#turn:1" and not d.identical
    rows = d.steps.set_index("step_id")
    assert rows.loc[["#turn:0:route", "#turn:0", "#turn:0:tool:0", "#turn:1:route"], "same"].all()
    assert rows.loc["#turn:1", "input_digest_a"] == rows.loc["#turn:1", "input_digest_b"]  # same request
    assert rows.loc["#turn:1", "output_digest_a"] != rows.loc["#turn:1", "output_digest_b"]  # other answer
    only_a = rows.loc["#turn:2"]
    assert only_a["effect_a"] == "model.small" and pd.isna(only_a["effect_b"]) and not only_a["same"]
    assert d.steps["step_id"].tolist()[:2] == ["#turn:0:route", "#turn:0"]
    assert analysis.diff(eid, changed.execution_id, runtime=rt).first_divergence == "#turn:1"
    with pytest.raises(UsageError, match="no execution 'nope'"):
        f.diff(eid, "nope")


# -- SQL, schema, lifecycle --------------------------------------------------------------------------------
@pytest.mark.slow
async def test_sql_over_the_views(rt: loom.Runtime) -> None:
    await tidy_run(rt)
    await routed_run(rt)
    f = frames(rt)
    kinds = f.sql("SELECT kind, count(*) AS n FROM steps GROUP BY kind ORDER BY kind")
    counts = dict(zip(kinds["kind"], kinds["n"], strict=True))
    assert counts == {"decision": 3, "gate": 2, "model": 6, "tool": 4}
    joined = f.sql(
        "SELECT e.flow, sum(u.input_tokens) AS tokens FROM usage u JOIN executions e USING (execution_id) "
        "GROUP BY e.flow ORDER BY e.flow"
    )
    assert joined["flow"].tolist() == ["agent:agent", "agent:routed"]
    raw = f.sql("SELECT count(*) AS n FROM events WHERE kind = 'gate_resolved'")
    assert raw["n"].iloc[0] == 2
    assert f.sql("SELECT count(*) AS n FROM content")["n"].iloc[0] >= 0
    assert set(f.views) == set(VIEWS)
    for view in VIEWS:
        assert list(f.sql(f"SELECT * FROM {view} LIMIT 0").columns) == list(EXPECTED[view])


@pytest.mark.parametrize("kind", JOURNALS)
@pytest.mark.slow
async def test_pinned_columns_and_dtypes(kind: str) -> None:
    rt = make_runtime(kind)
    f = frames(rt)
    for view in VIEWS:  # an empty journal already has the documented dtypes
        assert dtypes(getattr(f, view)()) == EXPECTED[view], view
    await tidy_run(rt)
    await messy_run(rt)
    await routed_run(rt)
    waiting = tidy_agent().start("again", runtime=rt)
    await waiting.wait(until="paused")
    for view in VIEWS:
        df = getattr(f, view)()
        assert len(df) > 0, view
        assert dtypes(df) == EXPECTED[view], view
    assert {v: dict(c) for v, c in analysis.COLUMNS.items()} == {v: EXPECTED[v] for v in VIEWS}
    assert dict(analysis.TRANSCRIPT_COLUMNS) == EXPECTED["transcript"]
    assert dict(analysis.OUTPUT_COLUMNS) == EXPECTED["outputs"]
    rt.close()


def documented_columns() -> dict[str, dict[str, str]]:
    """The ``| `column` | `dtype` |`` rows under each ``### `view` `` heading of docs/analysis.md,
    plus the transcript, batch-frame and outputs tables."""
    text = (ROOT / "docs" / "analysis.md").read_text()
    out: dict[str, dict[str, str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = re.match(r"^### `(\w+)`", line)
        if heading:
            current = heading.group(1)
            out[current] = {}
            continue
        if line.startswith("`f.transcript("):
            current = "transcript"
            out[current] = {}
            continue
        if line.startswith("`batch.frame()`"):
            current = "batch"
            out[current] = {}
            continue
        if line.startswith("`f.outputs("):
            current = "outputs"
            out[current] = {}
            continue
        if line.startswith("## "):
            current = None
        row = re.match(r"^\| `(\w+)` \| `([\w\[\]]+)` \|", line)
        if row and current is not None:
            out[current][row.group(1)] = row.group(2)
    return out


def test_docs_table_matches_the_frames() -> None:
    documented = documented_columns()
    assert documented.pop("batch") == analysis.BATCH_COLUMNS  # the batch frame's table (agent.map)
    assert documented == EXPECTED


async def test_views_leave_the_journal_schema_alone(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    rt = loom.Runtime.open(path)
    agent = tidy_agent()
    run = agent.start("go", runtime=rt)
    await run.wait(until="paused")
    f = frames(rt)
    assert len(f.steps()) == 5 and len(f.tool_calls()) == 3
    con = rt.journal.connection  # type: ignore[attr-defined]
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert tables == {"events", "executions", "content", "schema_migrations", "leases"}
    assert con.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] == 0
    # the journal's own queries still read its tables, not the views of the same name
    assert [r.status for r in rt.journal.list_executions()] == ["suspended"]
    run.gates[0].approve()
    await asyncio.sleep(0)
    await run.wait(until="paused")
    run.gates[0].approve()
    await run
    assert f.executions()["status"].tolist() == ["completed"]  # a live view: new commits show
    assert f.tool_calls()["status"].tolist() == ["completed"] * 3
    f.close()
    rt.close()
    with pytest.raises(UsageError, match="closed"):
        f.steps()
    with loom.Runtime.open(path, read_only=True) as again:  # nothing was added to the file
        g = frames(again)
        assert len(g.steps()) == 8
        tables = {
            r[0]
            for r in again.journal.connection.execute(  # type: ignore[attr-defined]
                "SELECT table_name FROM information_schema.tables"
            ).fetchall()
        }
        assert tables == {"events", "executions", "content", "schema_migrations", "leases"}


async def test_in_memory_frames_follow_new_commits() -> None:
    rt = make_runtime("memory")
    f = frames(rt)
    assert f.executions().empty
    first = await routed_run(rt)
    assert f.executions()["execution_id"].tolist() == [first]
    second = await routed_run(rt)
    assert f.executions()["execution_id"].tolist() == [first, second]
    assert f.sql("SELECT count(DISTINCT execution_id) AS n FROM steps")["n"].iloc[0] == 2
    with Frames(rt) as g:
        assert len(g.steps()) == len(f.steps())


def test_frames_needs_a_runtime() -> None:
    try:
        previous: loom.Runtime | None = loom.default_runtime()
    except UsageError:
        previous = None
    rt = make_runtime("duckdb")
    try:
        loom.set_default_runtime(None)
        with pytest.raises(UsageError, match="no default runtime"):
            loom.frames()
        loom.set_default_runtime(rt)
        f = loom.frames()
        assert isinstance(f, Frames) and f.runtime is rt
        assert "Frames(journal=':memory:'" in repr(f)
    finally:
        loom.set_default_runtime(previous)
        rt.close()

    class Opaque:
        location = "somewhere"

        def close(self) -> None:
            pass

    with pytest.raises(UsageError, match="cannot read a Opaque"):
        Frames(loom.Runtime(Opaque())).steps()  # type: ignore[arg-type]


# -- plots -----------------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_plots_render_to_png(tmp_path: Path) -> None:
    rt = make_runtime("duckdb")
    a = await tidy_run(rt)
    await routed_run(rt)
    f = frames(rt)
    figures = {
        "timeline": f.plot_timeline(a),
        "log_growth": analysis.plot_log_growth(a, runtime=rt),
        "usage": analysis.plot_usage(frames=f),
        "usage_turns": f.plot_usage(a),
    }
    for name, fig in figures.items():
        path = tmp_path / f"{name}.png"
        fig.savefig(path, dpi=80)
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000, name
    timeline = figures["timeline"].axes[0]
    assert len(timeline.get_yticklabels()) == len(f.steps(a))
    assert "#turn:1:tool:0:approval" in [t.get_text() for t in timeline.get_yticklabels()]
    with pytest.raises(UsageError, match="no steps"):
        f.plot_timeline("nope")
    with pytest.raises(UsageError, match="no events"):
        f.plot_log_growth("nope")
    with pytest.raises(UsageError, match="no turns"):
        f.plot_usage("nope")
    rt.close()
