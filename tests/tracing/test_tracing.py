"""OpenTelemetry traces built from the journal (``loom.tracing``), over real agent runs.

The SDK's ``InMemorySpanExporter`` receives the spans: the span tree, names, GenAI attributes, parent
links, span events and times (equal to the journal's) are checked; a live export and an export of the
same journal afterwards (in the same runtime, and in a new process's runtime on the DuckDB file) give
the same spans field by field, ids aside.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import loom_nb as loom
from loom_nb.errors import UsageError
from loom_nb.journal.events import EventKind
from loom_nb.messages import ModelRequest, ToolCall
from loom_nb.testing import FakeClock, SequentialIds
from tests.agent import golden_agent_flows
from tests.analysis.support import messy_run, retried_run, search, tidy_agent, tidy_run
from tests.tracing.support import (
    Recorder,
    after_a_crash,
    by_key,
    event_time,
    failed_run,
    seconds,
    step_times,
    trace_fields,
    tree,
)

EXECUTION = ("invoke_agent agent", "exec-1")

Scenario = Callable[[loom.Runtime], Awaitable[str]]
SCENARIOS: dict[str, Scenario] = {"tidy": tidy_run, "messy": messy_run, "retried": retried_run, "failed": failed_run}


async def test_the_span_tree_of_an_approved_and_a_refused_tool_call(rt: loom.Runtime, recorder: Recorder) -> None:
    export = loom.tracing.export(rt, recorder.provider)
    eid = await tidy_run(rt)
    spans = recorder.spans()
    assert export.traces == [(eid, format(spans[0].context.trace_id, "032x"))]  # type: ignore[union-attr]
    assert tree(spans) == {
        EXECUTION: None,
        ("turn 0", 0): EXECUTION,
        ("turn 1", 1): EXECUTION,
        ("turn 2", 2): EXECUTION,
        ("chat model.agent", "#turn:0"): ("turn 0", 0),
        ("execute_tool search", "#turn:0:tool:0"): ("turn 0", 0),
        ("chat model.agent", "#turn:1"): ("turn 1", 1),
        ("gate AgentToolApproval", "#turn:1:tool:0:approval"): ("turn 1", 1),
        ("gate AgentToolApproval", "#turn:1:tool:1:approval"): ("turn 1", 1),
        ("execute_tool delete_file", "#turn:1:tool:0"): ("turn 1", 1),
        ("chat model.agent", "#turn:2"): ("turn 2", 2),
    }
    s = by_key(spans)
    root = s[EXECUTION]
    assert root.kind == SpanKind.INTERNAL and root.status.status_code == StatusCode.UNSET
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent",
        "gen_ai.usage.input_tokens": 600,
        "gen_ai.usage.output_tokens": 33,
        "loom.usage.cost": pytest.approx(0.006),
        "loom.execution_id": eid,
        "loom.flow": "agent:agent",
        "loom.status": "completed",
    }
    chat = s[("chat model.agent", "#turn:1")]
    assert chat.kind == SpanKind.CLIENT
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "model.agent",
        "gen_ai.usage.input_tokens": 200,
        "gen_ai.usage.output_tokens": 11,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "loom.usage.cost": pytest.approx(0.002),
        "loom.execution_id": eid,
        "loom.step_id": "#turn:1",
        "loom.effect_id": "model.agent",
        "loom.step.kind": "model",
        "loom.step.status": "completed",
        "loom.step.attempts": 1,
        "loom.turn": 1,
    }
    tool = s[("execute_tool delete_file", "#turn:1:tool:0")]
    assert tool.kind == SpanKind.INTERNAL
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "delete_file",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call_0",
        "loom.execution_id": eid,
        "loom.step_id": "#turn:1:tool:0",
        "loom.effect_id": "tools.delete_file",
        "loom.step.kind": "tool",
        "loom.step.status": "completed",
        "loom.step.attempts": 1,
        "loom.turn": 1,
        "loom.tool_index": 0,
    }
    approved = dict(s[("gate AgentToolApproval", "#turn:1:tool:0:approval")].attributes or {})
    refused = dict(s[("gate AgentToolApproval", "#turn:1:tool:1:approval")].attributes or {})
    assert approved["loom.gate.answer"] == "approved" and "loom.gate.reason" not in approved
    assert (refused["loom.gate.answer"], refused["loom.gate.reason"]) == ("refused", "keep b")
    assert refused | {"loom.gate.answer": "?", "loom.gate.reason": "?"} == {
        "gen_ai.tool.name": "delete_file",
        "gen_ai.tool.call.id": "call_1",
        "loom.execution_id": eid,
        "loom.gate_id": "#turn:1:tool:1:approval",
        "loom.gate.kind": "AgentToolApproval",
        "loom.gate.status": "resolved",
        "loom.gate.answer": "?",
        "loom.gate.reason": "?",
        "loom.step_id": "#turn:1:tool:1",
        "loom.turn": 1,
        "loom.tool_index": 1,
    }
    assert [(e.name, dict(e.attributes or {})) for e in root.events] == [
        ("loom.suspended", {"loom.gate_ids": ("#turn:1:tool:0:approval", "#turn:1:tool:1:approval")}),
        ("loom.resumed", {"loom.gate_id": "#turn:1:tool:1:approval"}),
    ]


async def test_span_times_are_the_journals(rt: loom.Runtime, recorder: Recorder) -> None:
    loom.tracing.export(rt, recorder.provider)
    eid = await tidy_run(rt, wait=90.0)
    events = rt.journal.read(eid)
    s = by_key(recorder.spans())
    for (name, ident), span in s.items():
        start, end = seconds(span.start_time), seconds(span.end_time)
        if name.startswith(("chat", "execute_tool")):
            assert (start, end) == step_times(events, str(ident)), name
        elif name.startswith("gate"):
            opened = event_time(events, EventKind.GATE_OPENED, str(ident))
            assert (start, end) == (opened, event_time(events, EventKind.GATE_RESOLVED, str(ident)))
    root = s[EXECUTION]
    assert (seconds(root.start_time), seconds(root.end_time)) == (
        event_time(events, EventKind.EXECUTION_STARTED),
        event_time(events, EventKind.EXECUTION_COMPLETED),
    )
    turn1 = s[("turn 1", 1)]
    assert seconds(turn1.start_time) == step_times(events, "#turn:1")[0]
    assert seconds(turn1.end_time) == step_times(events, "#turn:1:tool:0")[1]
    gate_wait = s[("gate AgentToolApproval", "#turn:1:tool:0:approval")]
    assert seconds(gate_wait.end_time) - seconds(gate_wait.start_time) >= 90.0
    (suspended, resumed) = root.events
    assert seconds(suspended.timestamp) == event_time(events, EventKind.EXECUTION_SUSPENDED)
    assert seconds(resumed.timestamp) == event_time(events, EventKind.EXECUTION_RESUMED)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_a_live_export_and_an_export_of_the_journal_agree(
    rt: loom.Runtime, recorder: Recorder, scenario: str
) -> None:
    export = loom.tracing.export(rt, recorder.provider)
    eid = await SCENARIOS[scenario](rt)
    live = recorder.spans()
    recorder.clear()
    trace_id = loom.tracing.export_execution(eid, rt, recorder.provider)
    again = recorder.spans()
    assert trace_fields(again) == trace_fields(live)
    assert len(live) == len(again) >= 4
    assert {format(s.context.trace_id, "032x") for s in again} == {trace_id}  # type: ignore[union-attr]
    assert [e for e, _ in export.traces] == [eid]
    assert trace_id != export.traces[0][1]  # a new trace, the same spans


@pytest.mark.slow
async def test_a_journal_read_back_in_a_new_process_exports_the_same_trace(tmp_path: Path) -> None:
    path = tmp_path / "journal.duckdb"
    recorder = Recorder()
    with loom.Runtime.open(path, clock=FakeClock(tick=0.5), ids=SequentialIds()) as rt:
        loom.tracing.export(rt, recorder.provider)
        eid = await tidy_run(rt, agent=tidy_agent())
    live = trace_fields(recorder.spans())
    script = (
        "import json, sys\n"
        "import loom_nb as loom\n"
        "from tests.tracing.support import Recorder, trace_fields\n"
        "rec = Recorder()\n"
        "with loom.Runtime.open(sys.argv[1], read_only=True) as rt:\n"
        "    loom.tracing.export_execution(sys.argv[2], rt, rec.provider)\n"
        "print(repr(trace_fields(rec.spans())))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", script, str(path), eid], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == repr(live)


async def test_a_retried_tool_has_its_retries_as_span_events(rt: loom.Runtime, recorder: Recorder) -> None:
    loom.tracing.export(rt, recorder.provider)
    eid = await retried_run(rt)
    events = rt.journal.read(eid)
    tool = by_key(recorder.spans())[("execute_tool flaky", "#turn:0:tool:0")]
    assert tool.status.status_code == StatusCode.UNSET
    assert dict(tool.attributes or {})["loom.step.attempts"] == 3
    failures = [e for e in events if e.kind == EventKind.STEP_FAILED]
    starts = [e for e in events if e.kind == EventKind.STEP_STARTED and e.step_id == "#turn:0:tool:0"]
    assert [(e.name, seconds(e.timestamp), dict(e.attributes or {})) for e in tool.events] == [
        (
            "loom.retry",
            failures[0].at,
            {
                "loom.attempt": 1,
                "exception.type": "builtins:ConnectionError",
                "exception.message": "try again",
                "loom.retry.delay": 1.0,
            },
        ),
        ("loom.attempt", starts[1].at, {"loom.attempt": 2}),
        (
            "loom.retry",
            failures[1].at,
            {
                "loom.attempt": 2,
                "exception.type": "builtins:ConnectionError",
                "exception.message": "try again",
                "loom.retry.delay": 2.0,
            },
        ),
        ("loom.attempt", starts[2].at, {"loom.attempt": 3}),
    ]


async def test_a_failed_tool_step_has_error_status(rt: loom.Runtime, recorder: Recorder) -> None:
    loom.tracing.export(rt, recorder.provider)
    eid = await messy_run(rt)
    s = by_key(recorder.spans())
    assert sorted(name for name, _ in s if name.startswith("execute_tool")) == [
        "execute_tool explode",
        "execute_tool search",
    ]
    explode = s[("execute_tool explode", "#turn:0:tool:1")]
    assert explode.status.status_code == StatusCode.ERROR
    assert explode.status.description == "builtins:ValueError: boom: testing"
    assert dict(explode.attributes or {})["error.type"] == "builtins:ValueError"
    assert dict(explode.attributes or {})["loom.step.status"] == "failed"
    ((name, at, attrs),) = [(e.name, e.timestamp, dict(e.attributes or {})) for e in explode.events]
    assert (name, attrs) == (
        "exception",
        {"exception.type": "builtins:ValueError", "exception.message": "boom: testing"},
    )
    assert seconds(at) == step_times(rt.journal.read(eid), "#turn:0:tool:1")[1]
    assert s[("execute_tool search", "#turn:0:tool:2")].status.status_code == StatusCode.UNSET
    assert s[("invoke_agent messy", eid)].status.status_code == StatusCode.UNSET


async def test_a_failed_run_has_error_status(rt: loom.Runtime, recorder: Recorder) -> None:
    export = loom.tracing.export(rt, recorder.provider)
    eid = await failed_run(rt)
    assert rt.journal.read(eid)[-1].kind == EventKind.EXECUTION_FAILED
    assert [e for e, _ in export.traces] == [eid]
    s = by_key(recorder.spans())
    root = s[("invoke_agent launcher", eid)]
    assert root.status.status_code == StatusCode.ERROR
    assert root.status.description == "loom_nb.errors:NotAuthorizedError: nobody may launch rocket"
    attrs = dict(root.attributes or {})
    assert (attrs["loom.status"], attrs["error.type"]) == ("failed", "loom_nb.errors:NotAuthorizedError")
    assert [e.name for e in root.events] == ["exception"]
    assert seconds(root.end_time) == event_time(rt.journal.read(eid), EventKind.EXECUTION_FAILED)
    assert s[("execute_tool launch", "#turn:0:tool:0")].status.status_code == StatusCode.ERROR


@pytest.mark.parametrize("kind", ["memory", "duckdb"])
async def test_an_in_doubt_step_resolved_after_a_crash(kind: str, recorder: Recorder) -> None:
    eid = golden_agent_flows.EXECUTION_ID
    with after_a_crash(kind) as rt:
        export = loom.tracing.export(rt, recorder.provider, on_suspend=True)
        (result,) = await rt.recover()
        gate = result.gates[0].gate_id
        snapshot = by_key(recorder.spans())
        recorder.clear()
        await rt.resume(eid, gate, loom.InDoubtResolution(action="happened", output="by hand"))
        final = recorder.spans()
        events = rt.journal.read(eid)
        recorder.clear()
        loom.tracing.export_execution(eid, rt, recorder.provider)
        assert trace_fields(recorder.spans()) == trace_fields(final)
    assert [e for e, _ in export.traces] == [eid, eid]
    step_key, gate_key = ("execute_tool delete_file", "#turn:1:tool:0"), ("gate InDoubt", gate)
    # At the suspension: the step is in doubt, the gate open; both end at the suspension.
    suspended_at = [e.at for e in events if e.kind == EventKind.EXECUTION_SUSPENDED][-1]  # the in-doubt one
    assert dict(snapshot[step_key].attributes or {})["loom.step.status"] == "in_doubt"
    assert dict(snapshot[gate_key].attributes or {})["loom.gate.status"] == "open"
    assert {seconds(snapshot[k].end_time) for k in (step_key, gate_key)} == {suspended_at}
    assert dict(snapshot[("invoke_agent tidy", eid)].attributes or {})["loom.status"] == "suspended"
    # Once resolved: the gate's answer, the step's in-doubt and resolution events, under turn 1.
    s = by_key(final)
    assert tree(final)[gate_key] == tree(final)[step_key] == ("turn 1", 1)
    gate_attrs = dict(s[gate_key].attributes or {})
    assert (gate_attrs["loom.gate.answer"], gate_attrs["loom.step_id"]) == ("happened", "#turn:1:tool:0")
    step = s[step_key]
    assert dict(step.attributes or {})["loom.step.status"] == "completed"
    assert [(e.name, seconds(e.timestamp), dict(e.attributes or {})) for e in step.events] == [
        ("loom.in_doubt", event_time(events, EventKind.STEP_IN_DOUBT, "#turn:1:tool:0"), {"loom.attempt": 1}),
        ("loom.resolved", step_times(events, "#turn:1:tool:0")[1], {"loom.gate_id": gate}),
    ]


def test_the_golden_agent_journal_compaction_is_a_chat_span_in_its_turn(recorder: Recorder) -> None:
    rt = loom.Runtime(golden_agent_flows.load(), clock=FakeClock(tick=1), ids=SequentialIds())
    loom.tracing.export_execution(golden_agent_flows.EXECUTION_ID, rt, recorder.provider)
    spans = recorder.spans()
    parents = tree(spans)
    compaction = ("chat summarize", "#turn:2:compact")
    assert parents[compaction] == ("turn 2", 2)
    assert dict(by_key(spans)[compaction].attributes or {})["loom.step.kind"] == "compact"
    assert sorted(k for k in parents if k[0].startswith(("chat", "execute_tool"))) == [
        ("chat model.tidy", "#turn:0"),
        ("chat model.tidy", "#turn:1"),
        ("chat model.tidy", "#turn:2"),
        compaction,
        ("execute_tool delete_file", "#turn:1:tool:0"),
        ("execute_tool list_files", "#turn:0:tool:0"),
    ]


async def test_a_plain_flow_is_a_workflow_with_its_steps_under_it(rt: loom.Runtime, recorder: Recorder) -> None:
    async def double(x: int) -> int:
        return 2 * x

    rt.effects.register("math.double", double)

    async def doubling(ctx: loom.FlowContext, x: int) -> int:
        return int(await ctx.execute("math.double", x)) + int(await ctx.execute("math.double", x))

    with loom.tracing.export(rt, recorder.provider) as export:
        result = await rt.start(doubling, 3)
    assert not export.active
    assert tree(recorder.spans()) == {
        ("invoke_workflow doubling", result.execution_id): None,
        ("math.double", "#1"): ("invoke_workflow doubling", result.execution_id),
        ("math.double", "#2"): ("invoke_workflow doubling", result.execution_id),
    }
    root = by_key(recorder.spans())[("invoke_workflow doubling", result.execution_id)]
    assert dict(root.attributes or {})["gen_ai.workflow.name"] == "doubling"


async def test_nothing_is_subscribed_until_export_and_after_stop(rt: loom.Runtime, recorder: Recorder) -> None:
    assert not rt.observers.active
    export = loom.tracing.export(rt, recorder.provider)
    assert rt.observers.active and export.active
    export.stop()
    export.stop()
    assert not rt.observers.active and not export.active
    await tidy_run(rt)
    assert recorder.spans() == [] and export.traces == []


async def test_each_settle_is_exported_once(rt: loom.Runtime, recorder: Recorder) -> None:
    export = loom.tracing.export(rt, recorder.provider)
    eid = await messy_run(rt)
    count = len(recorder.spans())
    completed = [e for e in rt.journal.read(eid) if e.kind == EventKind.EXECUTION_COMPLETED]
    rt.observers.notify_events(completed)  # the same settle delivered again
    assert len(recorder.spans()) == count and len(export.traces) == 1


async def test_suspensions_are_exported_only_when_asked(rt: loom.Runtime, recorder: Recorder) -> None:
    plain = loom.tracing.export(rt, recorder.provider)
    eid = await tidy_run(rt)
    snapshots = Recorder()
    with loom.tracing.export(rt, snapshots.provider, on_suspend=True) as each:
        second = await tidy_run(rt)
    assert [e for e, _ in plain.traces] == [eid, second]
    assert [e for e, _ in each.traces] == [second, second]
    roots = [s for s in snapshots.spans() if s.parent is None]
    assert [dict(r.attributes or {})["loom.status"] for r in roots] == ["suspended", "completed"]


def test_an_unknown_execution_is_a_usage_error(rt: loom.Runtime, recorder: Recorder) -> None:
    with pytest.raises(UsageError, match=r"'nope' is not in the journal.*runtime\.executions\(\)"):
        loom.tracing.export_execution("nope", rt, recorder.provider)


@pytest.mark.slow
def test_without_opentelemetry_or_a_provider_the_error_says_the_fix() -> None:
    script = (
        "import sys\n"
        "import loom_nb as loom\n"
        "from loom_nb.errors import UsageError\n"
        "rt = loom.Runtime.open(':memory:')\n"
        "try:\n"
        "    loom.tracing.export(rt)\n"
        "except UsageError as exc:\n"
        "    print('no provider:', exc)\n"
        "sys.modules['opentelemetry'] = None\n"
        "for call in (lambda: loom.tracing.export(rt), lambda: loom.tracing.export_execution('x', rt)):\n"
        "    try:\n"
        "        call()\n"
        "    except UsageError as exc:\n"
        "        print('missing:', exc)\n"
        "print('subscribed:', rt.observers.active)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "no provider: no OpenTelemetry tracer provider is set: pass tracer_provider=TracerProvider(...) "
        "(from opentelemetry.sdk.trace), or call opentelemetry.trace.set_tracer_provider(...) first",
        "missing: OpenTelemetry tracing needs the otel extra: pip install 'loom_nb[otel]'",
        "missing: OpenTelemetry tracing needs the otel extra: pip install 'loom_nb[otel]'",
        "subscribed: False",
    ]


async def test_decisions_warnings_elevations_and_reasoning_tokens(rt: loom.Runtime, recorder: Recorder) -> None:
    def respond(request: ModelRequest) -> loom.ModelResponse:
        if not any(m.role == "tool" for m in request.messages):
            calls = [ToolCall(id="call_x", name="search", arguments={"query": "q"})]
            reply = loom.ModelResponse.tool_calls(calls, usage=loom.Usage(input_tokens=5, output_tokens=7))
            return reply if request.model == "large" else loom.ModelResponse.text("unsure")
        return loom.ModelResponse.text("done", usage=loom.Usage(input_tokens=9, output_tokens=4, reasoning_tokens=3))

    def policy(models: Sequence[str], request: ModelRequest, turn: int) -> loom.Decision:
        return loom.Decision(choice=models[0], probabilities=[0.9, 0.1])

    small, large = (
        loom.ScriptedModel(respond),
        loom.ScriptedModel(lambda r: respond(r.model_copy(update={"model": "large"}))),
    )
    agent = loom.Agent(
        name="routed",
        tools=[search],
        routes=loom.Routes(
            models=["model.small", "model.large"], policy=policy, elevate=lambda r, t: r.message.text == "unsure"
        ),
        models={"model.small": small, "model.large": large},
        warn_transcript_bytes=10,
    )
    with loom.tracing.export(rt, recorder.provider), pytest.warns(loom.TranscriptGrowthWarning):
        run = agent.start("go", runtime=rt)
        await run
    spans = recorder.spans()
    s = by_key(spans)
    assert tree(spans)[("chat model.large", "#turn:0:elevated:1")] == ("turn 0", 0)
    assert dict(s[("execute_tool search", "#turn:0:tool:0")].attributes or {})["gen_ai.tool.call.id"] == "call_x"
    turn0 = s[("turn 0", 0)]
    assert [(e.name, dict(e.attributes or {})) for e in turn0.events] == [
        (
            "loom.decision",
            {"loom.step_id": "#turn:0:route", "loom.decision.choice": "model.small", "loom.decision.policy": "routes"},
        ),
        (
            "loom.decision",
            {
                "loom.step_id": "#turn:0:route:elevate:1",
                "loom.decision.choice": "model.large",
                "loom.decision.policy": "_elevation_policy",
            },
        ),
    ]
    answer = dict(s[("chat model.small", "#turn:1")].attributes or {})
    assert (answer["gen_ai.usage.output_tokens"], answer["gen_ai.usage.reasoning.output_tokens"]) == (4, 3)
    root = s[("invoke_agent routed", run.id)]
    warnings = [dict(e.attributes or {}) for e in root.events if e.name == "loom.warning"]
    assert [w["loom.warning.code"] for w in warnings] == ["transcript_bytes"]


def test_no_events_give_no_spans_and_emitting_none_is_refused(recorder: Recorder) -> None:
    from loom_nb.tracing.spans import emit, span_specs

    assert span_specs([]) == []
    with pytest.raises(ValueError, match="no spans to emit"):
        emit(recorder.provider.get_tracer("test"), [])


async def test_a_cancelled_run_is_exported_when_it_is_cancelled(rt: loom.Runtime, recorder: Recorder) -> None:
    export = loom.tracing.export(rt, recorder.provider)
    run = tidy_agent().start("Remove the stale files in /tmp/x", runtime=rt)
    await run.wait(until="paused")
    await run.cancel("not today")
    assert rt.journal.read(run.id)[-1].kind == EventKind.EXECUTION_CANCELLED
    assert [e for e, _ in export.traces] == [run.id]
    (root,) = [span for span in recorder.spans() if span.parent is None]
    assert dict(root.attributes or {})["loom.status"] == "cancelled"
