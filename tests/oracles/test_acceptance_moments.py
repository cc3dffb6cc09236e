"""The acceptance law's moments over a round's transitions at once (matrix products) against the definition, one
transition at a time: f = Σ p (z + f'), s = Σ p (z zᵀ + z f'ᵀ + f' zᵀ + s')."""

import numpy as np
import pytest

from specverify.oracles import draft_near, make_vocab, random_target
from specverify.oracles.acceptance_rounds import _setup, _z_matrix, _z_vector, round_moments
from specverify.params import SamplingParams


def _one_at_a_time(gamma, transitions, mean, second):
    f = np.zeros(3 * gamma + 2)
    s = np.zeros((f.size, f.size))
    for (nxt, m, tokens, verified), prob in transitions.items():
        z = _z_vector(gamma, m, tokens, verified)
        f_next = mean[nxt[1]] if nxt[0] == "next" else np.zeros_like(z)
        s_next = second[nxt[1]] if nxt[0] == "next" else np.zeros_like(s)
        f += prob * (z + f_next)
        s += prob * (np.outer(z, z) + np.outer(z, f_next) + np.outer(f_next, z) + s_next)
    return f, s


def test_z_matrix_rows_are_z_vectors():
    keys = [(("done", None), m, t, v) for m in range(4) for t in (m, m + 1) for v in (m, min(m + 1, 3))]
    z = _z_matrix(3, keys)
    for row, (_, m, t, v) in zip(z, keys):
        assert np.array_equal(row, _z_vector(3, m, t, v))


@pytest.mark.parametrize("gamma", [1, 3])
@pytest.mark.parametrize("params", [SamplingParams(max_tokens=3), SamplingParams(max_tokens=4, min_tokens=2)])
def test_round_moments_equal_the_definition(gamma, params):
    target = random_target(make_vocab(6), seed=4, eos_bias=-0.5)
    ctx, round_law, _ = _setup(target, draft_near(target, distance=0.4, seed=9), (0, 1), params, gamma, None, None)
    todo, transitions = [()], {}
    while todo:
        g = todo.pop()
        if g not in transitions:
            transitions[g] = round_law(g)
            todo += [k[0][1] for k in transitions[g] if k[0][0] == "next"]
    fast, slow = ({}, {}), ({}, {})
    for g in sorted(transitions, key=len, reverse=True):
        fast[0][g], fast[1][g] = round_moments(gamma, transitions[g], *fast)
        slow[0][g], slow[1][g] = _one_at_a_time(gamma, transitions[g], *slow)
    assert len(transitions) > 10
    for g in transitions:  # sums in another order: equal to rounding (moments here are O(1..30))
        np.testing.assert_allclose(fast[0][g], slow[0][g], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fast[1][g], slow[1][g], rtol=1e-12, atol=1e-12)
