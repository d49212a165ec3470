"""Decisions: a policy runs once, its choice and propensity are recorded, replay serves them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any


@dataclass(frozen=True)
class Decision:
    """A policy's answer.

    Attributes:
        choice: What was chosen (plain JSON: one option, or a list for a set choice).
        probabilities: The policy's probability of each option (aligned with the options), if known.
        propensity: The probability of the choice actually made; derived from ``probabilities``
            when the choice is one option and this is not given.
    """

    choice: Any
    _: KW_ONLY
    probabilities: Sequence[float] | None = None
    propensity: float | None = None


Policy = Callable[[Sequence[Any]], Any | Decision | Awaitable[Any | Decision]]


def policy_name(policy: Any) -> str:
    """A readable name for a policy (recorded with the decision)."""
    name = getattr(policy, "name", None) or getattr(policy, "__qualname__", None) or type(policy).__name__
    return str(name)


def propensity_of(options: Sequence[Any], decision: Decision) -> float | None:
    """The propensity of a decision: given, or read from its probabilities."""
    if decision.propensity is not None:
        return float(decision.propensity)
    if decision.probabilities is None:
        return None
    try:
        return float(decision.probabilities[list(options).index(decision.choice)])
    except ValueError:
        return None
