"""Kernel == twin, token for token, on hypothesis-generated inputs (boundary draws exempt, and checked separately)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from specverify.kernel_checks.conformance import (
    assert_categorical_conformance,
    assert_chain_conformance,
    chain_near_boundary,
    default_tol,
)
from specverify.kernel_checks.strategies import categorical_inputs, chain_inputs
from specverify.kernels import (
    ChainInputs,
    ChainResult,
    categorical_sample,
    chain_rejection_sample,
    chain_rejection_sample_torch,
)
from specverify.kernels.layout import compute_dtype
from specverify.sampling import residual_probs, sample_from_uniforms

DTYPES = (torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def triton_chain(*inputs):
    return chain_rejection_sample(*inputs, backend="triton")


def triton_categorical(probs, uniforms):
    return categorical_sample(probs, uniforms, backend="triton")


def final_draw_band(inputs: ChainInputs, expected: ChainResult) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rule's final token (float64 rows) at ``u * (1 - tol)`` and ``u * (1 + tol)``, and those rows [B, V]: a draw
    exempt from token equality may still only give a token between the two, of positive probability."""
    ids, n, draft_probs, target_probs, _, u_recover = (t.cpu() for t in inputs)
    tol = default_tol(target_probs.shape[2], target_probs.dtype)
    final = expected.num_accepted.long().cpu()
    rows = torch.arange(final.shape[0])
    target_row = target_probs[rows, final].double()
    draft_row = draft_probs[rows, final.clamp_max(ids.shape[1] - 1)].double()
    rejected = final < n.long().clamp(0, ids.shape[1])
    probs = torch.where(rejected[:, None], residual_probs(target_row, draft_row), target_row).nan_to_num(0.0)
    u = u_recover.to(compute_dtype(target_probs.dtype)).gather(-1, final[:, None]).squeeze(-1).double()
    return sample_from_uniforms(probs, u * (1 - tol)), sample_from_uniforms(probs, u * (1 + tol)), probs


# the interpreter runs ~20 examples a second on 2 cores: the fast suite runs 40 (categorical: 25), -m slow the full
# 100 (60), from the same seed
@pytest.mark.parametrize("max_examples", [40, pytest.param(100, marks=pytest.mark.slow)])
def test_chain_kernel_matches_twin(max_examples, device):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(data=chain_inputs(dtypes=DTYPES))
    def matches_twin(data):
        check_chain_kernel_against_twin(data, device)

    matches_twin()


def check_chain_kernel_against_twin(data, device):
    # token for token outside the exempt draws, and the exempt draws (uniform within tol of a CDF boundary) are not
    # free: the kernel's token there lies between the rule's draws at u * (1 -/+ tol) and has positive probability
    outputs = []

    def kernel(*inputs):
        outputs.append(ChainResult(*(t.cpu() for t in triton_chain(*inputs))))
        return outputs[-1]

    report = assert_chain_conformance(kernel, data.to(device))
    expected = chain_rejection_sample_torch(*data)
    rows = torch.nonzero(chain_near_boundary(data, expected)).flatten()
    assert rows.numel() == report.num_exempt
    low, high, probs = final_draw_band(data, expected)
    token = outputs[0].tokens[rows, expected.num_accepted.long()[rows]]
    inside = (token >= low[rows]) & (token <= high[rows]) & (probs[rows, token.clamp_min(0)] > 0)
    band = list(zip(low[rows][~inside].tolist(), high[rows][~inside].tolist()))
    assert bool(inside.all()), (
        f"exempt requests {rows[~inside].tolist()} drew {token[~inside].tolist()}: outside "
        f"the band (low, high) {band} or of probability 0"
    )


@pytest.mark.parametrize("max_examples", [25, pytest.param(60, marks=pytest.mark.slow)])
def test_categorical_kernel_matches_twin(max_examples, device):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(data=categorical_inputs(dtypes=DTYPES))
    def matches_twin(data):
        probs, uniforms = data
        assert_categorical_conformance(triton_categorical, probs.to(device), uniforms.to(device))

    matches_twin()


@settings(max_examples=8, **SETTINGS)
@given(data=chain_inputs(max_batch=6, max_num_draft_tokens=4, max_vocab=40, dtypes=(torch.float32,)))
def test_gpu_tiling_matches_twin(data, device, monkeypatch):
    # the GPU configuration (one request per program) with tiny chunks, so every loop runs several times
    from specverify.kernels import _triton

    monkeypatch.setattr(_triton, "_blocks", lambda batch, vocab, rows=1: (1, 16, 8))
    assert_chain_conformance(triton_chain, data.to(device))


def test_many_programs_and_long_vocabulary(device):
    # 150 requests (3 programs in the interpreter), V = 5000 > BLOCK_V: chunked scans with carried prefix sums
    g = torch.Generator().manual_seed(11)
    batch, num_draft_tokens, vocab = 150, 3, 5000
    target_probs = torch.rand(batch, num_draft_tokens + 1, vocab, generator=g) ** 4
    draft_probs = torch.rand(batch, num_draft_tokens, vocab, generator=g) ** 4
    draft_probs /= draft_probs.sum(-1, keepdim=True)
    ids = torch.multinomial(draft_probs.reshape(-1, vocab), 1, generator=g).reshape(batch, num_draft_tokens)
    n = torch.randint(0, num_draft_tokens + 1, (batch,), generator=g)
    inputs = ChainInputs(
        ids,
        n,
        draft_probs,
        target_probs / target_probs.sum(-1, keepdim=True),
        torch.rand(batch, num_draft_tokens, generator=g),
        torch.rand(batch, num_draft_tokens + 1, generator=g),
    )
    report = assert_chain_conformance(triton_chain, inputs.to(device))
    assert report.num_exempt < 0.3 * batch  # boundaries are 2e-4 apart at V = 5000: some draws sit near one
