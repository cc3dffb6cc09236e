"""Group-sequential goodness of fit: stop a scenario early once its evidence is decisive (reject or pass).

The design has a handful of looks at planned cumulative sample sizes. At each look the pooled Cressie–Read statistic
is compared with two boundaries: above the rejection boundary the scenario fails at once (α-spending, Bonferroni
over looks); below the pass boundary it passes at once, because every alternative at total variation ε would have
produced a larger statistic with probability at least ``1 - β_k`` (β-spending). The last look is a plain fixed-N test
planned, like :func:`plan_sample_size`, in the noncentral χ² model.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from specverify.errors import InvalidArgument
from specverify.stats._checks import as_counts
from specverify.stats.gof import _power_divergence, chi2_tail
from specverify.stats.sequential_plan import SequentialPlan, plan_sequential

__all__ = ["SequentialPlan", "SequentialDecision", "plan_sequential", "sequential_decision", "STATUSES"]

STATUSES = ("reject", "pass", "continue")


@dataclass(frozen=True)
class SequentialDecision:
    """Result of :func:`sequential_decision` at one look.

    Attributes
    ----------
    status : str
        ``"reject"``, ``"pass"`` or ``"continue"`` (never ``"continue"`` at the last look).
    look : int
        Index of the look into ``plan.schedule``.
    n : int
        Samples seen so far (``plan.schedule[look]``).
    statistic : float
        Pooled Cressie–Read statistic at this look.
    df : int
        Its degrees of freedom.
    look_pvalue : float
        Fixed-N p-value of this look alone (upper χ²(df) tail); not valid after looking more than once.
    pvalue : float
        Sequential p-value, valid at any look and any stopping rule: ``min over looks j <= look of
        look_pvalue_j * alpha / alpha_spent_j``, capped at 1 (with ``others``: the smallest p-value of look j over
        the omnibus and them in place of ``look_pvalue_j``). ``status == "reject"`` exactly when it is ``<= alpha``.
    reject_threshold, pass_threshold : float
        The boundaries the statistic was compared with.
    next_n : int or None
        Cumulative N of the next look, ``None`` unless ``status == "continue"``.
    held : bool
        The statistic was inside the pass boundary but ``pvalue`` was at or below ``pass_floor``: the early pass was
        held back and the design draws on (see :func:`sequential_decision`).
    """

    status: str
    look: int
    n: int
    statistic: float
    df: int
    look_pvalue: float
    pvalue: float
    reject_threshold: float
    pass_threshold: float
    next_n: int | None
    held: bool = False


def _look_statistics(plan: SequentialPlan, look: int, counts: np.ndarray) -> np.ndarray:
    """Pooled Cressie–Read statistic of each row of ``counts`` (int [B, K], rows summing to the look's N) -> [B]."""
    cells = plan.cells[look]
    num_cells = int(cells.max()) + 1
    if num_cells == 1:
        return np.zeros(counts.shape[0])
    onehot = np.zeros((cells.size, num_cells))
    onehot[np.arange(cells.size), cells] = 1.0
    expected_counts = plan.schedule[look] * (plan.expected @ onehot)  # [C]
    return _power_divergence(counts @ onehot, expected_counts, plan.lambda_)


def _check_look(plan, look) -> int:
    if not isinstance(plan, SequentialPlan):
        raise InvalidArgument(f"plan={plan!r}; expected a SequentialPlan. Make one with plan_sequential(...).")
    if isinstance(look, bool) or not isinstance(look, numbers.Integral) or not 0 <= look < plan.num_looks:
        raise InvalidArgument(
            f"look={look!r}; expected an integer index into plan.schedule, 0 <= look < {plan.num_looks}."
        )
    return int(look)


def _others_log_pvalue(others) -> float:
    """log of the smallest of the other tests' fixed-N p-values at a look (0.0: none)."""
    try:
        values = [float(p) for p in others]
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"others={others!r}; expected a sequence of p-values in [0, 1].") from error
    if not all(0.0 <= p <= 1.0 for p in values):
        raise InvalidArgument(
            f"others={others!r}; expected p-values in [0, 1] (no NaN). Check the tests that made them."
        )
    smallest = min(values, default=1.0)
    return math.log(smallest) if smallest > 0 else -math.inf


