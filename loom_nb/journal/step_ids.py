"""The one owner of the step-id, gate-id, effect-id and flow-name grammar (a persisted contract).

Every id the kernel and the agent loop journal is built here, and every reader (transcript rebuild,
live view, timeline, CLI, the analysis SQL) parses it here, so the Python and the SQL agree by
construction. The grammar (``docs/design.md``, "Step ids")::

    #<n>                              counter id of ``ctx.execute`` without ``step_id``
    #value:<n>                        a recorded value (``ctx.now()``, ``ctx.uuid()``...)
    #patched:<change>                 the marker ``ctx.patched(change)`` records in new runs
    <step>:in_doubt                   the gate of a step left in doubt (kind ``InDoubt``), attempt 1
    <step>:in_doubt:<n>               the same for attempt n > 1 (run again, then cut again)
    <step>:ask:<n>                    the n-th question the step's effect asked a person mid-call
    #turn:<i>                         the agent loop's model call of turn i
    #turn:<i>:elevated:<k>            the same turn's model call after the k-th routed elevation
    #turn:<i>:tool:<j>                tool call j of turn i
    #turn:<i>:tool:<j>:approval       its approval gate (kind ``AgentToolApproval``)
    #turn:<i>:compact                 a compaction before turn i
    #turn:<i>:skills|recall|route     decisions of turn i
    #turn:<i>:route:elevate:<k>       the k-th elevation decision of turn i

Effect ids: ``tools.<name>``, ``model.<agent name>``, ``agent_step.<name>``; flows ``agent:<name>``.
Execution ids of a batch (``Agent.map``): ``map:<agent name>:<16 hex>``, the hex being the first 16
digits of the input's canonical digest, with ``:<k>`` added for the k-th (k >= 2) equal input.
A child execution (``ctx.child``, ``Agent.as_tool``) has the id ``<parent execution id>/<step id>``
(``child_execution_id``); the parent's step waits at a gate of kind ``ChildExecution`` with that step id.
Changing any of these strings changes what journals hold: do it only with a migration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from loom_nb.journal.canonical import digest_value

#: Gate kind of a tool call's approval.
APPROVAL_GATE: Final = "AgentToolApproval"
#: Gate kind of a step left in doubt.
IN_DOUBT_GATE: Final = "InDoubt"
#: Gate kind of a parent's step waiting for its child execution (``ctx.child``).
CHILD_GATE: Final = "ChildExecution"

#: Step kinds, as ``parse_step_id`` and the analysis ``steps`` view name them.
MODEL_KIND: Final = "model"
TOOL_KIND: Final = "tool"
COMPACTION_KIND: Final = "compact"
EFFECT_KIND: Final = "effect"

#: What ``StepId.kind`` can be.
COUNTER: Final = "counter"
VALUE: Final = "value"
MODEL: Final = "model"
TOOL: Final = "tool"
APPROVAL: Final = "approval"
COMPACTION: Final = "compaction"
SKILLS: Final[Literal["skills"]] = "skills"
RECALL: Final[Literal["recall"]] = "recall"
ROUTE: Final[Literal["route"]] = "route"
ROUTE_ELEVATE: Final = "route_elevate"
IN_DOUBT: Final = "in_doubt"
QUESTION: Final = "question"
OTHER: Final = "other"

_TOOL_EFFECT_PREFIX: Final = "tools."
_MODEL_EFFECT_PREFIX: Final = "model."
_AGENT_STEP_EFFECT_PREFIX: Final = "agent_step."
_AGENT_FLOW_PREFIX: Final = "agent:"
_BATCH_PREFIX: Final = "map:"
#: How many hex digits of the input's digest a batch execution id keeps (64 bits).
BATCH_DIGEST_HEX: Final = 16
_IN_DOUBT_SUFFIX: Final = ":in_doubt"
_IN_DOUBT_AGAIN: Final = re.compile(r"(.+):in_doubt:(\d+)")
_APPROVAL_SUFFIX: Final = ":approval"
_QUESTION: Final = re.compile(r"(.+):ask:(\d+)")

# Unanchored patterns, written in the regex subset Python's ``re`` and DuckDB's RE2 share.
#: A turn's model node: ``#turn:<i>`` or ``#turn:<i>:elevated:<k>``.
MODEL_NODE_PATTERN: Final = r"#turn:\d+(?::elevated:\d+)?"
#: A tool step: ``#turn:<i>:tool:<j>``.
TOOL_STEP_PATTERN: Final = r"#turn:\d+:tool:\d+"
#: A compaction node: ``#turn:<i>:compact``.
COMPACTION_PATTERN: Final = r"#turn:\d+:compact"
#: Any transcript node (model node or compaction).
ANY_NODE_PATTERN: Final = r"#turn:\d+(?::compact|:elevated:\d+)?"
#: The turn an id belongs to: the number after a leading ``#turn:``.
TURN_PREFIX_PATTERN: Final = r"^#turn:(\d+)"
#: The tool index an id belongs to: the number after a leading ``#turn:<i>:tool:``.
TOOL_INDEX_PREFIX_PATTERN: Final = r"^#turn:\d+:tool:(\d+)"

_TURN_PREFIX = re.compile(TURN_PREFIX_PATTERN)
_TOOL_INDEX_PREFIX = re.compile(TOOL_INDEX_PREFIX_PATTERN)
_MODEL_NODE = re.compile(MODEL_NODE_PATTERN)
_TURN_START = re.compile(r"#turn:\d+")
_TOOL_STEP = re.compile(TOOL_STEP_PATTERN)
_COMPACTION = re.compile(COMPACTION_PATTERN)
_ANY_NODE = re.compile(ANY_NODE_PATTERN)
_COUNTER = re.compile(r"#(\d+)")
_VALUE = re.compile(r"#value:(\d+)")
_TURN_ID = re.compile(
    r"#turn:(?P<turn>\d+)(?::(?:elevated:(?P<elevated>\d+)|tool:(?P<tool>\d+)(?P<approval>:approval)?"
    r"|(?P<decision>compact|skills|recall|route)|route:elevate:(?P<elevate>\d+)))?"
)


# -- builders -------------------------------------------------------------------------------------
def counter_id(n: int) -> str:
    """The counter id of the ``n``-th ``ctx.execute`` without ``step_id`` (from 1): ``#<n>``."""
    return f"#{n}"


