"""The step-id grammar: builders, the parser, and the SQL that must read ids the same way."""

from __future__ import annotations

import duckdb
from hypothesis import given
from hypothesis import strategies as st

from loom_nb.journal import step_ids as ids

TURNS = st.integers(min_value=0, max_value=10_000)


def test_builders_spell_the_persisted_ids() -> None:
    assert ids.counter_id(3) == "#3"
    assert ids.value_id(2) == "#value:2"
    assert ids.in_doubt_gate_id("#turn:1:tool:0") == "#turn:1:tool:0:in_doubt"
    assert ids.turn_id(4) == "#turn:4"
    assert ids.elevated_id(4, 2) == "#turn:4:elevated:2"
    assert ids.tool_step_id(4, 1) == "#turn:4:tool:1"
    assert ids.approval_gate_id(4, 1) == "#turn:4:tool:1:approval" == ids.approval_gate_for("#turn:4:tool:1")
    assert ids.compaction_id(4) == "#turn:4:compact"
    assert ids.turn_decision_id(4, ids.SKILLS) == "#turn:4:skills"
    assert ids.turn_decision_id(4, ids.RECALL) == "#turn:4:recall"
    assert ids.turn_decision_id(4, ids.ROUTE) == "#turn:4:route"
    assert ids.route_elevate_id(4, 1) == "#turn:4:route:elevate:1"
    assert ids.tool_effect_id("grep") == "tools.grep"
    assert ids.model_effect_id("bot") == "model.bot"
    assert ids.agent_step_effect_id("inner") == "agent_step.inner"
    assert ids.agent_flow_name("demo") == "agent:demo"
    assert (ids.APPROVAL_GATE, ids.IN_DOUBT_GATE) == ("AgentToolApproval", "InDoubt")


def test_an_agent_flow_gives_its_agent_name_back() -> None:
    assert ids.agent_name(ids.agent_flow_name("demo")) == "demo"
    assert ids.agent_name(ids.agent_flow_name("a:b")) == "a:b"
    assert ids.agent_name("tidy_flow") is None


@given(turn=TURNS, j=TURNS, k=st.integers(min_value=1, max_value=50), n=st.integers(min_value=1, max_value=10**6))
def test_every_built_id_parses_back(turn: int, j: int, k: int, n: int) -> None:
    P = ids.StepId
    cases = {
        ids.counter_id(n): P(ids.counter_id(n), ids.COUNTER, number=n),
        ids.value_id(n): P(ids.value_id(n), ids.VALUE, number=n),
        ids.turn_id(turn): P(ids.turn_id(turn), ids.MODEL, turn, level=0),
        ids.elevated_id(turn, k): P(ids.elevated_id(turn, k), ids.MODEL, turn, level=k),
        ids.tool_step_id(turn, j): P(ids.tool_step_id(turn, j), ids.TOOL, turn, j),
        ids.approval_gate_id(turn, j): P(
            ids.approval_gate_id(turn, j), ids.APPROVAL, turn, j, subject=ids.tool_step_id(turn, j)
        ),
        ids.compaction_id(turn): P(ids.compaction_id(turn), ids.COMPACTION, turn),
        ids.turn_decision_id(turn, ids.SKILLS): P(ids.turn_decision_id(turn, ids.SKILLS), ids.SKILLS, turn),
        ids.turn_decision_id(turn, ids.RECALL): P(ids.turn_decision_id(turn, ids.RECALL), ids.RECALL, turn),
        ids.turn_decision_id(turn, ids.ROUTE): P(ids.turn_decision_id(turn, ids.ROUTE), ids.ROUTE, turn),
        ids.route_elevate_id(turn, k): P(ids.route_elevate_id(turn, k), ids.ROUTE_ELEVATE, turn, level=k),
    }
    for raw, expected in cases.items():
        assert ids.parse_step_id(raw) == expected
    for step in (ids.counter_id(n), ids.tool_step_id(turn, j), ids.turn_id(turn)):
        gate = ids.parse_step_id(ids.in_doubt_gate_id(step))
        assert (gate.kind, gate.subject) == (ids.IN_DOUBT, step)
        assert (gate.turn, gate.tool_index) == (ids.parse_step_id(step).turn, ids.parse_step_id(step).tool_index)


