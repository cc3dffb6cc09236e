"""The token-for-token conformance check itself: twin == rule exactly, and every broken twin is flagged."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from specverify.errors import InvalidArgument
from specverify.kernel_checks.conformance import assert_chain_conformance, chain_rule_reference, check_chain_conformance
from specverify.kernel_checks.mutants import MUTANTS
from specverify.kernel_checks.strategies import chain_inputs
from specverify.kernels import ChainInputs, chain_rejection_sample_torch

DTYPES = (torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@settings(max_examples=150, **SETTINGS)
@given(data=chain_inputs(dtypes=DTYPES))
def test_twin_matches_rule_exactly(data):
    # same sampling functions, batched vs one request at a time: no exemption at all
    assert_chain_conformance(chain_rejection_sample_torch, data, reference=chain_rule_reference, tol=0.0)


def _mutant_batch() -> ChainInputs:
    # a fixed batch that exercises every mutant's corner
    g = torch.Generator().manual_seed(5)
    batch, num_draft_tokens, vocab = 64, 2, 4
    target_probs = torch.rand(batch, num_draft_tokens + 1, vocab, generator=g)
    target_probs[:, :, 3] = 0.0  # a zero-probability last token (fallback bug) and zero-target drafts (inclusive bug)
    target_probs /= target_probs.sum(-1, keepdim=True)
    draft_probs = torch.full((batch, num_draft_tokens, vocab), 0.25)
    ids = torch.randint(0, vocab, (batch, num_draft_tokens), generator=g)
    ua = torch.rand(batch, num_draft_tokens, generator=g)
    ua[::4] = 0.0
    ur = torch.rand(batch, num_draft_tokens + 1, generator=g)
    ur[1::4] = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0))
    target_probs[::16, 0, 1] = float("nan")
    n = torch.full((batch,), num_draft_tokens)
    n[1::8] = 0  # bonus drawn at u -> 1 from a row whose float32 CDF ends below that u (fallback bug)
    target_probs[1::8, 0] = torch.tensor([0.02, 0.39, 0.59, 0.0])
    return ChainInputs(ids, n, draft_probs, target_probs, ua, ur)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_token_conformance_flags_broken_twins(name):
    # the exact comparison itself catches every mutant on a fixed batch that exercises its corner
    inputs = _mutant_batch()
    report = check_chain_conformance(MUTANTS[name], inputs)
    assert not report.passed and "!=" in report.summary()
    with pytest.raises(AssertionError, match="mismatching"):
        assert_chain_conformance(MUTANTS[name], inputs)


def test_conformance_arguments_are_checked():
    inputs = _mutant_batch()
    with pytest.raises(InvalidArgument, match="kernel=None is not callable"):
        check_chain_conformance(None, inputs)
    with pytest.raises(InvalidArgument, match="must be a ChainInputs"):
        check_chain_conformance(chain_rejection_sample_torch, inputs[:5])
