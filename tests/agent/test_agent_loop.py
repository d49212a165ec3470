"""The durable agent loop: turns and tool calls as identity-rule steps, bad model output as data,
``max_turns``, streaming, ``agent_step`` and the ``Agent`` / ``Run`` / ``Gate`` facade.

Every run is checked against its journal; ``ScriptedModel.history`` shows what the model was sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import loom_nb as loom
from loom_nb.agent import AgentConfig, AgentResult, Routes, agent_loop
from loom_nb.agent.step import agent_step
from loom_nb.effects import Quota
from loom_nb.errors import (
    NotAuthorizedError,
    ProviderHTTPError,
    QuotaExceededError,
    ResumeValidationError,
    UsageError,
)
from loom_nb.journal.events import EventKind
from loom_nb.kernel import ExecutionContext, FlowRegistry
from loom_nb.messages import Message, ModelRequest, ModelResponse, Usage
from loom_nb.providers.scripted import ScriptedModel
from loom_nb.runtime import Runtime
from loom_nb.testing import FakeClock, SequentialIds
from tests.agent.support import (
    FLOW,
    MODEL,
    assert_rebuilt_matches,
    calls,
    events,
    install,
    lookup_tool,
    make_runtime,
    raw_call,
    register_model,
    run_agent,
    step_ids,
    turn_of,
)


# -- running to an answer --------------------------------------------------------------------------
async def test_the_loop_runs_to_an_answer_one_step_per_turn_and_per_tool_call() -> None:
    seen: list[str] = []
    model = ScriptedModel(
        [
            calls(("lookup", {"city": "Paris"}), text="Checking Paris."),
            calls(("lookup", {"city": "Rome"}), ("lookup", {"city": "Oslo"})),
            ModelResponse.text("Sunny everywhere."),
        ]
    )
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)], system="You report weather.")
    rt, result = await run_agent(config, model, "Weather?")

    assert result.status == "completed"
    out = AgentResult.model_validate(result.output)
    assert (out.output, out.stop_reason, out.turns) == ("Sunny everywhere.", "end_turn", 3)
    assert seen == ["Paris", "Rome", "Oslo"]
    eid = result.execution_id
    expected = ["#turn:0", "#turn:0:tool:0", "#turn:1", "#turn:1:tool:0", "#turn:1:tool:1", "#turn:2"]
    assert step_ids(rt, eid) == expected
    assert step_ids(rt, eid, EventKind.STEP_COMPLETED) == expected
    started = {e.step_id: e.data for e in events(rt, eid, EventKind.STEP_STARTED)}
    for sid, data in started.items():
        assert data["effect"] == ("tools.lookup" if ":tool:" in (sid or "") else MODEL)
        assert "idempotency_key" not in data and "digest" not in data  # event format 2 derives them
    # A tool step's input is a reference to call j's arguments in the model step's output.
    assert started["#turn:1:tool:1"]["ref"] == ["#turn:1", "message", "tool_calls", 1, "arguments"]
    steps = rt.history(eid).steps
    assert [steps[f"#turn:1:tool:{j}"].input for j in (0, 1)] == [{"city": "Rome"}, {"city": "Oslo"}]
    # Usage is the sum of every model step's recorded usage.
    recorded = [s.usage for s in steps.values() if s.effect == MODEL]
    assert out.usage.input_tokens == sum(u["input_tokens"] for u in recorded) > 0
    assert out.usage.output_tokens == sum(u["output_tokens"] for u in recorded) > 0
    # The last request holds the whole conversation, tool results in call order.
    last = model.history[2].messages
    assert [m.role for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert [(m.tool_call_id, m.text) for m in last if m.role == "tool"] == [
        ("call_0", "Paris: sunny"),
        ("call_0", "Rome: sunny"),
        ("call_1", "Oslo: sunny"),
    ]
    assert_rebuilt_matches(rt, eid, model)
    report = await rt.replay(eid)
    assert report.reproduced, report.message


@pytest.mark.parametrize("parallel", [True, False])
async def test_concurrent_tool_calls_of_one_turn_keep_the_ids_of_their_position(parallel: bool) -> None:
    trace: list[str] = []

    @loom.tool
    async def wait(ticks: int) -> str:
        """Wait some event-loop ticks."""
        trace.append(f"start {ticks}")
        for _ in range(ticks):
            await asyncio.sleep(0)
        trace.append(f"end {ticks}")
        return f"waited {ticks}"

    model = ScriptedModel(
        [
            calls(("wait", {"ticks": 60}), ("wait", {"ticks": 30}), ("wait", {"ticks": 0})),
            ModelResponse.text("done"),
        ]
    )
    config = AgentConfig(model=MODEL, tools=[wait], parallel_tools=parallel)
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    # The ticks are far apart: a commit before a call takes a few ticks of its own (group commit).
    if parallel:  # all three ran at once and finished in reverse order
        assert trace[:3] == ["start 60", "start 30", "start 0"]
        assert [t for t in trace if t.startswith("end")] == ["end 0", "end 30", "end 60"]
        assert step_ids(rt, eid, EventKind.STEP_COMPLETED)[1:4] == [
            "#turn:0:tool:2",
            "#turn:0:tool:1",
            "#turn:0:tool:0",
        ]
    else:
        assert trace == ["start 60", "end 60", "start 30", "end 30", "start 0", "end 0"]
    # Whatever the completion order, tool j is call j of the turn: its input and its output.
    for j, ticks in enumerate((60, 30, 0)):
        sid = f"#turn:0:tool:{j}"
        (done,) = [e for e in events(rt, eid, EventKind.STEP_COMPLETED) if e.step_id == sid]
        assert (rt.history(eid).steps[sid].input, done.data["output"]) == ({"ticks": ticks}, f"waited {ticks}")
    tool_msgs = [m for m in model.history[1].messages if m.role == "tool"]
    assert [(m.tool_call_id, m.text) for m in tool_msgs] == [
        ("call_0", "waited 60"),
        ("call_1", "waited 30"),
        ("call_2", "waited 0"),
    ]
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced


def test_a_config_with_neither_or_both_ways_to_a_model_is_refused_up_front() -> None:
    with pytest.raises(UsageError, match=r"exactly one way to reach a model.*and neither was given"):
        AgentConfig()
    routes = Routes(models=["model.a"], policy=lambda models, request, turn: models[0])
    with pytest.raises(UsageError, match=r"exactly one way to reach a model.*not both"):
        AgentConfig(model=MODEL, routes=routes)
    with pytest.raises(UsageError, match="neither was given"):
        loom.Agent(tools=[])
    with pytest.raises(UsageError, match="max_turns must be at least 1"):
        AgentConfig(model=MODEL, max_turns=0)
    with pytest.raises(UsageError, match=r"Routes\(models=\.\.\.\) needs at least one model effect id"):
        Routes(models=[], policy=lambda models, request, turn: None)
    with pytest.raises(UsageError, match=r"skills=\.\.\. needs skill_selector"):
        AgentConfig(model=MODEL, skills=[loom.Skill(name="a", instructions="b")])
    seen: list[str] = []
    with pytest.raises(UsageError, match="two tools of one agent share the name 'lookup'"):
        AgentConfig(model=MODEL, tools=[lookup_tool(seen), lookup_tool(seen)])


async def test_max_turns_ends_the_run_with_stop_reason_max_turns() -> None:
    seen: list[str] = []
    model = ScriptedModel(lambda r: calls(("lookup", {"city": f"c{turn_of(r)}"}), text=f"turn {turn_of(r)}"))
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)], max_turns=3)
    rt, result = await run_agent(config, model)

    out = AgentResult.model_validate(result.output)
    assert result.status == "completed"
    assert (out.stop_reason, out.turns, out.output) == ("max_turns", 3, "turn 2")
    assert len(model.history) == 3
    assert seen == ["c0", "c1", "c2"]
    assert "#turn:3" not in step_ids(rt, result.execution_id)


# -- bad model output is data ------------------------------------------------------------------------
BAD_CALLS: list[tuple[str, Any, str]] = [
    (
        "unknown tool",
        calls(("forecast", {"city": "Paris"})),
        "Error: there is no tool named 'forecast'. Available tools: lookup.",
    ),
    (
        "not JSON",
        ModelResponse.tool_calls([raw_call("lookup", '{"city": Par')]),
        "Error: the arguments for 'lookup' are not a JSON object: '{\"city\": Par'",
    ),
    (
        "schema",
        calls(("lookup", {"town": "Paris"})),
        "Error: invalid arguments for tool 'lookup': city: Field required; town: Extra inputs are not "
        "permitted. Call the tool again with corrected arguments.",
    ),
]


@pytest.mark.parametrize(("case", "bad", "told"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
async def test_a_bad_tool_call_comes_back_to_the_model_as_an_error_it_can_correct(
    case: str, bad: ModelResponse, told: str
) -> None:
    seen: list[str] = []
    model = ScriptedModel([bad, calls(("lookup", {"city": "Paris"})), ModelResponse.text("Paris is sunny.")])
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)])
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    assert result.status == "completed"
    assert result.output["output"] == "Paris is sunny."
    error = model.history[1].messages[-1]
    assert (error.role, error.tool_call_id, error.name, error.is_error) == (
        "tool",
        "call_0",
        bad.message.tool_calls[0].name,
        True,
    )
    assert error.text == told
    # No tool step was journaled (or run) for the bad call; the corrected one ran once.
    assert step_ids(rt, eid) == ["#turn:0", "#turn:1", "#turn:1:tool:0", "#turn:2"]
    assert seen == ["Paris"]
    # The error message is journaled once, as part of the next model turn's delta.
    (turn1,) = [e for e in events(rt, eid, EventKind.STEP_STARTED) if e.step_id == "#turn:1"]
    (journaled,) = [a["msg"] for a in turn1.data["input"]["add"] if "msg" in a]
    assert journaled["text"] == told
    assert_rebuilt_matches(rt, eid, model)
    assert (await rt.replay(eid)).reproduced


async def test_a_tool_that_raises_gives_the_model_an_error_result_and_the_run_goes_on() -> None:
    seen: list[str] = []
    model = ScriptedModel([calls(("lookup", {"city": "Atlantis"})), ModelResponse.text("Atlantis is unknown.")])
    config = AgentConfig(model=MODEL, tools=[lookup_tool(seen)])
    rt, result = await run_agent(config, model)
    eid = result.execution_id

    assert result.status == "completed"
    assert result.output["output"] == "Atlantis is unknown."
    told = model.history[1].messages[-1]
    assert (told.role, told.is_error) == ("tool", True)
    assert told.text == "Error: the tool 'lookup' failed: ValueError: no such city"
    (failed,) = [e for e in events(rt, eid, EventKind.STEP_FAILED)]
    assert failed.step_id == "#turn:0:tool:0"
    assert failed.data["error"]["type"] == "builtins:ValueError"
    assert failed.data["will_retry"] is False
    assert_rebuilt_matches(rt, eid, model)
    report = await rt.replay(eid)
    assert report.reproduced, report.message
    assert seen == ["Atlantis"]  # the replay re-raised the recorded failure; the tool did not run


async def test_a_failure_of_a_type_no_module_defines_reaches_the_model_the_same_after_a_resume() -> None:
    """The error text is part of the next turn's journaled input: a re-run of the body (resume,
    recovery) rebuilds the failure from the journal, so the text must come out identical even when
    the exception type cannot be imported again."""

    class LocalError(Exception):
        pass

    @loom.tool
    def flaky() -> str:
        """Fails."""
        raise LocalError("disk on fire")

    @loom.tool(needs_approval=True)
    def wipe() -> str:
        """Destructive."""
        return "wiped"

    model = ScriptedModel([calls(("flaky", {})), calls(("wipe", {})), ModelResponse.text("ok")])
    config = AgentConfig(model=MODEL, tools=[flaky, wipe])
    rt, result = await run_agent(config, model)
    assert result.status == "suspended"
    told = model.history[1].messages[-1].text
    assert told == "Error: the tool 'flaky' failed: LocalError: disk on fire"
    resumed = await rt.resume(result.execution_id, "#turn:1:tool:0:approval", {"approved": True})
    assert resumed.status == "completed", resumed.error
    assert_rebuilt_matches(rt, result.execution_id, model)


async def test_a_tool_refused_by_the_ring_ends_the_run_instead_of_going_back_to_the_model() -> None:
    @loom.tool(scopes={"files.delete"})
    def purge() -> str:
        """Needs a scope the principal lacks."""
        return "purged"

    @loom.tool(quota=Quota(calls=1))
    def ping() -> str:
        """At most once per execution."""
        return "pong"

    for script, error in [
        ([calls(("purge", {})), ModelResponse.text("never")], NotAuthorizedError),
        ([calls(("ping", {})), calls(("ping", {})), ModelResponse.text("never")], QuotaExceededError),
    ]:
        model = ScriptedModel(script)
        _, result = await run_agent(AgentConfig(model=MODEL, tools=[purge, ping]), model)
        assert result.status == "failed"
        assert isinstance(result.exception(), error)
        assert len(model.history) == len(script) - 1  # the model was not told: the run ended


# -- streaming -----------------------------------------------------------------------------------------
async def test_scripted_model_streams_word_deltas_and_keeps_every_request() -> None:
    model = ScriptedModel([ModelResponse.text("Hello there. How are you?"), ModelResponse.text("Bye.")])
    first = ModelRequest(messages=(Message.user("hi"),))
    deltas: list[str] = []
    response = await model.complete(first, on_delta=deltas.append)
    assert deltas == ["Hello ", "there. ", "How ", "are ", "you?"]
    assert response.message.text == "Hello there. How are you?"
    assert response.usage == Usage(input_tokens=0, output_tokens=6)  # characters / 4
    second = ModelRequest(messages=(Message.user("again"),))
    await model.complete(second)
    assert model.history == [first, second]
    with pytest.raises(UsageError, match="ran out of responses: call 3 but the script has 2"):
        await model.complete(first)


async def test_scripted_usage_is_counted_turn_by_turn_as_the_whole_sum_would_and_history_is_bounded() -> None:
    model = ScriptedModel(lambda request: ModelResponse.text("ok"), history_size=3)
    sys_msg, messages = Message.system("be brief"), [Message.user("a" * 40)]
    expected = []
    for turn in range(8):
        if turn == 5:  # a compaction: the transcript is replaced, not extended
            messages = [Message.user("summary " * 3)]
        request = ModelRequest(messages=(sys_msg, *messages))
        response = await model.complete(request)
        expected.append(sum(len(m.text) for m in request.messages) // 4)
        assert response.usage.input_tokens == expected[-1], turn
        messages = [*messages, Message.assistant("ok"), Message.user("b" * (turn + 1) * 8)]
    # a request from another run, sharing no prefix object
    other = ModelRequest(messages=(Message.user("c" * 80),))
    assert (await model.complete(other)).usage.input_tokens == 20
    assert model.calls == 9 and len(model.history) == 3 and model.history[-1] is other
    assert "calls=9" in repr(model)
    with pytest.raises(UsageError, match="history_size=0"):
        ScriptedModel([], history_size=0)


async def test_the_loop_streams_every_delta_live_and_journals_sentence_chunks() -> None:
    text = "Yes. The first sentence is here. The second one follows it. And a short tail"
    model = ScriptedModel([ModelResponse.text(text)])
    rt = make_runtime()
    rt.event_format = 1  # format 1 journals every chunk; format 2 only those of a step that did not complete
    live: list[str] = []
    rt.observe(on_delta=lambda eid, sid, delta: live.append(delta))
    _, result = await run_agent(AgentConfig(model=MODEL, chunk_min_chars=20), model, rt=rt)

    assert "".join(live) == text and len(live) == len(text.split())
    chunks = [e.data["text"] for e in events(rt, result.execution_id, EventKind.STREAM_CHUNK)]
    # Whole sentences of at least chunk_min_chars ("Yes. " alone is too short), the rest flushed.
    assert chunks == ["Yes. The first sentence is here. ", "The second one follows it. ", "And a short tail"]
    # Event format 2 keeps no durable copy once the model step completed (its output holds the text).
    rt1 = make_runtime()
    rt1.event_format = 2
    _, result1 = await run_agent(
        AgentConfig(model=MODEL, chunk_min_chars=20), ScriptedModel([ModelResponse.text(text)]), rt=rt1
    )
    assert events(rt1, result1.execution_id, EventKind.STREAM_CHUNK) == []
    assert rt1.history(result1.execution_id).steps["#turn:0"].output["message"]["text"] == text
    # stream=False journals no chunks at all.
    quiet = ScriptedModel([ModelResponse.text(text)])
    rt2, result2 = await run_agent(AgentConfig(model=MODEL, stream=False), quiet)
    assert events(rt2, result2.execution_id, EventKind.STREAM_CHUNK) == []


# -- agent_step: the opaque form --------------------------------------------------------------------------
async def test_agent_step_runs_the_whole_loop_as_one_journaled_step() -> None:
    seen: list[str] = []
    lookup = lookup_tool(seen)
    model = ScriptedModel([calls(("lookup", {"city": "Paris"})), ModelResponse.text("Sunny.")])
    rt = make_runtime()
    register_model(rt, model)
    lookup.register(rt.effects)
    run_step = agent_step(AgentConfig(model=MODEL, tools=[lookup]), name="weather")

    async def body(ctx: ExecutionContext, input: Any) -> Any:
        return await run_step(ctx, input)

    rt.flows.register(body, "opaque")
    result = await rt.start("opaque", "Weather?")

    assert result.status == "completed"
    assert AgentResult.model_validate(result.output).output == "Sunny."
    assert seen == ["Paris"] and len(model.history) == 2
    (started,) = events(rt, result.execution_id, EventKind.STEP_STARTED)
    assert (started.step_id, started.data["effect"]) == ("agent", "agent_step.weather")
    assert [e.kind for e in events(rt, result.execution_id)] == [
        EventKind.EXECUTION_STARTED,
        EventKind.STEP_STARTED,
        EventKind.STEP_COMPLETED,
        EventKind.EXECUTION_COMPLETED,
    ]
    assert (await rt.replay(result.execution_id)).reproduced
    assert len(model.history) == 2


async def test_agent_step_refuses_a_tool_that_needs_approval_with_a_usage_error() -> None:
    wiped: list[str] = []

    @loom.tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Delete everything under a path."""
        wiped.append(path)
        return "wiped"

    model = ScriptedModel([calls(("wipe", {"path": "/"})), ModelResponse.text("done")])
    rt = make_runtime()
    register_model(rt, model)
    wipe.register(rt.effects)
    run_step = agent_step(AgentConfig(model=MODEL, tools=[wipe]))

    async def body(ctx: ExecutionContext, input: Any) -> Any:
        return await run_step(ctx, input)

    rt.flows.register(body, "opaque")
    result = await rt.start("opaque", "clean up")

    assert result.status == "failed"
    error = result.exception()
    assert isinstance(error, UsageError)
    assert str(error) == (
        "agent_step cannot wait at gates (#turn:0:tool:0:approval): a tool needs approval, which needs "
        "per-turn durability. Use agent_loop (or loom.Agent) instead."
    )
    assert wiped == []


