"""Off-policy evaluation: what would another policy have earned, from logged decisions alone?

Every ``ctx.decide`` records the options, the choice and (when the policy gave probabilities or a
propensity) the probability ``p`` of that choice. For a *target* policy ``pi``, each decision with
a propensity gets the importance weight ``w = pi(choice | options) / p``; with the reward ``r`` you
name for it:

- IPS (inverse propensity scoring): ``mean(w * r)``: unbiased when every ``p`` is right and
  positive wherever ``pi`` is, but its variance grows with large weights.
- SNIPS (self-normalised IPS): ``sum(w * r) / sum(w)``: slightly biased, far steadier.
- Effective sample size ``(sum w)^2 / sum(w^2)``: how many on-policy samples the estimate is worth.
- Percentile bootstrap intervals for both, from a seeded generator (reproducible).

Decisions without a (positive) propensity, and decisions with no reward, are excluded and counted.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from loom_nb.errors import UsageError
from loom_nb.journal.canonical import canonical_json
from loom_nb.kernel.decisions import Decision

DataFrame = Any  # pandas is untyped here
FloatArray = NDArray[np.float64]

#: ``target(options)`` or ``target(options, decision_row)`` -> probabilities aligned with the
#: options, a mapping option -> probability, or a ``Decision`` (one-hot on its choice when it has no
#: probabilities).
TargetPolicy = Callable[..., Any]
#: A column of the outcomes DataFrame, or a function of the execution id.
Reward = str | Callable[[str], float]

_BOOTSTRAP_CELLS = 4_000_000


@dataclass(frozen=True, kw_only=True)
class PolicyEstimate:
    """The estimated value of a target policy.

    Attributes:
        ips: The IPS estimate (NaN when no decision could be used).
        snips: The self-normalised IPS estimate.
        ips_interval: Bootstrap percentile interval of ``ips``.
        snips_interval: Bootstrap percentile interval of ``snips``.
        effective_sample_size: ``(sum w)^2 / sum(w^2)``.
        n: Decisions used.
        excluded_no_propensity: Decisions left out for having no positive propensity.
        excluded_no_reward: Decisions left out for having no reward.
        logged_value: Mean reward of the used decisions (the logging policy's own value).
        max_weight: The largest importance weight (a large one makes IPS unstable).
        confidence: The intervals' coverage.
        n_bootstrap: Bootstrap resamples.
        seed: The bootstrap seed.
    """

    ips: float
    snips: float
    ips_interval: tuple[float, float]
    snips_interval: tuple[float, float]
    effective_sample_size: float
    n: int
    excluded_no_propensity: int
    excluded_no_reward: int
    logged_value: float
    max_weight: float
    confidence: float
    n_bootstrap: int
    seed: int

    def __str__(self) -> str:
        pct = round(self.confidence * 100)
        return (
            f"IPS {self.ips:.4f} [{self.ips_interval[0]:.4f}, {self.ips_interval[1]:.4f}], "
            f"SNIPS {self.snips:.4f} [{self.snips_interval[0]:.4f}, {self.snips_interval[1]:.4f}] "
            f"({pct}% bootstrap); n={self.n}, ESS={self.effective_sample_size:.1f}, "
            f"excluded: {self.excluded_no_propensity} without propensity, "
            f"{self.excluded_no_reward} without reward"
        )

    def to_frame(self) -> DataFrame:
        """One row per estimator: estimate, interval bounds, n and effective sample size."""
        return pd.DataFrame(
            {
                "estimator": ["ips", "snips"],
                "estimate": [self.ips, self.snips],
                "low": [self.ips_interval[0], self.snips_interval[0]],
                "high": [self.ips_interval[1], self.snips_interval[1]],
                "n": [self.n, self.n],
                "effective_sample_size": [self.effective_sample_size] * 2,
            }
        )


def _array(values: Any) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def ips(weights: Sequence[float] | FloatArray, rewards: Sequence[float] | FloatArray) -> float:
    """The inverse-propensity estimate ``mean(w * r)`` (NaN for no samples)."""
    w, r = _array(weights), _array(rewards)
    return float(np.mean(w * r)) if len(w) else math.nan


def snips(weights: Sequence[float] | FloatArray, rewards: Sequence[float] | FloatArray) -> float:
    """The self-normalised estimate ``sum(w * r) / sum(w)`` (NaN when the weights sum to 0)."""
    w, r = _array(weights), _array(rewards)
    total = float(np.sum(w))
    return float(np.sum(w * r)) / total if total > 0 else math.nan


def effective_sample_size(weights: Sequence[float] | FloatArray) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum(w^2)`` (0 for no positive weight)."""
    w = _array(weights)
    squares = float(np.sum(w * w))
    return float(np.sum(w)) ** 2 / squares if squares > 0 else 0.0


def _floats(column: Any) -> FloatArray:
    return _array(pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan))


