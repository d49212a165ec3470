"""``RecordedValues``: what a body asks for once and is served on every re-run: decisions
(``ctx.decide``), clock, id and random values (``ctx.now`` / ``ctx.uuid`` / ``ctx.random``) and patch
markers (``ctx.patched``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from loom_nb.errors import NonDeterminismError, UsageError
from loom_nb.journal import step_ids
from loom_nb.journal.canonical import canonical_json, to_jsonable
from loom_nb.journal.events import EventKind
from loom_nb.kernel.decisions import Decision, Policy, policy_name, propensity_of
from loom_nb.kernel.staging import ContextCore


class RecordedValues(ContextCore):
    """The part of the context that records decisions, values and patch markers."""

    async def decide(self, decision_id: str, options: Sequence[Any], policy: Policy) -> Any:
        """Run ``policy(options)`` once and record options, choice, probabilities and propensity.

        On replay the recorded choice is returned and the policy is not called.
        """
        self._claim(decision_id)
        self.trace.append(("decision", decision_id))
        opts = to_jsonable(list(options))
        rec = self._h.decisions.get(decision_id)
        if rec is not None:
            if rec.get("options") != opts:
                raise NonDeterminismError(
                    f"execution {self.execution_id!r}, decision {decision_id!r}: options "
                    f"{canonical_json(rec.get('options'))[:200]} were recorded but "
                    f"{canonical_json(opts)[:200]} were offered. The flow's code changed since the run "
                    "started: fork the run or start a new one."
                )
            self._served()
            return rec.get("choice")
        if self._pure:
            raise self._diverged(f"decision {decision_id!r}")
        result = policy(options)
        if inspect.isawaitable(result):
            result = await result
        decision = result if isinstance(result, Decision) else Decision(choice=result)
        choice = to_jsonable(decision.choice)
        probabilities = None if decision.probabilities is None else [float(p) for p in decision.probabilities]
        self.stage(
            EventKind.DECISION_RECORDED,
            decision_id,
            {
                "options": opts,
                "choice": choice,
                "probabilities": probabilities,
                "propensity": propensity_of(
                    opts, Decision(choice=choice, probabilities=probabilities, propensity=decision.propensity)
                ),
                "policy": policy_name(policy),
            },
        )
        return choice

    # -- values ---------------------------------------------------------------------------------
    def _value(self, kind: str, make: Callable[[], Any]) -> Any:
        self._values += 1
        vid = step_ids.value_id(self._values)
        self.trace.append(("value", vid))
        if vid in self._h.values:
            self._served()
            return self._h.values[vid]
        if self._pure:
            raise self._diverged(f"value {vid!r}")
        value = make()
        self.stage(EventKind.VALUE_RECORDED, vid, {"kind": kind, "value": value})
        return value

    def patched(self, change: str) -> bool:
        """Whether this run takes the new path of ``change`` (the meaning of Temporal's ``patched``).

        A run that reaches this call live (past its recorded prefix, or new) records the marker
        ``#patched:<change>`` (a ``value_recorded`` event of kind ``patched``) and gets True; a re-run
        is served the marker and gets True again. A run recorded before the change (re-run while it
        is still being served its record, and no marker) gets False and takes the old path, so it
        replays as recorded. The answer is fixed for the execution: a second call returns the first
        call's answer. Branch on it::

            if ctx.patched("fetch-v2"):
                rows = await ctx.execute("fetch_v2", query)
            else:
                rows = await ctx.execute("fetch", query)
        """
        if not isinstance(change, str) or not change or change != change.strip():
            raise UsageError(f"ctx.patched needs a non-empty change name without surrounding spaces, got {change!r}")
        known = self._patches.get(change)
        if known is not None:
            return known
        mid = step_ids.patch_marker_id(change)
        if mid in self._h.values:
            self._claim(mid)
            self.trace.append(("value", mid))
            self._served()
            taken = True
        elif self.replaying:
            taken = False  # recorded before the change: the old path, and no marker
        else:
            self._claim(mid)
            self.trace.append(("value", mid))
            self.stage(EventKind.VALUE_RECORDED, mid, {"kind": "patched", "value": change})
            taken = True
        self._patches[change] = taken
        return taken

    def now(self) -> float:
        """The current time (epoch seconds), recorded; replay returns the recorded value."""
        return float(self._value("now", self._rt.clock.now))

    def uuid(self) -> str:
        """A fresh id, recorded; replay returns the recorded value."""
        return str(self._value("uuid", self._rt.ids.new_id))

    def random(self) -> float:
        """A float in [0, 1), recorded; replay returns the recorded value."""
        return float(self._value("random", self._rt.random.random))
