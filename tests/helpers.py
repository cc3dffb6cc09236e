"""Small helpers shared by tests: a pooled chi-square against an exact law (pooling depends on the law and N
only), used where the test must not lean on the code under test."""

from __future__ import annotations

import numpy as np
import scipy.stats


def pooled_pvalue(counts: dict, law) -> tuple[float, int, int]:
    """(p-value, df, observed zero-probability count) of pooled Pearson χ² of ``counts`` against ``law``."""
    n = sum(counts.values())
    observed = np.zeros(len(law))
    impossible = 0
    for outcome, c in counts.items():
        i = law.index(outcome)
        if i < 0:
            impossible += c
        else:
            observed[i] += c
    expected = law.probs * n
    cells, current, mass = [], [], 0.0
    for i in np.argsort(expected, kind="stable"):
        current.append(i)
        mass += expected[i]
        if mass >= 5:
            cells.append(current)
            current, mass = [], 0.0
    if current:
        if cells:
            cells[0] += current
        else:
            cells.append(current)
    o = np.array([observed[c].sum() for c in cells])
    e = np.array([expected[c].sum() for c in cells])
    if len(cells) < 2:
        return 1.0, 0, impossible
    stat = float(((o - e) ** 2 / e).sum())
    return float(scipy.stats.chi2.sf(stat, len(cells) - 1)), len(cells) - 1, impossible