def _decoded(options: Any, choice: Any) -> tuple[list[Any], Any]:
    # Accept frames from ``Frames.decisions()`` (decoded) and from ``sql()`` (JSON text): options
    # are always a list, so text options mean the row's JSON columns are all text.
    if isinstance(options, str):
        return list(json.loads(options)), json.loads(choice) if isinstance(choice, str) else choice
    return list(options), choice


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def _accepts_row(target: TargetPolicy) -> bool:
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def target_probability(target: TargetPolicy, options: Sequence[Any], choice: Any, row: Mapping[str, Any]) -> float:
    """``target``'s probability of ``choice`` among ``options``.

    Raises:
        UsageError: the target's answer cannot give that probability, or it is not in [0, 1].
    """
    answer = target(options, dict(row)) if _accepts_row(target) else target(options)
    if isinstance(answer, Decision):
        if answer.probabilities is None:
            return 1.0 if _same(answer.choice, choice) else 0.0
        answer = list(answer.probabilities)
    if isinstance(answer, Mapping):
        prob = next((float(v) for k, v in answer.items() if _same(k, choice)), 0.0)
    elif isinstance(answer, Sequence | np.ndarray) and not isinstance(answer, str):
        probs = list(answer)
        if len(probs) != len(options):
            raise UsageError(
                f"the target policy returned {len(probs)} probabilities for {len(options)} options "
                f"(decision {row.get('decision_id')!r}): return one per option, in the options' order"
            )
        index = next((i for i, o in enumerate(options) if _same(o, choice)), None)
        if index is None:
            raise UsageError(
                f"the logged choice {choice!r} of decision {row.get('decision_id')!r} is not one of "
                "its options (a set choice?): make the target return a mapping {choice: probability} "
                "or a Decision"
            )
        prob = float(probs[index])
    else:
        raise UsageError(
            f"the target policy returned {answer!r}: return probabilities aligned with the options, "
            "a mapping option -> probability, or a loom.Decision"
        )
    if not 0.0 <= prob <= 1.0 + 1e-9:
        raise UsageError(f"the target policy gave probability {prob} (decision {row.get('decision_id')!r})")
    return prob


def _rewards(decisions: DataFrame, reward: Reward, outcomes: DataFrame | None) -> FloatArray:
    if callable(reward):
        ids = decisions["execution_id"].astype(object)
        values = {eid: reward(str(eid)) for eid in pd.unique(ids)}
        return _array([np.nan if values[e] is None else values[e] for e in ids])
    if outcomes is None:
        raise UsageError(
            f"reward={reward!r} names a column: pass outcomes=<a DataFrame with execution_id and {reward!r}>"
        )
    if reward not in outcomes.columns or "execution_id" not in outcomes.columns:
        raise UsageError(
            f"the outcomes DataFrame needs the columns execution_id and {reward!r} (it has {list(outcomes.columns)})"
        )
    keys = ["execution_id", "decision_id"] if "decision_id" in outcomes.columns else ["execution_id"]
    right = outcomes[[*keys, reward]].copy()
    for key in keys:
        right[key] = right[key].astype(object)
    if right.duplicated(keys).any():
        raise UsageError(f"the outcomes DataFrame has several rows for one {' + '.join(keys)}: keep one reward each")
    left = decisions[keys].copy()
    for key in keys:
        left[key] = left[key].astype(object)
    merged = left.merge(right, on=keys, how="left")
    return _floats(merged[reward])


