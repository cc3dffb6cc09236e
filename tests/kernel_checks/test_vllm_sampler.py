"""The adapters around vLLM's real rejection-sampler signatures, driven by fakes of those signatures (no vLLM here;
tests/adapters/vllm/test_kernels_engine.py runs the real one)."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from specverify.errors import InvalidArgument
from specverify.kernel_checks import MUTANTS, RoundCase, as_vllm_style, check_grid_law, exact_round_law, round_law_test
from specverify.kernel_checks.vllm_sampler import (
    from_vllm_rejection_sample,
    from_vllm_rejection_sampler,
    truncated_case,
)
from specverify.kernel_checks.vllm_types import STAND_IN_TYPES, vllm_sampling_metadata, vllm_spec_decode_metadata
from specverify.kernels import chain_rejection_sample_torch

CASE = RoundCase([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6], [0.25, 0.45, 0.3]], [[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
NO_DRAFTS = RoundCase([[0.2, 0.5, 0.3]], np.zeros((0, 3)))


def _expand(values, cu_num_tokens, num_tokens):  # [B] -> [N], each request's value on its rows (what vLLM means)
    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    return values.repeat_interleave(counts)


def _garbage(values, cu_num_tokens, num_tokens):  # finding 1's shape: the expanded rows never written
    return torch.full((num_tokens,), 4.6e-41, dtype=values.dtype)


class FakeRejectionSampler:
    """``RejectionSampler.forward``'s signature and steps (temperature only): the bonus token from the bonus rows at
    the request's temperature, the draft rows through ``expand``, then a ``rejection_sample``-style function."""

    def __init__(self, expand=_expand, chain=chain_rejection_sample_torch, seed=0):
        self.expand, self.generator = expand, torch.Generator().manual_seed(seed)
        self.rejection_sample = as_vllm_style(chain, generator=self.generator)

    def forward(self, metadata, draft_probs, logits, sampling_metadata):
        temperature = sampling_metadata.temperature
        bonus_probs = (logits[metadata.bonus_logits_indices.long()] / temperature[:, None]).softmax(-1)
        bonus = torch.multinomial(bonus_probs, 1, generator=self.generator)
        target_logits = logits[metadata.target_logits_indices.long()]
        expanded = self.expand(temperature, metadata.cu_num_draft_tokens, target_logits.shape[0])
        output = self.rejection_sample(
            metadata.draft_token_ids,
            metadata.num_draft_tokens,
            metadata.max_spec_len,
            metadata.cu_num_draft_tokens,
            draft_probs,
            target_logits / expanded[:, None],
            bonus,
            sampling_metadata,
        )
        return SimpleNamespace(sampled_token_ids=output)


def test_spec_decode_metadata_lays_out_drafts_then_bonus_per_request():
    meta = vllm_spec_decode_metadata(torch.tensor([7, 8, 9, 5]), torch.tensor([2, 0, 1, 1]), types=STAND_IN_TYPES)
    assert meta.num_draft_tokens == [2, 0, 1, 1] and meta.max_spec_len == 2
    assert meta.cu_num_draft_tokens.tolist() == [2, 2, 3, 4] and meta.cu_num_sampled_tokens.tolist() == [3, 4, 6, 8]
    assert meta.target_logits_indices.tolist() == [0, 1, 4, 6] and meta.bonus_logits_indices.tolist() == [2, 3, 5, 7]
    assert meta.draft_token_ids.dtype == torch.int32 and meta.logits_indices.tolist() == list(range(8))


def test_sampling_metadata_uses_vllm_dtypes():
    meta = vllm_sampling_metadata(3, temperature=0.5, top_k=2, top_p=0.9, types=STAND_IN_TYPES)
    assert meta.temperature.dtype == torch.float32 and meta.top_p.dtype == torch.float32
    assert meta.top_k.dtype == torch.int32 and meta.top_k.tolist() == [2, 2, 2]
    assert meta.all_random and not meta.all_greedy and meta.generators == {} and meta.no_penalties


@pytest.mark.parametrize("case", [CASE, NO_DRAFTS], ids=["two_drafts", "no_drafts"])
def test_rejection_sample_adapter_passes_a_correct_fake(case):
    adapted = from_vllm_rejection_sample(as_vllm_style(chain_rejection_sample_torch, generator=torch.Generator()))
    result = round_law_test(adapted, case, num_samples=20_000, seed=3)
    assert result.passed and result.pvalue > 1e-3, result.summary()


def test_rejection_sample_adapter_rejects_a_broken_fake_and_refuses_the_grid():
    broken = as_vllm_style(MUTANTS["target_not_residual"], generator=torch.Generator().manual_seed(1))
    adapted = from_vllm_rejection_sample(broken)
    assert not round_law_test(adapted, CASE, num_samples=20_000, seed=3).passed
    with pytest.raises(InvalidArgument, match="declares consumes_uniforms=False"):
        check_grid_law(adapted, CASE)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_forward_adapter_passes_a_correct_fake_at_any_temperature(temperature):
    # logits are temperature * log p: after the engine divides by the temperature the law is the case's
    adapted = from_vllm_rejection_sampler(FakeRejectionSampler(), temperature=temperature, types=STAND_IN_TYPES)
    result = round_law_test(adapted, CASE, num_samples=20_000, seed=4)
    assert result.passed and result.pvalue > 1e-3, result.summary()


def test_forward_adapter_sees_an_expanded_temperature_left_unwritten():
    # the mechanism of docs/findings/vllm.md finding 1, in a fake: the check must reject it
    adapted = from_vllm_rejection_sampler(FakeRejectionSampler(expand=_garbage), types=STAND_IN_TYPES)
    result = round_law_test(adapted, CASE, num_samples=20_000, seed=4)
    assert not result.passed and result.pvalue < 1e-12, result.summary()