def value_id(n: int) -> str:
    """The id of the ``n``-th recorded value (from 1): ``#value:<n>``."""
    return f"#value:{n}"


#: The prefix of a patch marker's id: ``#patched:<change>``.
PATCH_PREFIX: Final = "#patched:"


def patch_marker_id(change: str) -> str:
    """The marker ``ctx.patched(change)`` records in a run that takes the new path: ``#patched:<change>``."""
    return PATCH_PREFIX + change


def question_gate_id(step_id: str, number: int) -> str:
    """The gate of the ``number``-th question (from 1) step ``step_id``'s effect asked a person
    mid-call (``EffectContext.ask``, e.g. an MCP elicitation): ``<step>:ask:<n>``."""
    return f"{step_id}:ask:{number}"


def is_question_gate(gate_id: str) -> bool:
    """True for a question gate (``question_gate_id``): answered inside its step's call, not by the body."""
    return _QUESTION.fullmatch(gate_id) is not None


def in_doubt_gate_id(step_id: str, attempt: int = 1) -> str:
    """The gate a step left in doubt opens for one attempt: ``<step>:in_doubt`` for the first,
    ``<step>:in_doubt:<n>`` for attempt ``n`` > 1 (each attempt cut mid-call asks a person again)."""
    gate = step_id + _IN_DOUBT_SUFFIX
    return gate if attempt <= 1 else f"{gate}:{attempt}"


def turn_id(turn: int) -> str:
    """The model call of turn ``turn``: ``#turn:<i>``."""
    return f"#turn:{turn}"


def elevated_id(turn: int, level: int) -> str:
    """The model call of turn ``turn`` after the ``level``-th elevation: ``#turn:<i>:elevated:<k>``."""
    return f"{turn_id(turn)}:elevated:{level}"


