"""Adapters for vLLM- and FlashInfer-style kernel signatures: exact layout round trips, and the law test."""

import pytest
import torch

from specverify.kernel_checks.adapters import as_flashinfer_style, check_kernel_law, from_flashinfer_style
from specverify.kernel_checks.law import RoundCase
from specverify.kernel_checks.lawcheck import GridLawResult, RoundLawTestResult
from specverify.kernel_checks.mutants import MUTANTS
from specverify.kernel_checks.vllm_sampler import as_vllm_style, from_vllm_style
from specverify.kernels import chain_rejection_sample, chain_rejection_sample_torch
from specverify.kernels.layout import ChainInputs

CASE = RoundCase([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.1, 0.1, 0.4, 0.4]])
CASE2 = RoundCase([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6], [0.25, 0.45, 0.3]], [[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])


def _batch(lengths, num_draft_tokens=3, vocab=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    batch = len(lengths)
    draft = torch.rand(batch, num_draft_tokens, vocab, generator=g)
    draft /= draft.sum(-1, keepdim=True)
    target = torch.rand(batch, num_draft_tokens + 1, vocab, generator=g)
    target /= target.sum(-1, keepdim=True)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(batch, num_draft_tokens)
    return ids, torch.tensor(lengths), draft, target


def _generator_uniforms(seed, batch, num_draft_tokens):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, num_draft_tokens, generator=g), torch.rand(batch, num_draft_tokens + 1, generator=g)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_vllm_style_round_trip_is_exact(backend, device):
    # ragged lengths including 0: flattening, cu_num_draft_tokens and the outside bonus draw lose nothing
    def sampler(*inputs):
        return chain_rejection_sample(*(t.to(device) for t in inputs), backend=backend)

    ids, n, draft, target = _batch([3, 0, 2, 1, 3, 2])
    u_accept, u_recover = _generator_uniforms(7, 6, 3)
    adapted = from_vllm_style(as_vllm_style(sampler, generator=torch.Generator().manual_seed(7)))
    got = adapted(ids, n, draft, target, torch.zeros_like(u_accept), u_recover)
    want = chain_rejection_sample_torch(ids, n, draft, target, u_accept, u_recover)
    assert torch.equal(got.tokens.cpu(), want.tokens) and torch.equal(got.num_accepted.cpu(), want.num_accepted)
    assert not adapted.consumes_uniforms


def test_flashinfer_style_round_trip_is_exact():
    ids, n, draft, target = _batch([2, 2, 2, 2])
    u_accept, u_recover = _generator_uniforms(9, 4, 3)
    kernel = as_flashinfer_style(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(9))
    got = from_flashinfer_style(kernel)(ids, n, draft, target, u_accept, u_recover)
    u_accept2, u_recover2 = _generator_uniforms(9, 4, 2)  # one call with n = 2: [4, 2] and [4, 3] draws
    inputs = ChainInputs(ids[:, :2], n, draft[:, :2], target[:, :3], u_accept2, u_recover2)
    want = chain_rejection_sample_torch(*inputs)
    assert torch.equal(got.tokens[:, :3], want.tokens) and torch.equal(got.num_accepted, want.num_accepted)


def test_flashinfer_style_accepts_tuple_returns_and_ragged_batches():
    base = as_flashinfer_style(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(1))
    adapted = from_flashinfer_style(lambda *args: (base(*args), None, None))
    ids, n, draft, target = _batch([3, 0, 1, 3])
    out = adapted(ids, n, draft, target, torch.rand(4, 3), torch.rand(4, 4))
    emitted = (out.tokens != -1).sum(-1)
    assert torch.equal(emitted, out.num_accepted.long() + 1) and bool((out.num_accepted.long() <= n).all())


def test_check_kernel_law_dispatches_on_consumes_uniforms():
    assert isinstance(check_kernel_law(chain_rejection_sample_torch, CASE, grid_size=32), GridLawResult)
    adapted = from_flashinfer_style(
        as_flashinfer_style(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(0))
    )
    result = check_kernel_law(adapted, CASE2, num_samples=20_000, seed=4)
    assert isinstance(result, RoundLawTestResult) and result.pvalue > 1e-3, result.summary()


@pytest.mark.parametrize(
    "style, mutant", [("flashinfer", "shared_uniform"), ("vllm", "target_not_residual"), ("flashinfer", "row_offset")]
)
def test_self_randomising_kernels_with_bugs_fail_the_statistical_law_test(style, mutant):
    wrap, unwrap = (
        (as_flashinfer_style, from_flashinfer_style) if style == "flashinfer" else (as_vllm_style, from_vllm_style)
    )
    adapted = unwrap(wrap(MUTANTS[mutant], generator=torch.Generator().manual_seed(0)))
    result = check_kernel_law(adapted, CASE, num_samples=20_000, seed=5)
    assert result.pvalue < 1e-6, result.summary()
