"""``decoder.draft_law = "model-temperature"``: drafts sampled from the draft model's raw logits at the request's
temperature and nothing else (vLLM's probabilistic draft, v1/spec_decode/llm_base_proposer.py:1822-1860), verified
with that law, are exact; their reported acceptance meets the expectation of that law, and judged as samples of the
draft's processed law (``"model"``) it fails the check on a scenario whose processors move the draft."""

import pytest
import torch

from specverify import certify
from specverify.oracles.argmax_draft import TemperatureDraft
from specverify.oracles.models import make_vocab, random_target
from specverify.protocol import DRAFT_LAWS
from specverify.reference.vectorized import VectorizedDecoder

SCENARIOS = ["penalties"]


class TemperatureDrafting(VectorizedDecoder):
    """Exact: samples drafts from softmax(raw draft logits / temperature), no penalties or masks, and divides by that
    same law in the acceptance ratio; ``draft_law`` is set per test."""

    def draft_laws(self, st, logits, prov, num_generated):
        q = torch.softmax(logits.to(torch.float64) / float(st.params.temperature), -1)  # [n, V]
        return q, q


def _factory(law):
    def make(target, draft):
        decoder = TemperatureDrafting(target, draft)
        decoder.draft_law = law
        return decoder

    return make


@pytest.fixture(scope="module")
def certs():
    return {
        law: certify(_factory(law), level="quick", scenarios=SCENARIOS, isolation="none", alpha=1e-6)
        for law in ("model-temperature", "model")
    }


def test_a_temperature_only_draft_declared_as_such_meets_its_expectation(certs):
    assert "model-temperature" in DRAFT_LAWS
    cert = certs["model-temperature"]
    assert all(s.passed for s in cert.scenarios), cert.reason
    assert cert.metrics_ok is True, cert.metrics_note
    first = cert.scenarios[0]
    assert first.metrics["draft_law"] == "model-temperature" and first.accepted_pvalue > 1e-6


def test_the_same_drafts_judged_as_samples_of_the_processed_draft_fail_the_check(certs):
    cert = certs["model"]
    assert all(s.passed for s in cert.scenarios)  # the law is exact either way
    assert cert.metrics_ok is False and "outside" in cert.metrics_note, cert.metrics_note


def test_temperature_draft_ignores_the_processors_and_is_greedy_at_zero():
    from specverify.oracles.round_rules import RoundContext
    from specverify.params import SamplingParams

    model = random_target(make_vocab(4), seed=0)
    raw = model.logits([(0,)])[0]
    top = int(raw.argmax())
    params = SamplingParams(temperature=0.5, bad_token_ids=(top,), repetition_penalty=2.0, max_tokens=2)
    row = RoundContext(model, TemperatureDraft(model, 0.5), (0,), params, 1).draft_row((), ())
    assert torch.allclose(torch.from_numpy(row), torch.softmax(raw / 0.5, -1)) and row[top] > 0
    greedy = RoundContext(model, TemperatureDraft(model, 0.0), (0,), params, 1).draft_row((), ())
    assert greedy[top] == 1.0
