"""The α ledger: per-test α from the whole matrix, results through JSON (xdist's workeroutput) unchanged."""

import specverify as sv
from specverify.certification.checks.alpha import per_test_alpha, planned_tests
from specverify.certification.matrix.scenarios import matrix
from specverify.testing.items import certify_item, judge_item, marker_spec, with_decision
from specverify.testing.ledger import Ledger
from specverify.testing.options import Options


def test_planned_tests_is_what_certify_divides_alpha_by():
    for models in ("toy", "checkpoint"):
        scenarios = list(matrix(models).values())
        kinds = [s.kind for s in scenarios]
        members = sum(len(s.members) for s in scenarios if s.kind == "mixed")  # a test per member
        by_hand = kinds.count("sampling") + kinds.count("collision") + members + 3  # composition: 3
        assert planned_tests(models) == by_hand
    assert per_test_alpha(1e-6) == 1e-6 / planned_tests()
    cert = sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["gamma-1"], isolation="none",
                       sequential=False)  # fmt: skip
    (result,) = cert.scenarios  # planned at alpha / m / 5 (the battery): what the ledger's per-test α says
    from specverify.oracles.law import exact_law
    from specverify.stats import BATTERY_TESTS, plan_sample_size

    scenario = matrix("toy")["gamma-1"]
    law = exact_law(scenario.models().target, scenario.prompt, scenario.params)
    per_test = per_test_alpha(1e-6) / len(BATTERY_TESTS)
    assert result.planned_n == plan_sample_size(law.probs, 0.05, alpha=per_test, power=0.9)


def test_the_ledger_decides_from_json_what_it_decides_in_memory():
    spec = marker_spec(("specverify.zoo:bonus_from_draft",), {"isolation": "none"}, Options())
    meta = dict(
        key="k",
        kind="marker",
        config=spec.config.to_dict(),
        planned=("temperature-1", "gamma-1", "greedy"),
        nodeid="t.py::test",
    )
    here, there = Ledger(), Ledger()
    for name in ("temperature-1", "gamma-1"):
        record = certify_item(spec, name, group="k", budget_s=None)
        decision = judge_item(record, spec, num_tests=planned_tests(), alpha_test=per_test_alpha(1e-6))
        record = with_decision(record, decision)
        here.add_item(record, **meta)
    there.merge(here.dump())
    (a,), (b,) = here.decide(), there.decide()
    assert a.certificate.to_dict() | {"versions": None} == b.certificate.to_dict() | {"versions": None}
    assert a.meets is b.meets is False and a.not_run == ("greedy",)
    direct = sv.certify(spec.factory, level="quick", scenarios=["temperature-1", "gamma-1"], isolation="none")
    assert a.certificate.verdict == direct.verdict  # the same verdict as one certify call over those scenarios
    assert [(s.name, s.pvalue, s.passed) for s in a.certificate.scenarios] == [
        (s.name, s.pvalue, s.passed) for s in direct.scenarios
    ]