def _bootstrap(w: FloatArray, r: FloatArray, n_bootstrap: int, seed: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    n = len(w)
    chunk = max(1, _BOOTSTRAP_CELLS // max(n, 1))
    ips_b: list[FloatArray] = []
    snips_b: list[FloatArray] = []
    done = 0
    while done < n_bootstrap:
        size = min(chunk, n_bootstrap - done)
        idx = rng.integers(0, n, size=(size, n))
        wb, rb = w[idx], r[idx]
        wr = (wb * rb).sum(axis=1)
        ws = wb.sum(axis=1)
        ips_b.append(wr / n)
        with np.errstate(invalid="ignore", divide="ignore"):
            snips_b.append(np.where(ws > 0, wr / np.where(ws > 0, ws, 1.0), np.nan))
        done += size
    return np.concatenate(ips_b), np.concatenate(snips_b)


def _interval(samples: FloatArray, confidence: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if not len(finite):
        return (math.nan, math.nan)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return (float(low), float(high))


def estimate_policy_value(
    decisions: DataFrame,
    target: TargetPolicy,
    reward: Reward,
    *,
    outcomes: DataFrame | None = None,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PolicyEstimate:
    """IPS and SNIPS estimates of ``target``'s value from logged decisions, with bootstrap intervals.

    Args:
        decisions: Logged decisions (``frames.decisions()``, filtered to the ones to evaluate):
            ``execution_id``, ``decision_id``, ``options``, ``choice``, ``propensity``.
        target: ``target(options)`` (or ``target(options, row)`` for a contextual policy, ``row``
            being the decision as a dict) returning probabilities aligned with the options, a
            mapping option -> probability, or a ``Decision``.
        reward: A column of ``outcomes`` (keyed by ``execution_id``, and ``decision_id`` when that
            column exists), or a function ``reward(execution_id) -> float``.
        outcomes: The outcomes DataFrame when ``reward`` is a column name.
        n_bootstrap: Bootstrap resamples.
        confidence: Coverage of the percentile intervals.
        seed: Seed of the bootstrap's generator.

    Raises:
        UsageError: missing columns, duplicate outcomes, or a target answer that gives no probability.
    """
    if not 0.0 < confidence < 1.0:
        raise UsageError(f"confidence must be between 0 and 1, not {confidence}")
    if n_bootstrap < 1:
        raise UsageError(f"n_bootstrap must be at least 1, not {n_bootstrap}")
    missing = {"execution_id", "options", "choice", "propensity"} - set(decisions.columns)
    if missing:
        raise UsageError(f"the decisions DataFrame lacks {sorted(missing)}: pass frames.decisions()")
    rows = decisions.reset_index(drop=True)
    if "decision_id" not in rows.columns:
        rows = rows.assign(decision_id=None)
    propensity = _floats(rows["propensity"])
    has_propensity = np.isfinite(propensity) & (propensity > 0)
    rewards = _rewards(rows, reward, outcomes)
    has_reward = np.isfinite(rewards)
    used = has_propensity & has_reward
    excluded_p = int((~has_propensity).sum())
    excluded_r = int((has_propensity & ~has_reward).sum())
    records = rows.loc[used].to_dict("records")
    pi = _array([target_probability(target, *_decoded(rec["options"], rec["choice"]), rec) for rec in records])
    w = pi / propensity[used] if len(records) else _array([])
    r = rewards[used]
    n = len(w)
    if n == 0:
        nan2 = (math.nan, math.nan)
        return PolicyEstimate(
            ips=math.nan,
            snips=math.nan,
            ips_interval=nan2,
            snips_interval=nan2,
            effective_sample_size=0.0,
            n=0,
            excluded_no_propensity=excluded_p,
            excluded_no_reward=excluded_r,
            logged_value=math.nan,
            max_weight=math.nan,
            confidence=confidence,
            n_bootstrap=n_bootstrap,
            seed=seed,
        )
    ips_b, snips_b = _bootstrap(w, r, n_bootstrap, seed)
    return PolicyEstimate(
        ips=ips(w, r),
        snips=snips(w, r),
        ips_interval=_interval(ips_b, confidence),
        snips_interval=_interval(snips_b, confidence),
        effective_sample_size=effective_sample_size(w),
        n=n,
        excluded_no_propensity=excluded_p,
        excluded_no_reward=excluded_r,
        logged_value=float(np.mean(r)),
        max_weight=float(np.max(w)),
        confidence=confidence,
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
