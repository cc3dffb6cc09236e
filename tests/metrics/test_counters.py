"""Counter identities (specverify.metrics.counters) and the certificate's ``counters`` check: the reference with
correct engine counters passes; a decoder with only one counter defect fails exactly the identity its defect breaks;
a broken hook fails the check and never the verdict (docs/metrics.md, "Counter identities")."""

import json
from dataclasses import replace

import pytest

from specverify import certify
from specverify.enums import Verdict
from specverify.errors import InvalidArgument
from specverify.metrics.counters import (
    RATE_TOLERANCE,
    CounterTally,
    ReportedMetrics,
    as_reported_metrics,
    counter_identities,
)
from specverify.report import certificate_from_document, render_json, render_text, validate_document
from specverify.zoo import SHOWCASES, ZOO
from specverify.zoo.metrics import counting_reference


def _broken(rows):
    return [i.name for i in rows if not i.held]


def test_reported_metrics_validates_its_fields():
    with pytest.raises(InvalidArgument, match=r"num_drafts=-1 must be a count"):
        ReportedMetrics(num_drafts=-1)
    with pytest.raises(InvalidArgument, match=r"acceptance_rate=nan must be a finite number"):
        ReportedMetrics(acceptance_rate=float("nan"))
    with pytest.raises(InvalidArgument, match=r"accepted_per_position\[1\]=-2 must be a count"):
        ReportedMetrics(accepted_per_position=(3, -2))
    assert ReportedMetrics(num_drafts=4.0).num_drafts == 4  # Prometheus counters are floats
    assert ReportedMetrics(num_drafts=4, accepted_per_position=[2, 1]).to_dict() == {
        "num_drafts": 4,
        "accepted_per_position": [2, 1],
    }


def test_as_reported_metrics_takes_a_record_a_dict_or_none():
    assert as_reported_metrics(None) is None
    assert as_reported_metrics({"num_drafts": 3}) == ReportedMetrics(num_drafts=3)
    with pytest.raises(InvalidArgument, match=r"keys \['drafts'\]: expected keys among"):
        as_reported_metrics({"drafts": 3})
    with pytest.raises(InvalidArgument, match=r"returned list: expected a ReportedMetrics"):
        as_reported_metrics([3])


def _tally(rounds_per_completion, gamma=3):
    tally = CounterTally()
    for accepted in rounds_per_completion:
        tally.add_completion(accepted, gamma)
    return tally


COMPLETIONS = [(3, 1), (0, 2, 3), (1,)]  # 6 rounds, 10 accepted; positions: >0: 5, >1: 3, >2: 2
RIGHT = ReportedMetrics(
    num_drafts=6,
    num_draft_tokens=18,
    num_accepted_tokens=10,
    accepted_per_position=(5, 3, 2),
    mean_acceptance_length=1 + 10 / 6,
    acceptance_rate=10 / 18,
    acceptance_rate_per_position=(5 / 6, 3 / 6, 2 / 6),
)


def test_correct_counters_satisfy_every_identity():
    rows = counter_identities(ReportedMetrics(), RIGHT, _tally(COMPLETIONS))
    assert len(rows) >= 14 and not _broken(rows), _broken(rows)
    rounded = ReportedMetrics(**{**RIGHT.__dict__, "mean_acceptance_length": round(1 + 10 / 6, 2)})
    assert not _broken(counter_identities(None, rounded)), "a rate printed to 2 decimals still agrees"
    off = ReportedMetrics(**{**RIGHT.__dict__, "mean_acceptance_length": 1 + 10 / 6 + 2 * RATE_TOLERANCE})
    assert _broken(counter_identities(None, off)) == [
        "mean_acceptance_length = 1 + num_accepted_tokens / num_drafts",
        "mean_acceptance_length = 1 + Σ_k acceptance_rate_per_position[k]",
    ]


@pytest.mark.parametrize(
    "change, broken",
    [
        (  # speculators #1095: the per-position counts of one of two data-parallel engines
            dict(accepted_per_position=(3, 2, 1), acceptance_rate_per_position=(3 / 6, 2 / 6, 1 / 6)),
            "Σ_k accepted_per_position[k] = num_accepted_tokens",
        ),
        (  # SGLang PR #13212: γ + 1 drafted tokens a round
            dict(num_draft_tokens=24, acceptance_rate=10 / 24),
            "num_draft_tokens <= Σ γ · the completions' rounds (no round drafts more than γ)",
        ),
        (  # the drafts after a stop counted in the aggregate
            dict(
                num_accepted_tokens=12,
                accepted_per_position=(5, 4, 3),
                mean_acceptance_length=1 + 12 / 6,
                acceptance_rate=12 / 18,
            ),
            "num_accepted_tokens = accepted drafts the completions report",
        ),  # fmt: skip
        (dict(num_drafts=5, mean_acceptance_length=3.0), "num_drafts = rounds the completions report"),
    ],
)
def test_each_counter_defect_breaks_its_identity(change, broken):
    wrong = ReportedMetrics(**{**RIGHT.__dict__, **change})
    assert broken in _broken(counter_identities(ReportedMetrics(), wrong, _tally(COMPLETIONS)))


