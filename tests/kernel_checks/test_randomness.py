"""Samplers that draw their own randomness: the grid and conformance checks refuse them, round_law_test takes them."""

import numpy as np
import pytest
import torch
from scipy.stats import binom

from specverify.errors import InvalidArgument
from specverify.kernel_checks import (
    MUTANTS,
    RoundCase,
    check_categorical_conformance,
    check_chain_conformance,
    check_grid_law,
    check_kernel_law,
    grid_round_law,
    round_law_test,
)
from specverify.kernel_checks.randomness import (
    categorical_uniform_use,
    declares_own_randomness,
    drawing_own_uniforms,
    probe_inputs,
    uniform_use,
)
from specverify.kernels import categorical_sample_torch, chain_rejection_sample_torch

CASE = RoundCase([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6], [0.25, 0.45, 0.3]], [[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
INSTEAD = r"use round_law_test\(sampler, case"


def _own(sampler=chain_rejection_sample_torch, seed=0):
    return drawing_own_uniforms(sampler, generator=torch.Generator().manual_seed(seed))


def _undeclared(sampler):
    # the same sampler without the flag: only detection can tell
    return lambda *inputs: sampler(*inputs)


def _ignores_uniforms(*inputs):
    # deterministic, reads no uniform: every call sees u = 0.3
    ua, ur = inputs[4], inputs[5]
    return chain_rejection_sample_torch(*inputs[:4], torch.full_like(ua, 0.3), torch.full_like(ur, 0.3))


def _categorical_inputs():
    g = torch.Generator().manual_seed(3)
    probs = torch.rand(64, 5, generator=g)
    return probs / probs.sum(-1, keepdim=True), torch.rand(64, generator=g)


@pytest.mark.parametrize("check", [check_grid_law, grid_round_law])
def test_grid_checks_refuse_a_sampler_declaring_own_randomness(check):
    own = _own()
    assert declares_own_randomness(own)
    with pytest.raises(InvalidArgument, match=rf"consumes_uniforms=False .* {check.__name__} cannot apply.*{INSTEAD}"):
        check(own, CASE, grid_size=8)


@pytest.mark.parametrize(
    "sampler, reason",
    [
        (_undeclared(_own()), r"two calls on the same inputs differ on \d+ of 64 requests"),
        (_ignores_uniforms, r"shifting every uniform by 1/2 changed the reference's output on \d+ requests and the "),
    ],
    ids=["own_randomness", "ignores_uniforms"],
)
def test_grid_law_detects_samplers_that_do_not_consume_the_uniforms(sampler, reason):
    assert not declares_own_randomness(sampler)
    with pytest.raises(InvalidArgument, match=rf"does not consume the uniforms it is given \({reason}"):
        check_grid_law(sampler, CASE, grid_size=8)


def test_the_probe_passes_the_twin_the_kernel_and_every_mutant():
    # a consuming sampler is never refused, however broken: the mutants must still reach the grid and fail there
    inputs = probe_inputs(CASE)
    for sampler in [chain_rejection_sample_torch, *MUTANTS.values()]:
        assert uniform_use(sampler, inputs) is None, sampler
    assert not check_grid_law(MUTANTS["target_not_residual"], CASE, grid_size=16).passed


def test_chain_conformance_refuses_declared_and_detected_own_randomness():
    inputs = probe_inputs(CASE)
    with pytest.raises(InvalidArgument, match=rf"check_chain_conformance cannot apply.*{INSTEAD}"):
        check_chain_conformance(_own(), inputs)
    with pytest.raises(InvalidArgument, match=r"does not consume the uniforms .*two calls on the same inputs differ"):
        check_chain_conformance(_undeclared(_own()), inputs)
    with pytest.raises(InvalidArgument, match=r"does not consume the uniforms .*shifting every uniform"):
        check_chain_conformance(_ignores_uniforms, inputs)
    # a consuming mutant still gets its (failing) report, not a refusal
    assert not check_chain_conformance(MUTANTS["target_not_residual"], inputs).passed


def test_categorical_conformance_refuses_samplers_that_do_not_consume_the_uniforms():
    probs, uniforms = _categorical_inputs()
    g = torch.Generator().manual_seed(0)

    def own(p, u):
        return categorical_sample_torch(p, torch.rand(u.shape, generator=g))

    def ignores(p, u):
        return categorical_sample_torch(p, torch.full_like(u, 0.5))

    assert categorical_uniform_use(categorical_sample_torch, probs, uniforms) is None
    with pytest.raises(InvalidArgument, match=r"\(two calls on the same inputs differ.*check_categorical_conformance"):
        check_categorical_conformance(own, probs, uniforms)
    with pytest.raises(InvalidArgument, match=r"shifting every uniform by 1/2"):
        check_categorical_conformance(ignores, probs, uniforms)
    own.consumes_uniforms = False
    with pytest.raises(InvalidArgument, match=r"declares consumes_uniforms=False"):
        check_categorical_conformance(own, probs, uniforms)


def test_round_law_test_takes_own_randomness_and_says_how_to_reproduce():
    good = round_law_test(_own(seed=1), CASE, num_samples=20_000, seed=2)
    assert good.passed and good.pvalue > 1e-3 and good.alpha == 1e-6, good.summary()
    bad = round_law_test(_own(MUTANTS["target_not_residual"], seed=1), CASE, num_samples=20_000, seed=2)
    assert not bad.passed and bad.pvalue < 1e-6
    text = bad.summary()
    assert "worst: tokens=" in text and "Reproduce: round_law_test(drawing_own_uniforms(target_not_residual)" in text
    assert "num_samples=20000, seed=2, alpha=1e-06" in text
    assert isinstance(check_kernel_law(_own(), CASE, num_samples=2000), type(good))  # dispatches, never refuses
    with pytest.raises(InvalidArgument, match=r"alpha=0 must be a float in \(0, 1\)"):
        round_law_test(_own(), CASE, alpha=0)


def _false_alarms(levels, repeats, num_samples):  # -> counts of p <= level over independent repeats
    pvalues = np.array(
        [round_law_test(_own(seed=r), CASE, num_samples=num_samples, seed=10_000 + r).pvalue for r in range(repeats)]
    )
    return [int((pvalues <= level).sum()) for level in levels]


@pytest.mark.slow
def test_round_law_test_false_alarm_rate_on_a_correct_own_randomness_sampler():
    # calibration: a correct sampler drawing its own uniforms fails at about the stated rate, never more
    repeats, levels = 600, (0.05, 0.01)
    for level, count in zip(levels, _false_alarms(levels, repeats, num_samples=3000)):
        low, high = binom.ppf(5e-7, repeats, level), binom.isf(5e-7, repeats, level)
        assert low <= count <= high, (level, count, low, high)