def tool_step_id(turn: int, index: int) -> str:
    """Tool call ``index`` of turn ``turn``: ``#turn:<i>:tool:<j>``."""
    return f"{turn_id(turn)}:tool:{index}"


def approval_gate_id(turn: int, index: int) -> str:
    """The approval gate of tool call ``index`` of turn ``turn``: ``#turn:<i>:tool:<j>:approval``."""
    return approval_gate_for(tool_step_id(turn, index))


def approval_gate_for(tool_step: str) -> str:
    """The approval gate of the tool step ``tool_step`` (``#turn:<i>:tool:<j>`` -> ``...:approval``)."""
    return tool_step + _APPROVAL_SUFFIX


def compaction_id(turn: int) -> str:
    """The compaction before turn ``turn``'s model call: ``#turn:<i>:compact``."""
    return f"{turn_id(turn)}:compact"


def turn_decision_id(turn: int, decision: Literal["skills", "recall", "route"]) -> str:
    """A decision of turn ``turn``: ``#turn:<i>:skills``, ``#turn:<i>:recall`` or ``#turn:<i>:route``.

    Pass ``SKILLS``, ``RECALL`` or ``ROUTE``.
    """
    if decision not in (SKILLS, RECALL, ROUTE):
        raise ValueError(f"a turn's decisions are {SKILLS!r}, {RECALL!r} and {ROUTE!r}, not {decision!r}")
    return f"{turn_id(turn)}:{decision}"


def route_elevate_id(turn: int, level: int) -> str:
    """The ``level``-th elevation decision of turn ``turn``: ``#turn:<i>:route:elevate:<k>``."""
    return f"{turn_decision_id(turn, ROUTE)}:elevate:{level}"


def tool_effect_id(name: str) -> str:
    """The effect a tool is registered as: ``tools.<name>``."""
    return _TOOL_EFFECT_PREFIX + name


def model_effect_id(agent_name: str) -> str:
    """The effect an agent's own model provider is registered as: ``model.<agent name>``."""
    return _MODEL_EFFECT_PREFIX + agent_name


def agent_step_effect_id(name: str) -> str:
    """The effect of a whole agent loop run as one step: ``agent_step.<name>``."""
    return _AGENT_STEP_EFFECT_PREFIX + name


def agent_flow_name(agent_name: str) -> str:
    """The flow an agent registers: ``agent:<name>``."""
    return _AGENT_FLOW_PREFIX + agent_name


def batch_execution_id(agent_name: str, input: Any, occurrence: int = 1) -> str:
    """The execution id ``Agent.map`` derives for one input: ``map:<agent name>:<16 hex>``.

    The hex is the start of the input's canonical digest (``digest_value``), so the same input gives
    the same id in any process: a re-run batch finds the executions it already made. The k-th
    (``occurrence`` >= 2) equal input of one batch gets ``map:<agent name>:<16 hex>:<k>``.
    """
    if occurrence < 1:
        raise ValueError(f"occurrence counts from 1, not {occurrence}")
    hex_digits = digest_value(input).removeprefix("sha256:")[:BATCH_DIGEST_HEX]
    base = f"{_BATCH_PREFIX}{agent_name}:{hex_digits}"
    return base if occurrence == 1 else f"{base}:{occurrence}"


_BATCH_ID = re.compile(rf"{_BATCH_PREFIX}(.+):[0-9a-f]{{{BATCH_DIGEST_HEX}}}(?::\d+)?")


def batch_agent_name(execution_id: str) -> str | None:
    """The agent whose batch ``execution_id`` belongs to (an id ``batch_execution_id`` builds), else None."""
    match = _BATCH_ID.fullmatch(execution_id)
    return match.group(1) if match else None