def test_a_fresh_adapter_with_the_same_seed_repeats_the_test():
    def run(seed):
        adapted = from_vllm_rejection_sample(lambda *args: _torch_draws(*args), seed=seed)
        return round_law_test(adapted, CASE, num_samples=3000, seed=1).counts

    assert run(5) == run(5) and run(5) != run(6)


def _torch_draws(draft_token_ids, num_draft_tokens, max_spec_len, cu, draft_probs, target_logits, bonus, metadata):
    # a stand-in drawing from torch's global generator, as vLLM does when no request has a seed
    generator = torch.Generator().manual_seed(int(torch.randint(0, 2**62, ())))
    fake = as_vllm_style(chain_rejection_sample_torch, generator=generator)
    return fake(draft_token_ids, num_draft_tokens, max_spec_len, cu, draft_probs, target_logits, bonus, metadata)


def test_truncated_case_follows_vllms_top_k_and_top_p_rules():
    case = RoundCase([[0.4, 0.3, 0.3, 0.0], [0.1, 0.2, 0.3, 0.4]], [[0.25, 0.25, 0.25, 0.25]])
    top_k = truncated_case(case, top_k=2).target_probs
    np.testing.assert_allclose(top_k[0], [0.4, 0.3, 0.3, 0.0], rtol=1e-6)  # ties at the k-th value are kept
    np.testing.assert_allclose(top_k[1], [0.0, 0.0, 3 / 7, 4 / 7], rtol=1e-6)
    assert exact_round_law(truncated_case(case, top_k=4)).as_dict() == pytest.approx(exact_round_law(case).as_dict())
    other = RoundCase([[0.1, 0.2, 0.3, 0.4], [0.05, 0.15, 0.3, 0.5]], [[0.25, 0.25, 0.25, 0.25]])
    top_p = truncated_case(other, top_p=0.65).target_probs  # drops the tokens of cumulative mass <= 0.35
    np.testing.assert_allclose(top_p, [[0.0, 0.0, 3 / 7, 4 / 7], [0.0, 0.0, 0.375, 0.625]], rtol=1e-6)
    with pytest.raises(InvalidArgument, match=r"top_p=0.7 lies within 1e-06 of a cumulative mass"):
        truncated_case(other, top_p=0.7)
    with pytest.raises(InvalidArgument, match=r"top_p=0.65 splits tied probabilities"):
        truncated_case(case, top_p=0.65)  # 0.3 and 0.3 straddle the cut in row 0


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: from_vllm_rejection_sample(3), "fn=3 is not callable"),
        (lambda: from_vllm_rejection_sample(seed=-1), "seed=-1 must be an int >= 0"),
        (lambda: from_vllm_rejection_sampler(object()), "has no callable forward"),
        (lambda: from_vllm_rejection_sampler(FakeRejectionSampler(), temperature=0), "temperature=0 must be"),
        (lambda: from_vllm_rejection_sampler(FakeRejectionSampler(), top_k=0), "top_k=0 must be None or an int"),
        (lambda: from_vllm_rejection_sampler(FakeRejectionSampler(), top_p=1.5), "top_p=1.5 must be None"),
        (lambda: vllm_sampling_metadata(2, types=(1, 2, 3)), r"types=\(1, 2, 3\) must be a VllmTypes"),
    ],
)
def test_bad_arguments_raise_invalid_argument(call, words):
    with pytest.raises(InvalidArgument, match=words):
        call()


def test_target_rows_that_are_not_laws_have_no_logits_and_are_refused():
    adapted = from_vllm_rejection_sample(as_vllm_style(chain_rejection_sample_torch, generator=torch.Generator()))
    half = RoundCase([[0.5, 0.5], [0.25, 0.25]], [[0.5, 0.5]])
    with pytest.raises(InvalidArgument, match=r"target rows sum to \[0.5, 1\].*vLLM's rejection sampler takes logits"):
        round_law_test(adapted, half, num_samples=10, seed=0)


def _acceptance_kernel(*, inclusive):
    # _rejection_random_sample's signature and steps, one request at a time; `inclusive` is vLLM's `>=` (:884)
    def kernel(output, cu, ids, draft, target, bonus, recovered, uniform, is_greedy, max_spec_len, rates):
        start = 0
        for r, end in enumerate(cu.tolist()):
            for k, i in enumerate(range(start, end)):
                x = int(ids[i])
                ratio = float(target[i, x]) / float(draft[i, x]) if float(draft[i, x]) > 0 else -1.0
                if ratio >= float(uniform[i]) if inclusive else ratio > float(uniform[i]):
                    output[r, k] = x
                    continue
                output[r, k] = recovered[i]
                break
            else:
                output[r, end - start] = bonus[r, 0]
            start = end

    return kernel


def test_acceptance_adapter_drives_the_kernel_with_the_given_uniforms():
    from specverify.kernel_checks.vllm_acceptance import from_vllm_acceptance

    case = RoundCase([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.3, 0.3, 0.4]])  # draft 2 has target probability 0
    assert check_grid_law(from_vllm_acceptance(_acceptance_kernel(inclusive=False)), case, grid_size=16).passed
    result = check_grid_law(from_vllm_acceptance(_acceptance_kernel(inclusive=True)), case, grid_size=16)
    assert not result.passed and ((2, 0), 1, 0) in result.impossible, result.summary()
    with pytest.raises(InvalidArgument, match="kernel=3 is not callable"):
        from_vllm_acceptance(3)
