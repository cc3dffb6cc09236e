"""Group-sequential decisions: the plan's spending, early rejection, early pass, p-values and argument errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from specverify.errors import InvalidArgument
from specverify.stats import (
    SequentialDecision,
    SequentialPlan,
    goodness_of_fit,
    plan_sample_size,
    plan_sequential,
    pooled_cells,
    sequential_decision,
)
from tests.helpers import flat_tilt

from ._laws import zipf_law

UNIFORM = np.full(64, 1 / 64)
ZIPF = zipf_law(256, 1.1)


def run(plan: SequentialPlan, source: np.ndarray, seed: int) -> SequentialDecision:
    """Draw look by look from ``source`` and decide at each look until the design stops."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(source.size, dtype=np.int64)
    decision, drawn = None, 0
    for look, n in enumerate(plan.schedule):
        counts += rng.multinomial(n - drawn, source)
        drawn = n
        decision = sequential_decision(plan, counts, look, previous=decision)
        if decision.status != "continue":
            return decision
    raise AssertionError("the last look must decide")


@pytest.fixture(scope="module")
def uniform_plan() -> SequentialPlan:
    return plan_sequential(UNIFORM, 0.05, alpha=1e-6)


@pytest.fixture(scope="module")
def zipf_plan() -> SequentialPlan:
    return plan_sequential(ZIPF, 0.05, alpha=1e-6)


@pytest.mark.parametrize("law", [UNIFORM, ZIPF, zipf_law(1000, 1.6)])
def test_plan_spends_alpha_and_beta_and_orders_the_boundaries(law):
    plan = plan_sequential(law, 0.05, alpha=1e-6, power=0.9)
    assert math.isclose(sum(plan.alpha_spent), 1e-6, rel_tol=1e-12)
    assert math.isclose(sum(plan.beta_spent), 0.1, rel_tol=1e-12)
    assert list(plan.schedule) == sorted(set(plan.schedule))
    assert plan.max_n <= 1.3 * plan.fixed_n
    assert all(p <= r for p, r in zip(plan.pass_thresholds, plan.reject_thresholds))
    assert plan.pass_thresholds[-1] == plan.reject_thresholds[-1]
    assert all(p == -math.inf for p in plan.pass_thresholds[: plan.first_pass_look])
    reference = plan.cells[plan.first_pass_look]
    assert all(np.array_equal(c, reference) for c in plan.cells[plan.first_pass_look :])
    for look in range(plan.first_pass_look + 1):  # each look's own pooling, as goodness_of_fit pools
        assert np.array_equal(plan.cells[look], pooled_cells(law, plan.schedule[look]))


def test_uniform_plan_is_a_modest_inflation_of_the_fixed_plan(uniform_plan):
    assert uniform_plan.fixed_n == plan_sample_size(UNIFORM, 0.05, alpha=1e-6)
    assert 1.0 < uniform_plan.max_n / uniform_plan.fixed_n < 1.2


def test_statistic_is_the_pooled_cressie_read_of_goodness_of_fit(zipf_plan):
    look = zipf_plan.first_pass_look
    counts = np.random.default_rng(3).multinomial(zipf_plan.schedule[look], ZIPF)
    decision = sequential_decision(zipf_plan, counts, look)
    reference = goodness_of_fit(counts, ZIPF)
    assert decision.statistic == pytest.approx(reference.statistic, rel=1e-12)
    assert decision.df == reference.df
    assert decision.look_pvalue == pytest.approx(reference.pvalue, rel=1e-9)


@pytest.mark.parametrize("law", [UNIFORM, ZIPF], ids=["uniform64", "zipf256"])
def test_far_alternative_is_rejected_within_2000_outcomes(law):
    plan = plan_sequential(law, 0.05, alpha=1e-8)
    far = flat_tilt(law, plan.cells[plan.first_pass_look], 0.2)
    for seed in range(20):
        decision = run(plan, far, seed)
        assert decision.status == "reject"
        assert decision.n <= 2000
        assert decision.pvalue <= plan.alpha


@pytest.mark.parametrize("name", ["uniform_plan", "zipf_plan"])
def test_exact_draws_never_reject_and_pass_before_the_fixed_n(name, request):
    plan = request.getfixturevalue(name)
    law = plan.expected
    stops = []
    for seed in range(40):
        decision = run(plan, law, 1000 + seed)
        assert decision.status == "pass"
        assert decision.pvalue > plan.alpha
        assert decision.n < plan.fixed_n
        stops.append(decision.n)
    assert np.mean(stops) < 0.5 * plan.fixed_n


@pytest.mark.parametrize("name", ["uniform_plan", "zipf_plan"])
def test_data_at_twice_epsilon_never_pass(name, request):
    plan = request.getfixturevalue(name)
    bad = flat_tilt(plan.expected, plan.cells[plan.first_pass_look], 2 * plan.epsilon)
    for seed in range(40):
        assert run(plan, bad, 2000 + seed).status == "reject"


