"""``decoder.draft_law``: the acceptance evidence compares reported acceptance with the expectation of the drafts
the decoder really makes — samples of the draft model (default), its argmax chain, or nothing it can model."""

import json

import pytest
import torch

from specverify import certify
from specverify.errors import InvalidArgument
from specverify.oracles.argmax_draft import ArgmaxDraft
from specverify.oracles.models import make_vocab, random_target
from specverify.protocol import DRAFT_LAWS, draft_law_of
from specverify.reference.vectorized import VectorizedDecoder
from specverify.report import render_json, render_text
from specverify.report.schema import validate_document

SCENARIOS = ["temperature-1", "gamma-1"]


class ArgmaxDrafting(VectorizedDecoder):
    """Exact: drafts the draft model's argmax on its raw logits, verified with q its point mass (a greedy-draft
    engine); ``draft_law`` is set per test."""

    def draft_laws(self, st, logits, prov, num_generated):
        q = torch.zeros(logits.shape, dtype=torch.float64)
        q.scatter_(1, logits.argmax(-1, keepdim=True), 1.0)
        return q, q


def _factory(law):
    def make(target, draft):
        decoder = ArgmaxDrafting(target, draft)
        if law is not None:
            decoder.draft_law = law
        return decoder

    return make


@pytest.fixture(scope="module")
def certs():
    return {
        law: certify(_factory(law), level="quick", scenarios=SCENARIOS, isolation="none", alpha=1e-6)
        for law in (None, "model-argmax", "unmodelled")
    }


def test_a_greedy_draft_declared_as_such_meets_its_expectation(certs):
    cert = certs["model-argmax"]
    assert cert.verdict != "invalid" and all(s.passed for s in cert.scenarios), cert.reason
    assert cert.metrics_ok is True, cert.metrics_note
    first = cert.scenarios[0]
    assert first.metrics["draft_law"] == "model-argmax" and first.accepted_pvalue > 1e-6


def test_the_same_drafts_judged_as_samples_of_the_draft_fail_the_check(certs):
    """Without the declaration the expectation is the sampled draft's: the check sees the difference (this is the
    false alarm the declaration removes, and it shows the check is sensitive to the draft law)."""
    cert = certs[None]
    assert all(s.passed for s in cert.scenarios)  # the law is exact either way
    assert cert.metrics_ok is False and "outside" in cert.metrics_note, cert.metrics_note
    assert cert.scenarios[0].accepted_pvalue < 1e-6


def test_unmodelled_drafts_get_the_consistency_rule_only(certs):
    cert = certs["unmodelled"]
    assert cert.metrics_ok is None and "not modelled" in cert.metrics_note, cert.metrics_note
    first = cert.scenarios[0]
    assert first.accepted_observed and first.accepted_expected is None and first.accepted_pvalue is None
    assert first.metrics["ok"] is None and first.metrics["rows"] == [] and first.metrics["violation"] is None
    text = render_text(cert)
    assert "no exact law to compare with" in text and "not modelled" in text
    assert validate_document(json.loads(render_json(cert))) == "specverify-certificate"


def test_an_unknown_draft_law_is_a_setup_error_naming_the_choices():
    with pytest.raises(InvalidArgument, match="model-argmax"):
        draft_law_of(type("D", (), {"draft_law": "greedy"})())
    assert draft_law_of(object()) == "model"
    assert set(DRAFT_LAWS) == {"model", "model-argmax", "model-temperature", "unmodelled"}
    cert = certify(_factory("greedy"), level="quick", scenarios=SCENARIOS[:1], isolation="none")
    assert cert.verdict == "error" and "draft_law='greedy'" in cert.reason, cert.reason


def test_argmax_draft_is_unprocessed_a_banned_argmax_is_still_proposed():
    from specverify.oracles.round_rules import RoundContext
    from specverify.params import SamplingParams

    model = random_target(make_vocab(4), seed=0)
    top = int(model.logits([(0,)])[0].argmax())
    params = SamplingParams(bad_token_ids=(top,), max_tokens=2)
    row = RoundContext(model, ArgmaxDraft(model), (0,), params, 1).draft_row((), ())
    assert row[top] == 1.0 and row.sum() == 1.0
