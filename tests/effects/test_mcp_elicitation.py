"""MCP elicitation as a durable gate (``loom_nb/effects/mcp_elicit.py``, ``kernel/questions.py``)
against a real MCP server whose tools call ``ctx.elicit`` (``mcp_elicit_server.py``), driven by a
real ``loom.Agent``: the question parks the run on an ``McpElicitation`` gate, answered from code
(accept, decline, cancel; a form answer that breaks the schema is refused), and it survives a kernel
killed while the question waits."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

import loom_nb as loom
from loom_nb.errors import ResumeValidationError
from loom_nb.journal.events import EventKind
from loom_nb.kernel import FlowRegistry
from tests.effects import mcp_elicit_flow as flow
from tests.effects.support import calls, mcp_runtime, scripted_agent, tool_texts

SERVER = Path(__file__).with_name("mcp_elicit_server.py")
FLOW = Path(flow.__file__)
TOOL_STEP = "#turn:0:tool:0"


def booking_tools(state: Path, *include: str) -> list[loom.Tool]:
    server = StdioServerParameters(command=sys.executable, args=[str(SERVER), str(state)])
    return loom.mcp_tools(server, include=list(include) or None)


def server_calls(state: Path) -> list[str]:
    """What the server's tools logged: ``start <room>`` when a call starts, then how it was answered."""
    path = state / "calls"
    return path.read_text().splitlines() if path.exists() else []


def events(rt: loom.Runtime, execution_id: str, kind: str) -> list[Any]:
    return [e for e in rt.journal.read(execution_id) if e.kind == kind]


async def question_of(run: loom.Run) -> Any:
    """The gate of the server's question, once the run shows it (the call is in flight meanwhile)."""
    for _ in range(600):
        if run.gates:
            (gate,) = run.gates
            return gate
        await asyncio.sleep(0.05)
    raise AssertionError(f"no question showed: {run!r}")


@pytest.mark.slow
async def test_a_question_mid_call_parks_the_run_on_a_gate_answered_from_code(tmp_path: Path) -> None:
    rt = mcp_runtime()
    bot, model = scripted_agent(booking_tools(tmp_path, "book"), calls(("book", {"room": "12"})))
    run = bot.start("book room 12", runtime=rt)
    gate = await question_of(run)
    assert (gate.gate_id, gate.kind) == (f"{TOOL_STEP}:ask:1", "McpElicitation")
    assert gate.question == "Which day for 12?"
    assert set(gate.requested_schema["properties"]) == {"day", "nights", "breakfast", "view"}
    assert repr(gate).endswith("asks 'Which day for 12?' (day, nights, breakfast, view)>")
    assert rt.journal.get_execution(run.id).status == "suspended"  # the journal says what it waits for
    assert server_calls(tmp_path) == ["ask 12"]  # the call is in flight, the server waits
    await gate.answer({"day": "monday", "nights": 2, "view": "sea"})
    await run
    assert run.status == "completed"
    assert server_calls(tmp_path) == ["ask 12", "ask 12", "answered 12 monday"]
    assert "booked 12 on monday for 2 night(s), breakfast False, sea view" in tool_texts(model)[0]
    (opened,) = events(rt, run.id, EventKind.GATE_OPENED)
    assert opened.data["payload"]["message"] == "Which day for 12?"
    assert opened.data["payload"]["tool"] == "book"
    (resolved,) = events(rt, run.id, EventKind.GATE_RESOLVED)
    assert resolved.data["payload"] == {"action": "accept", "content": {"day": "monday", "nights": 2, "view": "sea"}}
    assert (await rt.replay(run.id)).reproduced
    rt.close()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(tmp_path: Path, how: str) -> None:
    rt = mcp_runtime()
    bot, model = scripted_agent(booking_tools(tmp_path, "book"), calls(("book", {"room": "7"})))
    run = bot.start("book room 7", runtime=rt)
    gate = await question_of(run)
    await (gate.decline() if how == "decline" else gate.cancel())
    await run
    assert run.status == "completed"
    assert server_calls(tmp_path) == ["ask 7", "ask 7", f"{how} 7"]
    assert f"not booked ({how})" in tool_texts(model)[0]
    (resolved,) = events(rt, run.id, EventKind.GATE_RESOLVED)
    assert resolved.data["payload"] == {"action": how, "content": None}
    rt.close()