def test_pvalue_is_a_running_minimum_and_matches_the_status(uniform_plan):
    plan = uniform_plan
    rng = np.random.default_rng(5)
    counts = rng.multinomial(plan.schedule[0], UNIFORM)
    first = sequential_decision(plan, counts, 0)
    assert first.status == "continue" and first.next_n == plan.schedule[1]
    assert first.pvalue == pytest.approx(min(1.0, first.look_pvalue * plan.alpha / plan.alpha_spent[0]))
    # a perfectly balanced second look has look p-value 1: the running minimum keeps the first look's value
    n = plan.schedule[1]
    balanced = np.full(64, n // 64)
    balanced[: n - balanced.sum()] += 1
    second = sequential_decision(plan, balanced, 1, previous=first)
    assert second.pvalue == pytest.approx(first.pvalue)
    assert second.status in ("continue", "pass")
    skewed = np.zeros(64, dtype=np.int64)
    skewed[0] = n
    assert sequential_decision(plan, skewed, 1).status == "reject"


def test_last_look_always_decides(uniform_plan):
    plan = uniform_plan
    counts = np.random.default_rng(9).multinomial(plan.max_n, UNIFORM)
    assert sequential_decision(plan, counts, plan.num_looks - 1).status in ("reject", "pass")


def test_single_outcome_law_passes_at_its_only_look():
    plan = plan_sequential([1.0], 0.05, alpha=1e-6)
    assert plan.schedule == (plan_sample_size([1.0], 0.05, alpha=1e-6),)
    decision = sequential_decision(plan, [plan.max_n], 0)
    assert decision.status == "pass" and decision.pvalue == 1.0


def test_one_look_is_the_fixed_test_with_rejection_only_looks_before_it():
    plan = plan_sequential(UNIFORM, 0.05, alpha=1e-6, looks=1)
    assert math.isclose(sum(plan.alpha_spent), 1e-6, rel_tol=1e-12)
    assert plan.beta_spent[-1] == pytest.approx(0.1)
    assert plan.first_pass_look == plan.num_looks - 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(epsilon=0.0), "epsilon=0.0"),
        (dict(alpha=1.5), "alpha=1.5"),
        (dict(power=1.0), "power=1.0"),
        (dict(looks=0), "looks=0"),
        (dict(looks=2.5), "looks=2.5"),
        (dict(first_look=-1), "first_look=-1"),
        (dict(final_share=0.0), "final_share=0.0"),
        (dict(final_share=True), "final_share=True"),
        (dict(safety=0.5), "safety=0.5"),
        (dict(lambda_=-2.0), "lambda_=-2.0"),
        (dict(expected=[0.5, 0.6]), "expected sums to"),
    ],
)
def test_plan_argument_errors(kwargs, match):
    args = dict(expected=UNIFORM, epsilon=0.05, alpha=1e-6) | kwargs
    expected, epsilon = args.pop("expected"), args.pop("epsilon")
    with pytest.raises(InvalidArgument, match=match):
        plan_sequential(expected, epsilon, **args)


def test_decision_argument_errors(uniform_plan):
    plan = uniform_plan
    counts = np.random.default_rng(0).multinomial(plan.schedule[0], UNIFORM)
    with pytest.raises(InvalidArgument, match="plan="):
        sequential_decision("plan", counts, 0)
    with pytest.raises(InvalidArgument, match="look=99"):
        sequential_decision(plan, counts, 99)
    with pytest.raises(InvalidArgument, match="look=True"):
        sequential_decision(plan, counts, True)
    with pytest.raises(InvalidArgument, match=r"n=\d+; expected plan.schedule\[1\]"):
        sequential_decision(plan, counts, 1)
    with pytest.raises(InvalidArgument, match="counts="):
        sequential_decision(plan, counts[:10], 0)
    first = sequential_decision(plan, counts, 0)
    with pytest.raises(InvalidArgument, match="previous="):
        sequential_decision(plan, counts, 0, previous=first)  # not an earlier look
    stopped = SequentialDecision("pass", 0, plan.schedule[0], 0.0, 1, 1.0, 1.0, 1.0, 1.0, None)
    later = np.random.default_rng(1).multinomial(plan.schedule[1], UNIFORM)
    with pytest.raises(InvalidArgument, match="previous="):
        sequential_decision(plan, later, 1, previous=stopped)


def test_a_pass_floor_holds_back_an_early_pass_and_the_last_look_still_decides():
    law = np.full(4, 0.25)
    plan = plan_sequential(law, 0.2, alpha=1e-3, looks=4)
    first = sequential_decision(plan, [20, 12, 13, 12], 0)
    counts = [39, 24, 24, 26]  # inside look 1's pass boundary, any-time p-value 0.86
    free = sequential_decision(plan, counts, 1, previous=first)
    assert free.status == "pass" and not free.held and 0.8 < free.pvalue < 0.9
    held = sequential_decision(plan, counts, 1, previous=first, pass_floor=0.9)
    assert held.status == "continue" and held.held and held.next_n == plan.schedule[2]
    assert held.pvalue == free.pvalue and held.statistic == free.statistic  # the floor changes the stop, not the test
    nearly = sequential_decision(plan, [58, 37, 37, 37], 2, previous=held, pass_floor=0.9)
    last = sequential_decision(plan, [58, 56, 56, 55], 3, previous=nearly, pass_floor=0.9)
    assert last.status == "pass" and not last.held  # the last look always decides
    with pytest.raises(InvalidArgument, match="pass_floor=1.5"):
        sequential_decision(plan, counts, 1, previous=first, pass_floor=1.5)
