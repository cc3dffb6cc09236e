"""Statistics for certifying a speculative decoder's output law against the exact law (numpy and scipy only).

The omnibus test is a power-divergence χ² on cells pooled by the expected law and N alone; the surprisal and
max-cell tests cover the bug shapes it detects slowly; :func:`plan_sample_size` turns a total-variation target into
a worst-case N; :func:`tv_estimate` and :func:`worst_outcomes` explain a failure. Every power claim is for the pooled
partition: a bug that only moves mass inside one pooled cell is invisible to the omnibus test.
"""

from __future__ import annotations

from specverify.stats.battery import BATTERY_TESTS, BatteryResult, battery, battery_directions, holm, side_pvalues
from specverify.stats.collision import CollisionResult, collision_probability, collision_test
from specverify.stats.gof import GofResult, goodness_of_fit, homogeneity_test, pooled_cells
from specverify.stats.power import detectable_tv, family_alpha_per_test, noncentrality_needed, plan_sample_size
from specverify.stats.power_shape import power_against, sample_size_against
from specverify.stats.prefix import PrefixScoreResult, prefix_directions, prefix_score_test
from specverify.stats.sequential import SequentialDecision, SequentialPlan, plan_sequential, sequential_decision
from specverify.stats.targeted import (
    MaxCellResult,
    OutcomeResidual,
    SurprisalResult,
    max_cell_test,
    surprisal_test,
    worst_outcomes,
)
from specverify.stats.tv import TVResult, tv_estimate

__all__ = [
    "BATTERY_TESTS",
    "BatteryResult",
    "CollisionResult",
    "GofResult",
    "MaxCellResult",
    "OutcomeResidual",
    "PrefixScoreResult",
    "SequentialDecision",
    "SequentialPlan",
    "SurprisalResult",
    "TVResult",
    "battery",
    "battery_directions",
    "collision_probability",
    "collision_test",
    "detectable_tv",
    "family_alpha_per_test",
    "goodness_of_fit",
    "holm",
    "homogeneity_test",
    "max_cell_test",
    "noncentrality_needed",
    "plan_sample_size",
    "plan_sequential",
    "power_against",
    "prefix_directions",
    "prefix_score_test",
    "pooled_cells",
    "sample_size_against",
    "sequential_decision",
    "side_pvalues",
    "surprisal_test",
    "tv_estimate",
    "worst_outcomes",
]