# -- the parser -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepId:
    """A parsed step, gate, decision or value id.

    Attributes:
        raw: The id as journaled.
        kind: ``counter``, ``value``, ``model``, ``tool``, ``approval``, ``compaction``, ``skills``,
            ``recall``, ``route``, ``route_elevate``, ``in_doubt``, ``question`` or ``other``.
        turn: The agent turn it belongs to (any id starting ``#turn:<i>``), else None.
        tool_index: The tool call it belongs to (any id starting ``#turn:<i>:tool:<j>``), else None.
        level: The elevation level (``elevated:<k>`` / ``route:elevate:<k>``); 0 for a turn's first
            model call; None otherwise.
        number: The counter of a ``#<n>`` or ``#value:<n>`` id, the attempt an in-doubt gate is for, or a
            question's number; else None.
        subject: For an in-doubt or question gate, the step it belongs to; for an approval, its tool step.
    """

    raw: str
    kind: str
    turn: int | None = None
    tool_index: int | None = None
    level: int | None = None
    number: int | None = None
    subject: str | None = None


def parse_step_id(step_id: str) -> StepId:
    """Parse any journaled step, gate, decision or value id (``OTHER`` for an id of no known form)."""
    turn = _int_group(_TURN_PREFIX.match(step_id))
    tool_index = _int_group(_TOOL_INDEX_PREFIX.match(step_id))
    if m := _QUESTION.fullmatch(step_id):
        return StepId(step_id, QUESTION, turn, tool_index, number=int(m.group(2)), subject=m.group(1))
    if step_id.endswith(_IN_DOUBT_SUFFIX):
        return StepId(step_id, IN_DOUBT, turn, tool_index, number=1, subject=step_id.removesuffix(_IN_DOUBT_SUFFIX))
    if m := _IN_DOUBT_AGAIN.fullmatch(step_id):
        return StepId(step_id, IN_DOUBT, turn, tool_index, number=int(m.group(2)), subject=m.group(1))
    if m := _COUNTER.fullmatch(step_id):
        return StepId(step_id, COUNTER, number=int(m.group(1)))
    if m := _VALUE.fullmatch(step_id):
        return StepId(step_id, VALUE, number=int(m.group(1)))
    m = _TURN_ID.fullmatch(step_id)
    if m is None:
        return StepId(step_id, OTHER, turn, tool_index)
    if m.group("approval"):
        return StepId(step_id, APPROVAL, turn, tool_index, subject=step_id.removesuffix(_APPROVAL_SUFFIX))
    if m.group("tool") is not None:
        return StepId(step_id, TOOL, turn, tool_index)
    if m.group("elevate") is not None:
        return StepId(step_id, ROUTE_ELEVATE, turn, level=int(m.group("elevate")))
    decision = m.group("decision")
    if decision is not None:
        kind = {"compact": COMPACTION, "skills": SKILLS, "recall": RECALL, "route": ROUTE}[decision]
        return StepId(step_id, kind, turn)
    elevated = m.group("elevated")
    return StepId(step_id, MODEL, turn, level=int(elevated) if elevated is not None else 0)


def _int_group(match: re.Match[str] | None) -> int | None:
    return int(match.group(1)) if match is not None else None


def is_model_node(step_id: str) -> bool:
    """True for a turn's model call (``#turn:<i>`` or ``#turn:<i>:elevated:<k>``)."""
    return _MODEL_NODE.fullmatch(step_id) is not None


def is_turn_start(step_id: str) -> bool:
    """True for a turn's first model call (``#turn:<i>``; not an elevated one)."""
    return _TURN_START.fullmatch(step_id) is not None


def is_tool_step(step_id: str) -> bool:
    """True for a tool step (``#turn:<i>:tool:<j>``)."""
    return _TOOL_STEP.fullmatch(step_id) is not None


def is_compaction(step_id: str) -> bool:
    """True for a compaction node (``#turn:<i>:compact``)."""
    return _COMPACTION.fullmatch(step_id) is not None


def is_transcript_node(step_id: str) -> bool:
    """True for a node of the journaled transcript: a model call or a compaction."""
    return _ANY_NODE.fullmatch(step_id) is not None


def is_tool_effect(effect_id: str) -> bool:
    """True for a tool's effect id (``tools.<name>``)."""
    return effect_id.startswith(_TOOL_EFFECT_PREFIX)


def tool_name(effect_id: str) -> str:
    """The tool name of ``tools.<name>`` (any other effect id unchanged)."""
    return effect_id.removeprefix(_TOOL_EFFECT_PREFIX)


