"""Off-policy evaluation (``loom_nb.analysis.ope``): IPS / SNIPS from logged decisions, validated on a
simulated bandit with a known value (seeded), through a real runtime's journal."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loom_nb as loom
from loom_nb.analysis import effective_sample_size, estimate_policy_value, frames, ips, snips
from loom_nb.analysis.ope import PolicyEstimate
from loom_nb.errors import UsageError
from tests.analysis.support import JOURNALS, make_runtime, routed_run

ARMS = ["a", "b", "c"]
MEANS = {"a": 0.2, "b": 0.5, "c": 0.8}
LOGGING = [0.5, 0.3, 0.2]
TARGET = [0.1, 0.2, 0.7]
TRUTH = sum(t * MEANS[arm] for arm, t in zip(ARMS, TARGET, strict=True))  # 0.68


def target(options: Sequence[Any]) -> list[float]:
    """The policy to evaluate: probabilities aligned with the options."""
    return [TARGET[ARMS.index(o)] for o in options]


def logging_policy(seed: int) -> Any:
    """A seeded stochastic policy that logs its probabilities."""
    rng = random.Random(seed)

    def policy(options: Sequence[Any]) -> loom.Decision:
        return loom.Decision(choice=rng.choices(list(options), weights=LOGGING)[0], probabilities=LOGGING)

    return policy


def bernoulli_rewards(choices: Sequence[Any], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random(len(choices)) < np.array([MEANS[c] for c in choices])).astype(float)


async def logged_bandit(rt: loom.Runtime, rounds: int, *, seed: int, unlogged: int = 0) -> str:
    """One execution that makes ``rounds`` logged decisions (``#round:<i>``) and ``unlogged``
    decisions whose policy gives no probabilities."""
    policy = logging_policy(seed)

    def plain(options: Sequence[Any]) -> Any:
        return options[0]

    async def bandit(ctx: loom.ExecutionContext, n: int) -> int:
        for i in range(n):
            await ctx.decide(f"#round:{i}", ARMS, policy)
        for i in range(unlogged):
            await ctx.decide(f"#plain:{i}", ARMS, plain)
        return n

    rt.flows.register(bandit, "bandit")
    result = await rt.start("bandit", rounds)
    assert result.status == "completed"
    return result.execution_id


@pytest.mark.parametrize("kind", JOURNALS)
@pytest.mark.slow
async def test_simulated_bandit_interval_covers_the_truth(kind: str) -> None:
    rt = make_runtime(kind, tick=0.0)
    eid = await logged_bandit(rt, 2000, seed=11, unlogged=25)
    decisions = frames(rt).decisions(eid)
    assert len(decisions) == 2025
    outcomes = pd.DataFrame(
        {
            "execution_id": decisions["execution_id"],
            "decision_id": decisions["decision_id"],
            "reward": bernoulli_rewards(list(decisions["choice"]), seed=12),
        }
    )
    est = estimate_policy_value(decisions, target, "reward", outcomes=outcomes, seed=3)
    assert isinstance(est, PolicyEstimate)
    assert est.n == 2000 and est.excluded_no_propensity == 25 and est.excluded_no_reward == 0
    assert est.ips_interval[0] <= TRUTH <= est.ips_interval[1]
    assert est.snips_interval[0] <= TRUTH <= est.snips_interval[1]
    assert abs(est.ips - TRUTH) < 0.08 and abs(est.snips - TRUTH) < 0.05
    # the logging policy's own value is far from the target's: the estimate is not the plain mean
    logged_truth = sum(p * MEANS[a] for a, p in zip(ARMS, LOGGING, strict=True))  # 0.41
    assert abs(est.logged_value - logged_truth) < 0.05
    assert 0 < est.effective_sample_size < est.n
    assert est.max_weight == pytest.approx(0.7 / 0.2)
    # seeded: the same call gives the same interval; another seed another (close) one
    again = estimate_policy_value(decisions, target, "reward", outcomes=outcomes, seed=3)
    assert again == est
    other = estimate_policy_value(decisions, target, "reward", outcomes=outcomes, seed=4)
    assert other.ips == est.ips and other.ips_interval != est.ips_interval
    assert "IPS" in str(est) and list(est.to_frame()["estimator"]) == ["ips", "snips"]
    rt.close()


async def test_reward_as_a_function_of_the_execution() -> None:
    rt = make_runtime("memory", tick=0.0)
    policy = logging_policy(5)

    async def one_round(ctx: loom.ExecutionContext, _: Any) -> Any:
        return await ctx.decide("#pick", ARMS, policy)

    rt.flows.register(one_round, "one_round")
    choices: dict[str, str] = {}
    for _ in range(400):
        result = await rt.start("one_round", None)
        choices[result.execution_id] = result.output
    rewards = dict(zip(choices, bernoulli_rewards(list(choices.values()), seed=6), strict=True))
    missing = set(list(choices)[:10])

    def reward(execution_id: str) -> float:
        return math.nan if execution_id in missing else float(rewards[execution_id])

    f = frames(rt)
    est = f.estimate_policy_value(target, reward, n_bootstrap=800, seed=0)
    assert est.n == 390 and est.excluded_no_reward == 10 and est.excluded_no_propensity == 0
    assert est.snips_interval[0] <= TRUTH <= est.snips_interval[1]
    assert est.ips_interval[0] <= TRUTH <= est.ips_interval[1]
    rt.close()


def simulated(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    choices = rng.choice(ARMS, size=n, p=LOGGING)
    return pd.DataFrame(
        {
            "execution_id": [f"e{i}" for i in range(n)],
            "decision_id": "#pick",
            "options": [ARMS] * n,
            "choice": choices,
            "propensity": [LOGGING[ARMS.index(c)] for c in choices],
            "reward": (rng.random(n) < np.array([MEANS[c] for c in choices])).astype(float),
        }
    )


@pytest.mark.slow
def test_intervals_cover_the_truth_at_about_their_level() -> None:
    covered = {"ips": 0, "snips": 0}
    trials = 80
    for seed in range(trials):
        df = simulated(400, seed)
        est = estimate_policy_value(df, target, "reward", outcomes=df, n_bootstrap=400, seed=seed)
        covered["ips"] += est.ips_interval[0] <= TRUTH <= est.ips_interval[1]
        covered["snips"] += est.snips_interval[0] <= TRUTH <= est.snips_interval[1]
    assert covered["ips"] / trials >= 0.85, covered
    assert covered["snips"] / trials >= 0.85, covered


def test_on_policy_target_gives_unit_weights() -> None:
    df = simulated(300, 1)

    def same(options: Sequence[Any]) -> list[float]:
        return LOGGING

    est = estimate_policy_value(df, same, "reward", outcomes=df, n_bootstrap=50)
    assert est.ips == pytest.approx(df["reward"].mean())
    assert est.snips == pytest.approx(df["reward"].mean())
    assert est.effective_sample_size == pytest.approx(300)
    assert est.max_weight == pytest.approx(1.0)


def test_target_answers_as_mapping_or_decision_or_contextual() -> None:
    df = simulated(200, 2)
    base = estimate_policy_value(df, target, "reward", outcomes=df, n_bootstrap=20)
    as_map = estimate_policy_value(
        df, lambda options: dict(zip(ARMS, TARGET, strict=True)), "reward", outcomes=df, n_bootstrap=20
    )
    as_decision = estimate_policy_value(
        df,
        lambda options: loom.Decision(choice="c", probabilities=target(options)),
        "reward",
        outcomes=df,
        n_bootstrap=20,
    )
    assert as_map.ips == pytest.approx(base.ips) and as_decision.ips == pytest.approx(base.ips)

    greedy = estimate_policy_value(df, lambda options: loom.Decision(choice="c"), "reward", outcomes=df, n_bootstrap=20)
    picked = df["choice"] == "c"
    assert greedy.ips == pytest.approx((df.loc[picked, "reward"] / 0.2).sum() / len(df))
    assert greedy.snips == pytest.approx(df.loc[picked, "reward"].mean())

    seen: list[str] = []

    def contextual(options: Sequence[Any], row: dict[str, Any]) -> list[float]:
        seen.append(row["execution_id"])
        return target(options)

    ctx = estimate_policy_value(df, contextual, "reward", outcomes=df, n_bootstrap=20)
    assert ctx.ips == pytest.approx(base.ips) and len(seen) == len(df)


def test_sql_frames_with_json_text_work_too() -> None:
    df = simulated(50, 3)
    text = df.assign(options=df["options"].map(lambda o: '["a","b","c"]'), choice=df["choice"].map(lambda c: f'"{c}"'))
    a = estimate_policy_value(df, target, "reward", outcomes=df, n_bootstrap=10)
    b = estimate_policy_value(text, target, "reward", outcomes=df, n_bootstrap=10)
    assert a.ips == pytest.approx(b.ips)


def test_nothing_usable_gives_nan_and_counts() -> None:
    df = simulated(20, 4).assign(propensity=np.nan)
    est = estimate_policy_value(df, target, "reward", outcomes=df)
    assert est.n == 0 and est.excluded_no_propensity == 20
    assert math.isnan(est.ips) and math.isnan(est.snips) and est.effective_sample_size == 0.0


def test_usage_errors() -> None:
    df = simulated(20, 5)
    with pytest.raises(UsageError, match="pass outcomes="):
        estimate_policy_value(df, target, "reward")
    with pytest.raises(UsageError, match="needs the columns"):
        estimate_policy_value(df, target, "score", outcomes=df)
    with pytest.raises(UsageError, match="several rows"):
        estimate_policy_value(df, target, "reward", outcomes=pd.concat([df, df]))
    with pytest.raises(UsageError, match="2 probabilities for 3 options"):
        estimate_policy_value(df, lambda options: [0.5, 0.5], "reward", outcomes=df)
    with pytest.raises(UsageError, match="return probabilities aligned"):
        estimate_policy_value(df, lambda options: "a", "reward", outcomes=df)
    with pytest.raises(UsageError, match=r"probability 2\.0"):
        estimate_policy_value(df, lambda options: [2.0, 0.0, 0.0], "reward", outcomes=df)
    with pytest.raises(UsageError, match="lacks"):
        estimate_policy_value(df.drop(columns=["propensity"]), target, "reward", outcomes=df)
    with pytest.raises(UsageError, match="confidence"):
        estimate_policy_value(df, target, "reward", outcomes=df, confidence=1.5)


async def test_frames_estimate_over_routed_agent_decisions() -> None:
    rt = make_runtime("duckdb")
    eid = await routed_run(rt, turns=3)  # choices: small (0.8), large (0.6), small (0.8)
    f = frames(rt)

    def always_large(options: Sequence[Any]) -> list[float]:
        return [0.0, 1.0]

    est = f.estimate_policy_value(always_large, lambda execution_id: 1.0, n_bootstrap=50)
    assert est.n == 3 and est.ips == pytest.approx((1 / 0.6) / 3) and est.snips == pytest.approx(1.0)
    one = f.estimate_policy_value(always_large, lambda execution_id: 1.0, decision_id="#turn:1:route")
    assert one.n == 1 and one.ips == pytest.approx(1 / 0.6)
    some = f.estimate_policy_value(
        always_large, lambda execution_id: 1.0, decision_id=lambda d: d != "#turn:1:route", n_bootstrap=10
    )
    assert some.n == 2 and some.ips == 0.0
    assert f.decisions(eid)["execution_id"].tolist() == [eid] * 3
    rt.close()


weights = st.lists(st.floats(min_value=0.01, max_value=50.0), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), w=weights)
def test_estimator_properties(data: st.DataObject, w: list[float]) -> None:
    r = data.draw(st.lists(st.floats(min_value=-5.0, max_value=5.0), min_size=len(w), max_size=len(w)))
    assert min(r) - 1e-9 <= snips(w, r) <= max(r) + 1e-9
    assert 1.0 - 1e-9 <= effective_sample_size(w) <= len(w) + 1e-9
    assert ips([1.0] * len(r), r) == pytest.approx(sum(r) / len(r))
    assert ips(w, r) == pytest.approx(sum(a * b for a, b in zip(w, r, strict=True)) / len(w))
    scaled = [x * 3 for x in w]
    assert snips(scaled, r) == pytest.approx(snips(w, r))  # self-normalised: scale-free


def test_estimators_on_nothing() -> None:
    assert math.isnan(ips([], [])) and math.isnan(snips([], [])) and effective_sample_size([]) == 0.0
    assert math.isnan(snips([0.0, 0.0], [1.0, 1.0]))