def sequential_decision(plan, counts, look, *, previous=None, pass_floor=0.0, others=()) -> SequentialDecision:
    """Decide at one look of a :class:`SequentialPlan`: reject, pass, or draw on to the next look.

    Parameters
    ----------
    plan : SequentialPlan
        The design, from :func:`plan_sequential`.
    counts : array_like, int [K]
        Cumulative counts of every outcome of ``plan.expected``; they must sum to ``plan.schedule[look]``.
    look : int
        Index of the look, ``0 <= look < plan.num_looks``.
    previous : SequentialDecision, optional
        The decision at the previous look (status ``"continue"``); carries the running minimum that makes
        ``pvalue`` valid across looks. Omit it only at the first look you make.
    pass_floor : float, optional
        An early pass (any look but the last) needs ``pvalue > pass_floor`` (default 0: no floor). With the floor
        at the level a multiple-testing procedure can reject at (the family α for Holm), no early pass is ever
        undone by it, and strong evidence is never passed early: the design draws on to its last look instead.
    others : sequence of float, optional
        Fixed-N p-values, at this look's counts, of further tests run beside the omnibus one (the battery's
        surprisal, max-cell and prefix tests, :func:`~specverify.stats.battery.side_pvalues`). Each is spent like
        the omnibus one: rejected at the look's level ``plan.alpha_spent[look]``, entered into ``pvalue`` with the
        same weight. ``plan.alpha`` is then the level of *each* test: whoever combines them multiplies ``pvalue``
        by the number of tests (Bonferroni), as ``plan_sequential`` was given ``alpha`` divided by it.

    Returns
    -------
    SequentialDecision

    Notes
    -----
    ``"reject"`` when the look's p-value is at most ``plan.alpha_spent[look]``, else ``"pass"`` when the statistic
    is at most ``plan.pass_thresholds[look]`` and ``pvalue > pass_floor`` (always at the last look), else
    ``"continue"``. The floor only removes early stops, so both bounds below still hold. The validity
    conditions are those of :func:`plan_sequential`: false alarms at most ``plan.alpha`` over every look together,
    and power at least ``plan.power`` against every alternative at TV ``plan.epsilon`` on the reference partition
    (noncentral χ² model). Skipping looks keeps both bounds (it only removes chances to reject or pass); drawing
    a different N than the schedule does not, hence the check on ``counts``.

    ``pvalue`` is the Bonferroni-weighted running minimum ``min_j p_j alpha / alpha_j``: under the null
    ``P(pvalue <= u) <= Σ_j u alpha_j / alpha = u`` for every u, so it can enter Holm's procedure (:func:`holm`) at
    any stopping time, including after an early pass.

    Examples
    --------
    >>> law = np.full(4, 0.25)
    >>> plan = plan_sequential(law, 0.2, alpha=1e-3, looks=4)
    >>> plan.schedule
    (57, 113, 169, 225)
    >>> decision = sequential_decision(plan, [20, 12, 13, 12], 0)
    >>> decision.status, decision.next_n
    ('continue', 113)
    >>> decision = sequential_decision(plan, [29, 28, 28, 28], 1, previous=decision)
    >>> decision.status, round(decision.pvalue, 3)
    ('pass', 1.0)
    >>> sequential_decision(plan, [100, 13, 0, 0], 1).status
    'reject'
    """
    look = _check_look(plan, look)
    counts = as_counts(counts, plan.expected.size)
    ok_floor = isinstance(pass_floor, numbers.Real) and not isinstance(pass_floor, bool) and 0.0 <= pass_floor < 1.0
    if not ok_floor:
        raise InvalidArgument(
            f"pass_floor={pass_floor!r}; expected a number in [0, 1): the p-value an early pass must exceed (0: none)."
        )
    n = int(counts.sum())
    if n != plan.schedule[look]:
        raise InvalidArgument(
            f"counts sum to n={n!r}; expected plan.schedule[{look}] = {plan.schedule[look]}. Draw exactly up to each "
            "look's cumulative N: the boundaries are computed for it."
        )
    running = 1.0
    if previous is not None:
        if not isinstance(previous, SequentialDecision) or previous.status != "continue" or previous.look >= look:
            raise InvalidArgument(
                f"previous={previous!r}; expected the SequentialDecision of an earlier look whose status is "
                "'continue' (stop drawing after 'reject' or 'pass'), or None at the first look."
            )
        running = previous.pvalue
    statistic = float(_look_statistics(plan, look, counts[None, :])[0])
    df = plan.dfs[look]
    look_pvalue, log_pvalue = chi2_tail(statistic, df)
    log_pvalue = min(log_pvalue, _others_log_pvalue(others))  # the look's smallest p-value over the tests
    level = plan.alpha_spent[look]
    adjusted = math.exp(min(0.0, log_pvalue + math.log(plan.alpha / level)))
    pvalue = min(running, adjusted)
    last = look == plan.num_looks - 1
    inside = statistic <= plan.pass_thresholds[look]
    held = inside and not last and pvalue <= pass_floor
    if log_pvalue <= math.log(level):
        status, held = "reject", False
    elif last or (inside and not held):
        status = "pass"
    else:
        status = "continue"
    next_n = plan.schedule[look + 1] if status == "continue" else None
    reject_threshold, pass_threshold = plan.reject_thresholds[look], plan.pass_thresholds[look]
    return SequentialDecision(
        status, look, n, statistic, df, look_pvalue, pvalue, reject_threshold, pass_threshold, next_n, held
    )