def test_ids_of_no_known_form_are_other() -> None:
    for raw in ("refund", "#turn:x", "#turn:1:tool:", "#turn:1:unknown", "#3a", "#value:", "#turn:1\n"):
        assert ids.parse_step_id(raw).kind == ids.OTHER, raw


def test_predicates_and_step_kind() -> None:
    assert ids.is_model_node("#turn:2") and ids.is_model_node("#turn:2:elevated:1")
    assert ids.is_turn_start("#turn:2") and not ids.is_turn_start("#turn:2:elevated:1")
    assert not ids.is_model_node("#turn:2:tool:0") and not ids.is_model_node("#turn:2\n")
    assert ids.is_tool_step("#turn:2:tool:0") and not ids.is_tool_step("#turn:2:tool:0:approval")
    assert ids.is_compaction("#turn:2:compact") and ids.is_transcript_node("#turn:2:compact")
    assert ids.tool_name("tools.grep") == "grep" and ids.tool_name("model.x") == "model.x"
    assert ids.is_tool_effect("tools.grep") and not ids.is_tool_effect("model.x")
    assert ids.step_kind("#turn:1", "model.bot") == "model"
    assert ids.step_kind("#turn:1:tool:0", "tools.x") == "tool"
    assert ids.step_kind("#turn:1:compact", "summarize") == "compact"
    assert ids.step_kind("#2", "tools.x") == "tool"
    assert ids.step_kind("#2", "model.x") == "model"
    assert ids.step_kind("#2", "catalog.lookup") == "effect"
    assert ids.step_kind("agent", None) == "effect"


SAMPLE_IDS = [
    "#1",
    "#12",
    "#value:3",
    "#turn:0",
    "#turn:12",
    "#turn:3:elevated:2",
    "#turn:3:tool:0",
    "#turn:3:tool:11",
    "#turn:3:tool:1:approval",
    "#turn:3:tool:1:in_doubt",
    "#turn:4:compact",
    "#turn:4:skills",
    "#turn:4:recall",
    "#turn:4:route",
    "#turn:4:route:elevate:1",
    "#2:in_doubt",
    "agent",
    "refund",
    "#turn:x",
    "#turn:7:unknown",
    "#turn:1\n",
]
SAMPLE_EFFECTS = ["tools.grep", "model.bot", "catalog.lookup", None]


def test_sql_reads_ids_as_the_parser_does() -> None:
    con = duckdb.connect()
    rows = [(sid, eff) for sid in SAMPLE_IDS for eff in SAMPLE_EFFECTS]
    con.execute("CREATE TABLE t(step_id VARCHAR, effect VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    got = con.execute(
        f"SELECT step_id, effect, {ids.sql_turn('step_id')}, {ids.sql_tool_index('step_id')},"
        f" {ids.sql_matches('step_id', ids.MODEL_NODE_PATTERN)}, {ids.sql_matches('step_id', ids.TOOL_STEP_PATTERN)},"
        f" {ids.sql_matches('step_id', ids.ANY_NODE_PATTERN)}, {ids.sql_step_kind('step_id', 'effect')} FROM t"
    ).fetchall()
    assert len(got) == len(rows)
    for sid, effect, turn, tool_index, model, tool, node, kind in got:
        parsed = ids.parse_step_id(sid)
        assert (turn, tool_index) == (parsed.turn, parsed.tool_index), sid
        assert (model, tool, node) == (ids.is_model_node(sid), ids.is_tool_step(sid), ids.is_transcript_node(sid)), sid
        assert kind == ids.step_kind(sid, effect), (sid, effect)


def test_sql_builds_the_ids_the_builders_do() -> None:
    con = duckdb.connect()
    built = con.execute(f"SELECT {ids.sql_tool_step_id('3', '1')}, {ids.sql_approval_gate_id('3', '1')}").fetchone()
    assert built == (ids.tool_step_id(3, 1), ids.approval_gate_id(3, 1))