@pytest.mark.slow
async def test_an_answer_that_breaks_the_form_is_refused_naming_the_field(tmp_path: Path) -> None:
    rt = mcp_runtime()
    bot, _ = scripted_agent(booking_tools(tmp_path, "book"), calls(("book", {"room": "3"})))
    run = bot.start("book room 3", runtime=rt)
    gate = await question_of(run)
    with pytest.raises(ResumeValidationError) as refused:
        gate.answer({"nights": "many", "view": "mountain"})
    message = str(refused.value)
    assert f"gate '{TOOL_STEP}:ask:1' of execution '{run.id}'" in message
    assert "field day is required" in message.replace("'", "")
    assert "field 'nights': 'many' is not of type 'integer'" in message
    assert "field 'view': 'mountain' is not one of ['sea', 'garden']" in message
    assert "Nothing was recorded; the gate is still open." in message
    with pytest.raises(ResumeValidationError, match="field 'room' is not in the form"):
        gate.answer({"day": "monday", "room": "4"})
    assert not events(rt, run.id, EventKind.GATE_RESOLVED)
    (again,) = run.gates  # still open: answer it right
    await again.answer({"day": "sunday"})
    await run
    assert server_calls(tmp_path) == ["ask 3", "ask 3", "answered 3 sunday"]
    rt.close()


def killed_while_asking(tmp_path: Path, tool: str) -> tuple[loom.Runtime, loom.Run]:
    """Run ``mcp_elicit_flow.py`` until it is killed with the server's question open; open its
    journal in this process with the same agent."""
    journal = tmp_path / "journal.duckdb"
    done = subprocess.run(
        [sys.executable, str(FLOW), str(journal), str(tmp_path), tool], capture_output=True, timeout=180
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert server_calls(tmp_path) == ["ask 12"]
    rt = loom.Runtime.open(journal, flows=FlowRegistry())
    bot = flow.agent(tmp_path, tool, after_turn_0=True)
    bot.register(rt)
    assert rt.journal.get_execution(flow.EXECUTION_ID).status == "suspended"  # not left running
    assert [e.kind for e in rt.journal.read(flow.EXECUTION_ID) if e.step_id == TOOL_STEP] == [EventKind.STEP_STARTED]
    return rt, loom.Run.attach(rt, flow.EXECUTION_ID, agent=bot)


@pytest.mark.slow
def test_an_elicitation_round_trip_across_a_kernel_restart(tmp_path: Path) -> None:
    rt, run = killed_while_asking(tmp_path, "book")
    (gate,) = run.gates
    assert (gate.kind, gate.question) == ("McpElicitation", "Which day for 12?")
    gate.answer({"day": "friday"})
    # The call was cut in flight (its server died with the kernel) and the tool is not idempotent:
    # nothing runs again until a person says so.
    assert run.status == "suspended"
    (in_doubt,) = run.gates
    assert in_doubt.gate_id == f"{TOOL_STEP}:in_doubt"
    assert server_calls(tmp_path) == ["ask 12"]
    in_doubt.run_again()
    assert run.status == "completed"
    # Called again once, and the same question got the journaled answer: nobody was asked again.
    # (each round of the call runs the server's question again: the second was the answer's round)
    assert server_calls(tmp_path) == ["ask 12", "ask 12", "ask 12", "answered 12 friday"]
    opened = [e.step_id for e in events(rt, run.id, EventKind.GATE_OPENED)]
    assert opened == [f"{TOOL_STEP}:ask:1", f"{TOOL_STEP}:in_doubt"]
    outputs = {e.step_id: e.data["output"] for e in events(rt, run.id, EventKind.STEP_COMPLETED)}
    assert "booked 12 on friday" in str(outputs[TOOL_STEP])
    assert rt.replay_sync(run.id).reproduced
    rt.close()


@pytest.mark.slow
def test_an_idempotent_tool_is_called_again_at_once_after_the_answer(tmp_path: Path) -> None:
    rt, run = killed_while_asking(tmp_path, "book_again")
    (gate,) = run.gates
    gate.answer({"day": "tuesday", "breakfast": True})
    assert run.status == "completed"
    assert server_calls(tmp_path) == ["ask 12", "ask 12", "ask 12", "answered 12 tuesday"]
    assert [e.step_id for e in events(rt, run.id, EventKind.GATE_OPENED)] == [f"{TOOL_STEP}:ask:1"]
    rt.close()


@pytest.mark.slow
async def test_a_sub_agents_question_shows_on_the_parent_run_and_is_answered_in_the_child(tmp_path: Path) -> None:
    rt = mcp_runtime()
    child_model = loom.ScriptedModel([calls(("book", {"room": "5"})), loom.ModelResponse.text("booked it")])
    booker = loom.Agent(model=child_model, tools=booking_tools(tmp_path, "book"), name="booker")
    lead_model = loom.ScriptedModel([calls(("booker", {"input": "book room 5"})), loom.ModelResponse.text("ok")])
    lead = loom.Agent(model=lead_model, tools=[booker.as_tool(name="booker")], name="lead")
    run = lead.start("get me room 5", runtime=rt)
    gate = await question_of(run)
    assert gate.execution_id == f"{run.id}/{TOOL_STEP}" and gate.question == "Which day for 5?"
    await gate.answer({"day": "saturday"})
    async with asyncio.timeout(60):
        await run
    assert run.status == "completed"
    assert server_calls(tmp_path) == ["ask 5", "ask 5", "answered 5 saturday"]
    rt.close()