def test_counters_that_go_down_or_completions_that_do_not_say_are_reported():
    rows = counter_identities(RIGHT, ReportedMetrics(num_drafts=2, num_accepted_tokens=11))
    assert "num_drafts is cumulative (never decreases)" in _broken(rows)
    tally = _tally(COMPLETIONS)
    tally.add_completion(None, 3)  # a completion without its accepted drafts: no comparison with the engine
    assert not [i for i in counter_identities(ReportedMetrics(), RIGHT, tally) if "completions" in i.name]


def _sampled(name, n=3000):
    """The entry's counters over n draws of the eos-in-block showcase, slow and fast path, beside its own tally."""
    showcase = SHOWCASES["eos_in_block"]
    target, draft = showcase.models()
    decoder = counting_reference(target, draft, entropy=0) if name == "reference" else ZOO[name].factory(target, draft)
    request = showcase.request(seed=7)
    before, tally = decoder.reported_metrics(), CounterTally()
    for completion in decoder([request] * n):
        tally.add_completion(completion.accepted, request.num_draft_tokens)
    counts = decoder.sample(request, n)
    tally.add_counts(counts.rounds, n, request.num_draft_tokens)
    return counter_identities(before, decoder.reported_metrics(), tally)


@pytest.mark.parametrize(
    "name, broken",
    [
        ("reference", None),
        ("acceptance_per_position_from_one_dp_engine", "Σ_k accepted_per_position[k] = num_accepted_tokens"),
        (
            "acceptance_rate_denominator_steps_plus_one",
            "num_draft_tokens <= Σ γ · the completions' rounds (no round drafts more than γ)",
        ),
        ("acceptance_counted_past_stop", "num_accepted_tokens = accepted drafts the completions report"),
        ("acceptance_partial_accept_restore_replay", None),  # wrong per request and in aggregate alike: metrics
    ],
)
def test_a_decoder_with_one_counter_defect_fails_its_identity_and_the_reference_passes(name, broken):
    failed = _broken(_sampled(name))
    assert failed == [] if broken is None else broken in failed, failed


def test_the_certificate_carries_the_counters_check_and_it_round_trips():
    ok = certify(counting_reference, level="quick", seed=0, alpha=1e-6, scenarios=["temperature-1"], isolation="none")
    assert ok.counters_ok is True and "identities held" in ok.counters_note, ok.counters_note
    record = ok.scenarios[0].counters
    assert record["ok"] and record["tally"]["rounds"] == record["window"]["num_drafts"] > 0, record
    doc = json.loads(render_json(ok))
    assert validate_document(doc) == "specverify-certificate" and doc["requirements"]["counters"]["ok"] is True
    back = certificate_from_document(doc)
    assert back.counters_ok is True and back.scenarios[0].counters == json.loads(json.dumps(record))
    assert "counters (the engine's own acceptance counters" in render_text(ok)


def test_a_broken_identity_is_evidence_binding_only_under_require_metrics():
    name = "acceptance_rate_denominator_steps_plus_one"
    cert = certify(f"specverify.zoo:{name}", level="quick", seed=0, alpha=1e-6, scenarios=["temperature-1"],
                   isolation="none", require_metrics=True)  # fmt: skip
    assert cert.counters_ok is False and cert.failed_checks == ("counters",), cert.counters_note
    assert "temperature-1: num_draft_tokens <= Σ γ · the completions' rounds" in cert.counters_note
    exact = replace(cert, verdict=Verdict.EXACT)  # one scenario: inconclusive; the check weighs the same on exact
    assert cert.metrics_ok is True and exact.meets("exact") and not exact.meets("exact", require_metrics=True)
    record = cert.requirements()
    assert record["counters"] == {"required": True, "ok": False} and record["met"] is False
    assert "counter identities: NOT held" in render_text(cert)


class _BadHook:
    """The reference whose reported_metrics() returns a malformed record."""

    def __init__(self, target, draft):
        self.inner = counting_reference(target, draft, entropy=0)
        self.capabilities = self.inner.capabilities

    def __call__(self, requests):
        return self.inner(requests)

    def reported_metrics(self):
        return {"num_drafts": -1}


def bad_hook(target, draft):
    return _BadHook(target, draft)


def test_a_failing_hook_fails_the_check_and_not_the_verdict():
    cert = certify(bad_hook, level="quick", seed=0, alpha=1e-6, scenarios=["temperature-1", "greedy"],
                   isolation="none")  # fmt: skip
    assert cert.counters_ok is False and "num_drafts=-1 must be a count" in cert.counters_note, cert.counters_note
    assert str(cert.verdict) not in ("invalid", "error"), cert.reason
