"""The assertion helpers of specverify.testing: they pass on the reference and fail readably on known bugs."""

import pytest
import torch

import specverify as sv
from specverify.errors import InvalidArgument
from specverify.testing import (
    assert_exact,
    assert_greedy_equal,
    assert_kernel_conforms,
    assert_transactional,
    explain,
    model_pair,
)

REFERENCE = "specverify.reference:make_decoder"


def _certify(factory, scenarios):
    return sv.certify(factory, level="quick", scenarios=scenarios, isolation="none")


def test_assert_exact_passes_the_reference_and_explains_a_known_bug():
    cert = _certify(REFERENCE, ["temperature-1"])
    assert assert_exact(cert, allow_inconclusive=True) is cert
    with pytest.raises(AssertionError, match="is INCONCLUSIVE, required exact") as info:
        assert_exact(cert)  # one scenario: inconclusive never passes unless allowed
    assert "reason: core scenarios not covered" in str(info.value)
    bad = _certify("specverify.zoo:bonus_from_draft", ["temperature-1"])
    with pytest.raises(AssertionError) as info:
        assert_exact(bad, allow_inconclusive=True)  # a rejection is never excused
    text = str(info.value)
    for needed in (
        "specverify: specverify.zoo:bonus_from_draft is INCONCLUSIVE, required exact",
        "✗ temperature-1 (first-position, middle and full acceptance; residual; bonus)",
        "planned; p-value",
        "note: sequential: reject at look ",
        "an exact decoder shows <= ",
        "worst outcomes (observed vs expected under the exact law",
        "known bug: bonus_from_draft —",
        "Reproduce: specverify certify specverify.zoo:bonus_from_draft --level quick --isolation none "
        "--sequential --scenario temperature-1 --seed 0",
    ):
        assert needed in text, (needed, text)
    assert "Certificate(" not in text and text == explain(bad)


def test_assert_greedy_equal_shows_the_mismatching_prompts():
    assert_greedy_equal(_certify(REFERENCE, ["greedy-grammar"]))
    with pytest.raises(AssertionError) as info:
        assert_greedy_equal(_certify("specverify.zoo:grammar_not_in_verify", ["greedy-grammar"]))
    text = str(info.value)
    assert "greedy output differs from the target's greedy output" in text
    assert "greedy target gives" in text
    assert "Reproduce: specverify certify specverify.zoo:grammar_not_in_verify" in text
    with pytest.raises(AssertionError, match="no greedy scenario covered"):
        assert_greedy_equal(_certify(REFERENCE, ["gamma-1"]))
    with pytest.raises(InvalidArgument, match="a Certificate is checked as it is"):
        assert_exact(_certify(REFERENCE, ["gamma-1"]), level="quick")


def test_assert_kernel_conforms_on_the_twin_and_its_mutants():
    from specverify.kernel_checks import MUTANTS, as_vllm_style
    from specverify.kernels import chain_rejection_sample_torch

    assert assert_kernel_conforms(chain_rejection_sample_torch) == 3
    with pytest.raises(AssertionError) as info:
        assert_kernel_conforms(MUTANTS["inclusive_accept"])  # invisible to sampling: only the grid sees it
    assert "✗ zero_target_draft (γ = 1, V = 3): grid law DOES NOT match the exact law" in str(info.value)
    assert "impossible outcome reached" in str(info.value) and "Reproduce: assert_kernel_conforms(" in str(info.value)
    engine_style = as_vllm_style(MUTANTS["target_not_residual"], generator=torch.Generator().manual_seed(1))
    with pytest.raises(AssertionError, match=r"\(vllm signature\)[\s\S]*per-round law test: N=20000"):
        assert_kernel_conforms(engine_style, style="vllm")
    with pytest.raises(InvalidArgument, match="style='triton' must be one of"):
        assert_kernel_conforms(chain_rejection_sample_torch, style="triton")


def test_assert_transactional_on_the_reference_and_a_mutant():
    from specverify.fuzz.whitebox import mutants

    assert assert_transactional(max_examples=4) == 4
    with pytest.raises(AssertionError) as info:
        assert_transactional(mutants.StallsOnce, max_examples=50, shrink=False)
    text = str(info.value)
    assert "StallsOnce breaks the state-transaction property 'progress'" in text
    assert "schedule:" in text and "Reproduce: assert_transactional(StallsOnce, seed=0, max_examples=50" in text


def test_model_pairs_of_both_families():
    toy = model_pair("toy", 0.0)
    assert toy.vocab.size == 4 and toy.draft.vocab == toy.target.vocab
    with pytest.raises(InvalidArgument, match="are not ToyPairSpec fields"):
        model_pair("toy", draft_sigma=0.1)
    with pytest.raises(InvalidArgument, match="pair='nope' must be one of"):
        model_pair("checkpoint", pair="nope")


@pytest.mark.slow
def test_checkpoint_pairs_through_the_fixture(run_suite):
    source = """
import pytest

@pytest.mark.parametrize("specverify_pair", [{"family": "checkpoint", "distance": 0.05}, "checkpoint"], indirect=True)
def test_pair(specverify_pair):
    assert type(specverify_pair.target).__name__ == "CheckpointModel" and specverify_pair.vocab.size == 6
    assert specverify_pair.spec.draft_sigma in (0.05,)
"""
    run_suite(source).assert_outcomes(passed=2)
