"""Exact per-round law: enumeration, the deterministic uniform grid, the statistical test, and the mutants."""

from collections import defaultdict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify.errors import InvalidArgument
from specverify.kernel_checks.law import RoundCase, exact_round_law
from specverify.kernel_checks.lawcheck import check_grid_law, round_law_test
from specverify.kernel_checks.mutants import MUTANTS
from specverify.kernels import (
    STATUS_INVALID_PROBS,
    STATUS_NO_TOKEN,
    chain_rejection_sample,
    chain_rejection_sample_torch,
)

NAN = float("nan")

# one case per mutant, built so that the mutant's mechanism changes the law (or reaches an impossible outcome)
MUTANT_CASES = {
    "row_offset": RoundCase([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]], [[0.3, 0.3, 0.4]]),
    "shared_uniform": RoundCase([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.1, 0.1, 0.4, 0.4]]),
    "inclusive_accept": RoundCase([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.3, 0.3, 0.4]]),
    "zero_prob_fallback": RoundCase([[0.5, 0.5, 0, 0], [0.02, 0.39, 0.59, 0.0]], [[0.5, 0.5, 0, 0]]),
    "nan_rows_unflagged": RoundCase([[0.5, 0.5, 0.0], [0.2, NAN, 0.5]], [[0.3, 0.3, 0.4]]),
    "target_not_residual": RoundCase([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]], [[0.3, 0.3, 0.4]]),
}
MEASURE_ZERO = {"inclusive_accept", "zero_prob_fallback"}  # invisible to sampling, visible on the grid

CORRECT_CASES = {
    "generic_two_drafts": (
        RoundCase([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6], [0.25, 0.45, 0.3]], [[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]]),
        16,
        None,
    ),
    "padded_two_drafts": (
        RoundCase([[0.5, 0.5, 0.0], [0.0, 0.3, 0.7], [1.0, 0.0, 0.0]], [[0.2, 0.5, 0.3], [0.6, 0.4, 0.0]]),
        16,
        4,
    ),
    "no_drafts": (RoundCase([[0.1, 0.0, 0.9]], np.zeros((0, 3))), 64, 2),
    "one_hot_and_ties": (
        RoundCase([[0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]], [[0.25, 0.25, 0.25, 0.25]]),
        128,
        None,
    ),
    "tiny_masses": (RoundCase([[1e-12, 0.5, 0.5 - 1e-12], [0.3, 0.3, 0.4]], [[0.5, 1e-12, 0.5 - 1e-12]]), 128, None),
    "no_token_bonus": (RoundCase([[0.7, 0.3], [0.0, 0.0]], [[0.5, 0.5]]), 128, None),
    "residual_without_mass": (RoundCase([[0.3 * (1 - 1e-6), 0.7 * (1 - 1e-6)], [0.5, 0.5]], [[0.3, 0.7]]), 128, None),
    "invalid_row": (RoundCase([[0.5, 0.5], [NAN, 0.5]], [[0.5, 0.5]]), 32, None),
    "float64": (RoundCase([[0.6, 0.4], [0.2, 0.8]], [[0.9, 0.1]], dtype=torch.float64), 128, None),
}


def test_exact_law_by_hand():
    law = exact_round_law(RoundCase([[0.5, 0.5], [0.25, 0.75]], [[1.0, 0.0]])).as_dict()
    assert law == pytest.approx({((1,), 0, 0): 0.5, ((0, 0), 1, 0): 0.125, ((0, 1), 1, 0): 0.375})


def test_exact_law_of_special_cases():
    assert exact_round_law(CORRECT_CASES["invalid_row"][0]).as_dict() == {((), 0, STATUS_INVALID_PROBS): 1.0}
    law = exact_round_law(CORRECT_CASES["no_token_bonus"][0]).as_dict()
    assert law == pytest.approx({((0,), 1, STATUS_NO_TOKEN): 0.5, ((1,), 1, STATUS_NO_TOKEN): 0.3, ((0,), 0, 0): 0.2})