def agent_name(flow: str) -> str | None:
    """The agent name of an agent's flow (``agent:<name>`` -> ``<name>``); None for any other flow."""
    return flow.removeprefix(_AGENT_FLOW_PREFIX) if flow.startswith(_AGENT_FLOW_PREFIX) else None


def step_kind(step_id: str, effect_id: str | None = None) -> str:
    """What a step is: ``model``, ``tool``, ``compact`` or ``effect``.

    From its id first (the agent loop's ids), then from its effect id's prefix (``tools.``,
    ``model.``). ``sql_step_kind`` is the same rule in SQL.
    """
    if is_model_node(step_id):
        return MODEL_KIND
    if is_tool_step(step_id):
        return TOOL_KIND
    if is_compaction(step_id):
        return COMPACTION_KIND
    effect = effect_id or ""
    if effect.startswith(_TOOL_EFFECT_PREFIX):
        return TOOL_KIND
    if effect.startswith(_MODEL_EFFECT_PREFIX):
        return MODEL_KIND
    return EFFECT_KIND


# -- the same grammar in SQL (DuckDB) ---------------------------------------------------------------
def sql_pattern(pattern: str) -> str:
    """A SQL string literal of the whole-id regex ``pattern`` (anchored at both ends)."""
    return "'^" + pattern.replace("'", "''") + "$'"


def sql_turn(col: str) -> str:
    """SQL giving the turn of the id in column ``col`` (BIGINT, NULL when it has none)."""
    return f"TRY_CAST(NULLIF(regexp_extract({col}, '{TURN_PREFIX_PATTERN}', 1), '') AS BIGINT)"


def sql_matches(col: str, pattern: str) -> str:
    """SQL that is true when the whole id in ``col`` matches ``pattern`` (one of the ``*_PATTERN``s).

    ``sql_matches(col, MODEL_NODE_PATTERN)`` is ``is_model_node`` in SQL, and so on.
    """
    return f"regexp_matches({col}, {sql_pattern(pattern)})"


def sql_tool_index(col: str) -> str:
    """SQL giving the tool index of the id in column ``col`` (BIGINT, NULL when it has none)."""
    return f"TRY_CAST(NULLIF(regexp_extract({col}, '{TOOL_INDEX_PREFIX_PATTERN}', 1), '') AS BIGINT)"


def sql_step_kind(step_col: str, effect_col: str) -> str:
    """SQL giving a step's kind from its id and effect columns (``step_kind``'s rule)."""
    return (
        f"CASE WHEN {sql_matches(step_col, MODEL_NODE_PATTERN)} THEN '{MODEL_KIND}'"
        f" WHEN {sql_matches(step_col, TOOL_STEP_PATTERN)} THEN '{TOOL_KIND}'"
        f" WHEN {sql_matches(step_col, COMPACTION_PATTERN)} THEN '{COMPACTION_KIND}'"
        f" WHEN starts_with(coalesce({effect_col}, ''), '{_TOOL_EFFECT_PREFIX}') THEN '{TOOL_KIND}'"
        f" WHEN starts_with(coalesce({effect_col}, ''), '{_MODEL_EFFECT_PREFIX}') THEN '{MODEL_KIND}'"
        f" ELSE '{EFFECT_KIND}' END"
    )


def sql_tool_step_id(turn_col: str, index_col: str) -> str:
    """SQL building the tool step id (``tool_step_id``) from turn and tool-index columns."""
    return f"'#turn:' || {turn_col} || ':tool:' || {index_col}"


def sql_approval_gate_id(turn_col: str, index_col: str) -> str:
    """SQL building the approval gate id (``approval_gate_id``) from turn and tool-index columns."""
    return f"{sql_tool_step_id(turn_col, index_col)} || '{_APPROVAL_SUFFIX}'"


def child_execution_id(parent_execution_id: str, step_id: str) -> str:
    """The id of the child execution that step ``step_id`` of ``parent_execution_id`` runs
    (``<parent>/<step>``): derived, so a re-run of the parent finds the same child."""
    return f"{parent_execution_id}/{step_id}"
