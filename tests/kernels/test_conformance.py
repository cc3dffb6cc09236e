"""Kernel == twin == rule, token for token, on hypothesis-generated inputs (boundary draws exempt for the kernel)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from specverify.kernels import categorical_sample, chain_rejection_sample, chain_rejection_sample_torch
from specverify.kernels.conformance import (assert_categorical_conformance, assert_chain_conformance,
                                            chain_rule_reference, check_chain_conformance)
from specverify.kernels.layout import ChainInputs
from specverify.kernels.mutants import MUTANTS
from specverify.kernels.strategies import categorical_inputs, chain_inputs

DTYPES = (torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def triton_chain(*inputs):
    return chain_rejection_sample(*inputs, backend="triton")


def triton_categorical(probs, uniforms):
    return categorical_sample(probs, uniforms, backend="triton")


@settings(max_examples=100, **SETTINGS)
@given(data=chain_inputs(dtypes=DTYPES))
def test_chain_kernel_matches_twin(data, device):
    report = assert_chain_conformance(triton_chain, data.to(device))
    assert report.num_exempt <= report.num_requests


@settings(max_examples=150, **SETTINGS)
@given(data=chain_inputs(dtypes=DTYPES))
def test_twin_matches_rule_exactly(data):
    # same sampling functions, batched vs one request at a time: no exemption at all
    assert_chain_conformance(chain_rejection_sample_torch, data, reference=chain_rule_reference, tol=0.0)


@settings(max_examples=60, **SETTINGS)
@given(data=categorical_inputs(dtypes=DTYPES))
def test_categorical_kernel_matches_twin(data, device):
    probs, uniforms = data
    assert_categorical_conformance(triton_categorical, probs.to(device), uniforms.to(device))


@settings(max_examples=8, **SETTINGS)
@given(data=chain_inputs(max_batch=6, max_gamma=4, max_vocab=40, dtypes=(torch.float32,)))
def test_gpu_tiling_matches_twin(data, device, monkeypatch):
    # the GPU configuration (one request per program) with tiny chunks, so every loop runs several times
    from specverify.kernels import _triton
    monkeypatch.setattr(_triton, "_blocks", lambda batch, vocab, rows=1: (1, 16, 8))
    assert_chain_conformance(triton_chain, data.to(device))


def test_many_programs_and_long_vocabulary(device):
    # 150 requests (3 programs in the interpreter), V = 5000 > BLOCK_V: chunked scans with carried prefix sums
    g = torch.Generator().manual_seed(11)
    batch, gamma, vocab = 150, 3, 5000
    target = torch.rand(batch, gamma + 1, vocab, generator=g) ** 4
    draft = torch.rand(batch, gamma, vocab, generator=g) ** 4
    draft /= draft.sum(-1, keepdim=True)
    ids = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(batch, gamma)
    n = torch.randint(0, gamma + 1, (batch,), generator=g)
    inputs = ChainInputs(ids, n, draft, target / target.sum(-1, keepdim=True), torch.rand(batch, gamma, generator=g),
                         torch.rand(batch, gamma + 1, generator=g))
    report = assert_chain_conformance(triton_chain, inputs.to(device))
    assert report.num_exempt < 0.3 * batch  # boundaries are 2e-4 apart at V = 5000: some draws sit near one


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_token_conformance_flags_broken_twins(name):
    # the exact comparison itself catches every mutant on a fixed batch that exercises its corner
    g = torch.Generator().manual_seed(5)
    batch, gamma, vocab = 64, 2, 4
    target = torch.rand(batch, gamma + 1, vocab, generator=g)
    target[:, :, 3] = 0.0  # a zero-probability last token (fallback bug) and zero-target drafts (inclusive bug)
    target /= target.sum(-1, keepdim=True)
    draft = torch.full((batch, gamma, vocab), 0.25)
    ids = torch.randint(0, vocab, (batch, gamma), generator=g)
    ua = torch.rand(batch, gamma, generator=g)
    ua[::4] = 0.0
    ur = torch.rand(batch, gamma + 1, generator=g)
    ur[1::4] = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0))
    target[::16, 0, 1] = float("nan")
    n = torch.full((batch,), gamma)
    n[1::8] = 0  # bonus drawn at u -> 1 from a row whose float32 CDF ends below that u (fallback bug)
    target[1::8, 0] = torch.tensor([0.02, 0.39, 0.59, 0.0])
    inputs = ChainInputs(ids, n, draft, target, ua, ur)
    assert not check_chain_conformance(MUTANTS[name], inputs).passed