# -- the Agent facade ---------------------------------------------------------------------------------
def make_agent(deleted: list[str], *, name: str = "tidy", **options: Any) -> loom.Agent:
    @loom.tool(needs_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    def respond(request: ModelRequest) -> ModelResponse:
        if turn_of(request) == 0:
            return calls(("delete_file", {"path": "/tmp/stale.log"}), text="Deleting it.")
        return ModelResponse.text(f"Result: {request.messages[-1].text}")

    return loom.Agent(model=ScriptedModel(respond), tools=[delete_file], name=name, **options)


def fake_runtime(path: str | Path = ":memory:") -> loom.Runtime:
    return loom.Runtime.open(path, clock=FakeClock(), ids=SequentialIds(), flows=FlowRegistry())


def test_in_a_script_start_returns_a_suspended_run_and_approve_resumes_synchronously() -> None:
    deleted: list[str] = []
    agent = make_agent(deleted)
    with fake_runtime() as rt:
        run = agent.start("Remove the stale log", runtime=rt)
        assert run.status == "suspended"
        (gate,) = run.gates
        assert (gate.gate_id, gate.kind, gate.tool) == (
            "#turn:0:tool:0:approval",
            "AgentToolApproval",
            "delete_file",
        )
        assert gate.arguments == {"path": "/tmp/stale.log"}
        assert deleted == []
        gate.approve()
        assert run.status == "completed"
        assert deleted == ["/tmp/stale.log"]
        assert run.result is not None and run.result.output == "Result: deleted /tmp/stale.log"
        with pytest.raises(
            UsageError, match=r"gate '#turn:0:tool:0:approval' of execution .* is already decided: approved,"
        ) as info:
            gate.approve()
        assert "ApprovalDecision(" not in str(info.value) and "sha256" not in str(info.value)
        assert deleted == ["/tmp/stale.log"]


def test_a_resume_payload_that_fails_the_approval_schema_is_refused_and_the_gate_stays_open() -> None:
    deleted: list[str] = []
    agent = make_agent(deleted)
    with fake_runtime() as rt:
        run = agent.start("Remove the stale log", runtime=rt)
        (gate,) = run.gates
        with pytest.raises(ResumeValidationError, match=r"is not a valid ApprovalDecision") as info:
            gate.resolve({"approved": "perhaps"})
        assert info.value.gate_id == "#turn:0:tool:0:approval"
        assert "the gate is still open" in str(info.value)
        assert not gate.resolved and run.status == "suspended" and deleted == []
        gate.refuse("not today")
        assert run.status == "completed" and deleted == []


async def test_awaiting_a_run_gives_the_agent_result(rt: Runtime) -> None:
    agent = loom.Agent(model=ScriptedModel([ModelResponse.text("Hi!")]), name="greeter")
    run = agent.start("hello", runtime=rt)
    assert run.status == "running"  # a task on this loop: start returned at once
    result = await run
    assert isinstance(result, AgentResult)
    assert (result.output, result.stop_reason, result.turns) == ("Hi!", "end_turn", 1)
    assert run.status == "completed"


async def test_a_failed_run_reports_its_exception_and_awaiting_it_raises() -> None:
    class Down:
        name = "down"

        async def complete(
            self, request: ModelRequest, *, on_delta: Any = None, idempotency_key: str | None = None
        ) -> ModelResponse:
            raise ProviderHTTPError("model unavailable", status_code=400, body="bad request")

    rt = make_runtime()
    agent = loom.Agent(model=Down(), name="broken", model_retry=None)
    run = agent.start("hello", runtime=rt)
    with pytest.raises(ProviderHTTPError, match="model unavailable"):
        await run
    assert run.status == "failed"
    error = run.exception()
    assert isinstance(error, ProviderHTTPError) and error.status_code == 400
    assert run.result is None
    assert rt.result(run.id).status == "failed"


def test_attach_after_re_opening_a_duckdb_journal_in_a_new_runtime(tmp_path: Path) -> None:
    path = tmp_path / "loom.duckdb"
    deleted: list[str] = []
    with fake_runtime(path) as rt:
        run = make_agent(deleted).start("Remove the stale log", runtime=rt)
        assert run.status == "suspended"
        execution_id = run.id

    later: list[str] = []
    with fake_runtime(path) as rt2:  # a new kernel: new runtime, new agent object, same journal
        attached = make_agent(later).attach(execution_id, runtime=rt2)
        assert attached.status == "suspended"
        (gate,) = attached.gates
        assert gate.arguments == {"path": "/tmp/stale.log"}
        gate.approve()
        assert attached.status == "completed"
        assert attached.result is not None and attached.result.output == "Result: deleted /tmp/stale.log"
        assert (deleted, later) == ([], ["/tmp/stale.log"])
        assert step_ids(rt2, execution_id) == ["#turn:0", "#turn:0:tool:0", "#turn:1"]
    with pytest.raises(UsageError, match="no execution 'nope'"), fake_runtime(path) as rt3:
        make_agent([]).attach("nope", runtime=rt3)


async def test_agent_loop_rejects_an_input_that_is_not_a_message(rt: Runtime) -> None:
    register_model(rt, ScriptedModel([ModelResponse.text("x")]))
    install(rt, AgentConfig(model=MODEL))
    result = await rt.start(FLOW, {"question": 1})
    assert result.status == "failed"
    assert "agent_loop input must be the user's message" in str(result.exception())
    ok = await rt.start(FLOW, {"message": "hi"})
    assert ok.status == "completed"
    _ = agent_loop  # the public entry point tested throughout through install()