def test_round_case_rejects_unnormalised_draft_rows():
    with pytest.raises(InvalidArgument, match=r"draft_probs rows sum to \[0.9"):
        RoundCase([[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.4]])
    with pytest.raises(InvalidArgument, match=r"expected \[n\+1, V\] and \[n, V\]"):
        RoundCase([[0.5, 0.5]], [[0.5, 0.5]])


@st.composite
def law_cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n, vocab = draw(st.integers(0, 3)), draw(st.integers(1, 4))

    def rows(k):
        r = rng.dirichlet(np.ones(vocab), size=k) * (rng.random((k, vocab)) < 0.7)
        r[np.arange(k), rng.integers(vocab, size=k)] += 0.1
        return r / r.sum(-1, keepdims=True)

    return RoundCase(rows(n + 1), rows(n), dtype=torch.float64)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=law_cases())
def test_exact_law_commits_target_distributed_tokens(case):
    # the speculative-sampling theorem, checked on the enumeration itself: given the committed prefix and that
    # position k is emitted, the token there follows target row k
    law = exact_round_law(case).as_dict()
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    for k in range(case.num_draft_tokens + 1):
        by_prefix = defaultdict(lambda: np.zeros(case.vocab_size))
        for (tokens, _, _), prob in law.items():
            if len(tokens) > k:
                by_prefix[tokens[:k]][tokens[k]] += prob
        for counts in by_prefix.values():
            np.testing.assert_allclose(counts / counts.sum(), case.target_probs[k], atol=1e-12)


@pytest.mark.parametrize("name", sorted(CORRECT_CASES))
def test_grid_law_of_the_twin_is_exact(name):
    case, grid_size, pad_to = CORRECT_CASES[name]
    result = check_grid_law(chain_rejection_sample_torch, case, grid_size=grid_size, pad_to=pad_to)
    assert result.passed, result.summary()


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_grid_law_catches_each_mutant(name):
    case = MUTANT_CASES[name]
    assert check_grid_law(chain_rejection_sample_torch, case, grid_size=256).passed
    result = check_grid_law(MUTANTS[name], case, grid_size=256)
    assert not result.passed
    if name in MEASURE_ZERO or name == "nan_rows_unflagged":
        assert result.impossible, result.summary()  # fails outright, whatever the bound
    else:
        assert result.max_error > 2 * result.bound, result.summary()


def test_grid_law_of_the_kernel(device):
    # the kernel itself on a small grid (the twin conformance ties it to the big grids above)
    def kernel(*inputs):
        return chain_rejection_sample(*(t.to(device) for t in inputs), backend="triton")

    for name in ("inclusive_accept", "zero_prob_fallback"):
        result = check_grid_law(kernel, MUTANT_CASES[name], grid_size=16)
        assert result.passed, result.summary()


@pytest.mark.slow
def test_grid_law_of_the_kernel_with_two_drafts(device):
    def kernel(*inputs):
        return chain_rejection_sample(*(t.to(device) for t in inputs), backend="triton")

    result = check_grid_law(kernel, CORRECT_CASES["padded_two_drafts"][0], grid_size=32, pad_to=4)
    assert result.passed, result.summary()


def test_statistical_law_test_passes_the_twin():
    result = round_law_test(
        chain_rejection_sample_torch, CORRECT_CASES["generic_two_drafts"][0], num_samples=20_000, seed=1
    )
    assert result.pvalue > 1e-3 and not result.impossible, result.summary()


@pytest.mark.parametrize("name", sorted(set(MUTANTS) - MEASURE_ZERO))
def test_statistical_law_test_catches_mutants_of_positive_measure(name):
    result = round_law_test(MUTANTS[name], MUTANT_CASES[name], num_samples=20_000, seed=2)
    assert result.pvalue < 1e-6, result.summary()
