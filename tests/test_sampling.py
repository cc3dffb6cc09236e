"""The canonical pipeline against values computed by hand, the single-position rule, residuals, inverse CDF."""

import math

import numpy as np
import pytest
import torch

from specverify import InvalidArgument, SamplingParams
from specverify.grammar import ToyGrammar
from specverify.sampling import (
    Purpose,
    keyed_uniforms,
    next_token_probs,
    process_logits,
    residual_probs,
    sample_from_uniforms,
    verify_candidate,
)

LOG124 = torch.tensor([0.0, math.log(2), math.log(4)], dtype=torch.float64)  # probs 1/7, 2/7, 4/7


def law(params, logits=LOG124, prompt=(0,), generated=(), **kw):
    return next_token_probs(logits, params, prompt=prompt, generated=generated, eos_token_id=2, **kw)


def close(got, want):
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "params, want",
    [
        (SamplingParams(), [1 / 7, 2 / 7, 4 / 7]),
        (SamplingParams(temperature=0.5), [1 / 21, 4 / 21, 16 / 21]),
        (SamplingParams(temperature=0), [0, 0, 1]),
        (SamplingParams(top_k=2), [0, 1 / 3, 2 / 3]),
        (SamplingParams(top_p=0.5), [0, 0, 1]),  # 4/7 >= 0.5 alone
        (SamplingParams(top_p=0.6), [0, 1 / 3, 2 / 3]),  # 4/7 < 0.6 <= 6/7
        (SamplingParams(min_p=0.3), [0, 1 / 3, 2 / 3]),  # floor 0.3 * 4/7 = 0.171 > 1/7
        (SamplingParams(bad_token_ids=(2,)), [1 / 3, 2 / 3, 0]),
        (SamplingParams(min_tokens=1), [1 / 3, 2 / 3, 0]),  # EOS (id 2) masked before the first token
        (SamplingParams(min_tokens=1, ignore_eos=True), [1 / 7, 2 / 7, 4 / 7]),
    ],
)
def test_processors_match_hand_values(params, want):
    close(law(params), want)


def test_min_tokens_lifts_once_enough_tokens_exist():
    close(law(SamplingParams(min_tokens=1, max_tokens=3), generated=(0,)), [1 / 7, 2 / 7, 4 / 7])


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    # token 2 seen in the prompt: ln4 / 2 = ln2 -> weights 1, 2, 2
    close(law(SamplingParams(repetition_penalty=2.0), prompt=(2,)), [1 / 5, 2 / 5, 2 / 5])
    neg = torch.tensor([0.0, -math.log(2), 0.0], dtype=torch.float64)  # weights 1, 1/2, 1
    # token 1 seen: -ln2 * 2 = -ln4 -> weights 1, 1/4, 1
    close(law(SamplingParams(repetition_penalty=2.0), logits=neg, prompt=(1,)), [4 / 9, 1 / 9, 4 / 9])


def test_frequency_and_presence_penalties_count_generated_tokens_only():
    # token 2 generated twice: frequency ln2/2 * 2 = ln2 off its logit -> weights 1, 2, 2
    close(law(SamplingParams(frequency_penalty=math.log(2) / 2, max_tokens=5), generated=(2, 2)), [0.2, 0.4, 0.4])
    close(law(SamplingParams(presence_penalty=math.log(2), max_tokens=5), generated=(2, 2)), [0.2, 0.4, 0.4])
    # the prompt does not count
    close(law(SamplingParams(presence_penalty=math.log(2)), prompt=(2,)), [1 / 7, 2 / 7, 4 / 7])


def test_greedy_ties_go_to_the_lowest_index():
    close(law(SamplingParams(temperature=0), logits=torch.tensor([1.0, 1.0, 0.0])), [1, 0, 0])


def test_top_k_and_top_p_break_ties_by_lower_index():
    flat = torch.zeros(4, dtype=torch.float64)
    got = next_token_probs(flat, SamplingParams(top_k=2), prompt=(0,), generated=())
    close(got, [0.5, 0.5, 0, 0])
    got = next_token_probs(flat, SamplingParams(top_p=0.5), prompt=(0,), generated=())
    close(got, [0.5, 0.5, 0, 0])


def test_all_masked_is_reported_as_zeros_never_nan():
    params = SamplingParams(bad_token_ids=(0, 1, 2))
    close(law(params), [0, 0, 0])
    close(law(SamplingParams(bad_token_ids=(0, 1, 2), temperature=0)), [0, 0, 0])


def test_grammar_mask_allows_eos_only_in_accepting_states():
    g = ToyGrammar(transitions=({1: 1}, {0: 0}), accepting={1})
    close(law(SamplingParams(grammar=g)), [0, 1, 0])  # state 0: only token 1, not accepting
    close(law(SamplingParams(grammar=g, max_tokens=3), generated=(1,)), [1 / 5, 0, 4 / 5])  # state 1: token 0, EOS


def test_nan_and_plus_inf_logits_are_invalid():
    with pytest.raises(InvalidArgument, match="NaN or \\+inf"):
        law(SamplingParams(), logits=torch.tensor([0.0, float("nan"), 0.0]))
    with pytest.raises(InvalidArgument, match="NaN or \\+inf"):
        process_logits(torch.tensor([[0.0, float("inf")]]), SamplingParams())


