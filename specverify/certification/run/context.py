"""What every check reads while a certification runs: the α plan, the matrix, the decoders' sessions, the budget.

``Run`` is built once per decoder of a run (``execution.worker``) and never gains attributes: the two-sample decoder
(``other``), the budget's allocation, the deadline and the greedy scenarios' shared answers are fields from the start,
so no state outlives the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from specverify.certification.config.run_config import RunConfig
from specverify.certification.matrix.scenarios import Matrix, matrix
from specverify.certification.run.budget import Allocation, allotted
from specverify.certification.run.collect import Session
from specverify.enums import DraftFamily, ModelFamily

__all__ = ["BATTERY_SIZE", "AlphaPlan", "Run", "Deadline", "BudgetSpent", "matrix_for"]

BATTERY_SIZE = 5  # omnibus, surprisal, max-cell, prefix-token, prefix-rank (len(stats.BATTERY_TESTS), tested)


@dataclass(frozen=True)
class AlphaPlan:
    """The α budget: each of ``num_tests`` sampling tests (over the family's whole matrix, so ``--scenario NAME``
    draws what the full run draws) gets ``alpha / num_tests``, split over the battery; N is planned to detect a TV
    of ``epsilon`` with ``power`` at that level."""

    alpha: float
    epsilon: float
    power: float
    num_tests: int

    @property
    def alpha_scenario(self) -> float:
        return self.alpha / max(1, self.num_tests)

    @property
    def alpha_test(self) -> float:
        return self.alpha_scenario / BATTERY_SIZE

    def sample_size(self, law) -> int:
        return self.sample_size_of(law.probs)

    def sample_size_of(self, probs, epsilon: Optional[float] = None) -> int:
        from specverify.stats import plan_sample_size

        eps = self.epsilon if epsilon is None else epsilon
        return int(plan_sample_size(probs, eps, alpha=self.alpha_test, power=self.power))


class BudgetSpent(Exception):
    """The budget's wall clock ran out between two calls of a scenario."""


class Deadline:
    """A runner that refuses new calls once the budget's wall clock is spent (an in-process call cannot be
    interrupted: the budget is enforced between calls). ``end`` (a ``clock()`` reading, None: no deadline) is set
    by whoever runs the part."""

    def __init__(self, runner, end: Optional[float] = None, clock=time.perf_counter):
        self._runner, self.end, self._clock = runner, end, clock

    def __getattr__(self, name):
        return getattr(self._runner, name)

    def request(self, op: str, *args: object) -> object:
        if self.end is not None and op in ("call", "sample") and self._clock() > self.end:
            raise BudgetSpent()
        return self._runner.request(op, *args)

    def calls(self, key, batches: list) -> tuple:
        """The runner's ``calls`` (several calls sent at once) without a deadline; with one, a call at a time, each
        refused once the budget is spent, as :meth:`request` does."""
        if self.end is None and callable(getattr(self._runner, "calls", None)):
            return self._runner.calls(key, batches)
        from specverify.certification.run.runner import each_call

        return each_call(lambda requests: self.request("call", key, requests), batches)  # BudgetSpent propagates


@dataclass(frozen=True)
class Run:
    """One certification in progress. ``other`` is the ``--against`` decoder's session; ``allocation`` the
    budget's shares (None without ``--budget`` / ``--max-samples``); ``pilots`` planned sizes a check measured
    once (a user pair's pilot of the plain path), by scenario name; ``greedy_answers`` the completions that the
    greedy scenarios' shared calls made for scenarios not run yet (``checks/greedy.py``: ``{scenario name:
    answers}``, each popped by its scenario), so they are made once per run and dropped with it; ``here`` the
    names of the scenarios this process runs, when it runs only some of them (a shard, a pytest item, a Ray actor),
    so shared calls are made only for those."""

    config: RunConfig
    matrix: Matrix
    plan: AlphaPlan
    session: Session
    other: Optional[Session] = None
    allocation: Optional[Allocation] = None
    started: float = 0.0
    pilots: dict = field(default_factory=dict)
    greedy_answers: dict = field(default_factory=dict)
    here: Optional[frozenset] = None  # the scenarios this process runs (None: the run's selection), for shared calls

    @property
    def seed(self) -> int:
        return self.config.seed

    def reproduce(self, scenario) -> str:
        """The command line that reruns ``scenario`` alone (same N and draws: the α plan counts the whole matrix)."""
        return self.config.reproduce(scenario=scenario.name)

    def allotted(self, scenario, planned: int) -> int:
        """What the budget lets ``scenario`` draw of its ``planned`` N (all of it without a budget)."""
        if self.allocation is None:
            return planned
        return allotted(planned, self.allocation.fraction(scenario.name))


def matrix_for(config: RunConfig) -> Matrix:
    """The matrix a configuration runs: the user pair's, a draft family's, or the model family's; on the checkpoint
    family, the pair set the factory declares (``checkpoint_pairs``, ``matrix_checkpoint.pair_set_of``)."""
    if config.user_pair:
        from specverify.certification.matrix.user import user_matrix

        return user_matrix(config.target_dir, config.draft_dir)
    from specverify.certification.run.factory import SetupFailure, resolve_factory

    pairs, factory = None, None
    if (config.models == ModelFamily.CHECKPOINT and config.draft_family == DraftFamily.AR) or config.engine_config:
        try:
            factory = resolve_factory(config.factory)
        except SetupFailure:  # the run reports it as its set-up failure (pipeline.run_certification)
            factory = None
    if factory is not None and config.models == ModelFamily.CHECKPOINT and config.draft_family == DraftFamily.AR:
        from specverify.certification.matrix.checkpoint import pair_set_of

        try:
            pairs = pair_set_of(factory)
        except SetupFailure:
            factory = None
    family = matrix(config.models, config.draft_family, pairs)
    if factory is None or not config.engine_config:
        return family
    from specverify.certification.matrix.configured import engine_config_matrix  # a configuration's added scenarios

    return engine_config_matrix(family, factory, config.engine_config, config.models, pairs)
