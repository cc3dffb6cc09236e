"""Small helpers shared by tests, one copy each: a pooled chi-square against an exact law (pooling depends on the law
and N only), used where the test must not lean on the code under test; the flat tilt, an alternative at an exact TV;
the ``one_torch_thread`` fixture (autouse where a conftest or test module imports it); ``cli``, the command line
in-process."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``specverify ARGV`` run in-process."""
    import io

    from specverify.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Torch on one thread for the test: one-row ops never need a thread pool, and on a busy 2-core machine waking
    one costs milliseconds per call. Import it into a conftest or test module to use it there."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def flat_tilt(law: np.ndarray, cells: np.ndarray, tv: float) -> np.ndarray:  # [K], [K] -> [K]
    """Move mass ``tv`` between two unions of the pooled ``cells`` of mass ~1/2 each (greedy: heaviest cell to the
    lighter side), proportionally within each: TV exactly ``tv``, constant on every cell, the planner's worst case."""
    cell_mass = np.bincount(cells, weights=law)
    up_cells = np.zeros(cell_mass.size, dtype=bool)
    sides = [0.0, 0.0]
    for cell in np.argsort(-cell_mass, kind="stable"):
        side = int(sides[1] < sides[0])
        sides[side] += cell_mass[cell]
        up_cells[cell] = side == 1
    up = up_cells[cells]
    mass_up = law[up].sum()
    return np.where(up, law * (1 + tv / mass_up), law * (1 - tv / (1 - mass_up)))


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
