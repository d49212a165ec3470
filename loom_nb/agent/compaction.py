"""Which messages a compaction keeps whole (``docs/design.md``, section 6.7), and the version of that
rule journaled with each compaction.

The byte and message rules give a count ``keep`` of newest messages; ``whole_calls`` then makes sure
the kept suffix never starts with a tool result whose call is folded (a provider refuses such a
request). Rule 2 (``KEEP_RULE``, journaled as ``keep_rule: 2`` in the compaction node's input) shrinks
the suffix *forwards*, folding the orphaned results into the summary, so the cap holds. Rule 1, the
rule of compactions journaled without ``keep_rule``, extended it *backwards*; it is applied again only
to replay and recover runs recorded with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom_nb.errors import UsageError

#: The kept-suffix rule new compactions are journaled with (``keep_rule`` in their input).
KEEP_RULE = 2
#: The rule of a compaction journaled without ``keep_rule``: extend the suffix backwards.
BACKWARD_RULE = 1


def keep_rule_of(recorded: Any, *, step_id: str = "") -> int:
    """The kept-suffix rule to apply at a compaction node, from its journaled input.

    Args:
        recorded: The node's journaled input (``ctx.recorded_input``), or None when not recorded yet.
        step_id: The node, for the error message.

    Returns:
        ``KEEP_RULE`` for a node not recorded yet; else the rule it was recorded with.

    Raises:
        UsageError: the node was recorded by a newer loom_nb with a rule this one does not know.
    """
    if not isinstance(recorded, dict):
        return KEEP_RULE
    rule = recorded.get("keep_rule", BACKWARD_RULE)
    if rule not in (BACKWARD_RULE, KEEP_RULE):
        raise UsageError(
            f"compaction {step_id!r} was recorded with keep_rule={rule!r}, which this loom_nb does not know "
            f"(it knows {BACKWARD_RULE} and {KEEP_RULE}): replay it with the loom_nb version that recorded it"
        )
    return int(rule)


def whole_calls(roles: Sequence[str], keep: int, *, rule: int = KEEP_RULE) -> int:
    """How many of the newest foldable messages to keep so no kept tool result lacks its call.

    Args:
        roles: The roles of the foldable messages (oldest first; the system prefix excluded).
        keep: How many newest messages the byte or message rule keeps (at least 1).
        rule: ``KEEP_RULE`` (shrink forwards) or ``BACKWARD_RULE`` (extend backwards, old journals).

    Returns:
        The count to keep. Under ``KEEP_RULE`` it is at most ``keep``, except in the one case where
        the cap and the floor cannot both hold: the newest message is a tool result (the floor keeps
        it), so the assistant message that called it, and that call's other results, come too.
    """
    n = len(roles)
    if rule == KEEP_RULE:
        shrunk = keep
        while shrunk > 0 and roles[n - shrunk] == "tool":
            shrunk -= 1
        if shrunk > 0:
            return shrunk
    # BACKWARD_RULE, and KEEP_RULE's exception: extend back to the call of the first kept result.
    while keep < n and roles[n - keep] == "tool":
        keep += 1
    return keep