def test_out_of_vocab_history_is_invalid():
    with pytest.raises(InvalidArgument, match="prompt \\+ generated"):
        law(SamplingParams(), prompt=(7,))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(temperature=-1), "temperature=-1"),
        (dict(top_k=-2), "top_k=-2"),
        (dict(top_p=0), "top_p=0"),
        (dict(min_p=1.5), "min_p=1.5"),
        (dict(repetition_penalty=0), "repetition_penalty=0"),
        (dict(frequency_penalty=float("nan")), "frequency_penalty=nan"),
        (dict(max_tokens=0), "max_tokens=0"),
        (dict(min_tokens=3, max_tokens=2), "min_tokens=3 exceeds max_tokens=2"),
        (dict(stop=("",)), "stop="),
        (dict(bad_token_ids=(-1,)), "bad_token_ids="),
        (dict(grammar=object()), "grammar="),
        (dict(ignore_eos=True, grammar=ToyGrammar(transitions=({},))), "ignore_eos=True"),
    ],
)
def test_sampling_params_reject_bad_values(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        SamplingParams(**kwargs)


def test_sampling_params_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        SamplingParams(1.0)
    with pytest.raises(Exception):
        SamplingParams().temperature = 2.0


# ----------------------------------------------------------------------------------- the single-position rule

TARGET, DRAFT = torch.tensor([0.8, 0.2]), torch.tensor([0.2, 0.8])


def test_rejection_returns_the_normalised_positive_residual():
    accepted, residual = verify_candidate(TARGET, DRAFT, 1, 0.9)  # accept prob 0.2 / 0.8 = 0.25 < 0.9
    assert not accepted
    torch.testing.assert_close(residual, torch.tensor([1.0, 0.0]))
    assert verify_candidate(TARGET, DRAFT, 1, 0.2) == (True, None)


def test_identical_laws_accept_every_legal_draft_even_at_the_top_uniform():
    assert verify_candidate(TARGET, TARGET, 0, 0.999)[0]


def test_a_draft_the_target_forbids_is_rejected_at_u_zero():
    accepted, residual = verify_candidate(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0]), 0, 0.0)
    assert not accepted and residual.tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "args",
    [
        (TARGET, DRAFT, -1, 0.5),
        (TARGET, TARGET[:, None], 0, 0.5),
        (TARGET, DRAFT, 0, 1.0),
        (TARGET, torch.tensor([1.0, 0.0]), 1, 0.5),
        (torch.tensor([0.9, 0.2]), DRAFT, 0, 0.5),
        (torch.tensor([-0.2, 1.2]), DRAFT, 0, 0.5),
        (torch.tensor([]), torch.tensor([]), 0, 0.5),
    ],
)
def test_verify_candidate_rejects_invalid_input(args):
    with pytest.raises(ValueError):
        verify_candidate(*args)


def test_verify_candidate_raises_on_rejection_without_residual_mass():
    # rows normalised within the 1e-6 tolerance, target <= draft everywhere: a rejection has nothing to recover
    target = torch.tensor([0.4999999, 0.5], dtype=torch.float64)
    draft = torch.tensor([0.5, 0.5], dtype=torch.float64)
    with pytest.raises(ValueError, match="no residual mass"):
        verify_candidate(target, draft, 0, 0.9999999)


def test_residual_probs_falls_back_to_the_target_row_without_mass():
    target = torch.tensor([[0.3, 0.7], [0.6, 0.4]], dtype=torch.float64)
    draft = torch.tensor([[0.3, 0.7], [0.2, 0.8]], dtype=torch.float64)
    close(residual_probs(target, draft), [[0.3, 0.7], [1.0, 0.0]])


def test_inverse_cdf_never_returns_a_zero_probability_index():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]], dtype=torch.float64).expand(5, -1)
    u = torch.tensor([0.0, 0.4999, 0.5, 0.75, 1 - 2**-53], dtype=torch.float64)
    assert sample_from_uniforms(probs, u).tolist() == [1, 1, 3, 3, 3]
    short = torch.tensor([[0.3, 0.3, 0.0]], dtype=torch.float64)  # rows need not be normalised
    assert sample_from_uniforms(short, torch.tensor([1 - 2**-53])).tolist() == [1]
    assert sample_from_uniforms(torch.zeros(1, 3), torch.tensor([0.5])).tolist() == [-1]


def test_keyed_uniforms_depend_on_key_not_batch_position():
    a = keyed_uniforms(np.array([1, 2, 3]), np.array([0, 0, 0]), Purpose.DRAFT)
    b = keyed_uniforms(np.array([3, 2]), np.array([0, 0]), Purpose.DRAFT)
    assert a[2] == b[0] and a[1] == b[1]
    assert keyed_uniforms(1, 0, Purpose.DRAFT) != keyed_uniforms(1, 0, Purpose.ACCEPT)
    assert keyed_uniforms(1, 0, Purpose.DRAFT) != keyed_uniforms(1, 1, Purpose.DRAFT)


def test_keyed_uniforms_are_uniform():
    import scipy.stats

    u = keyed_uniforms(np.arange(200_000) // 7, np.arange(200_000) % 7, Purpose.TARGET)
    assert u.min() >= 0 and u.max() < 1
    assert scipy.stats.kstest(u, "uniform").pvalue > 1e-7
