"""The α ledger: per-test α from the whole matrix, results through JSON (xdist's workeroutput) unchanged."""

import specverify as sv
from specverify.certification.core import _num_sampling_tests
from specverify.certification.ledger import per_test_alpha, planned_tests
from specverify.certification.scenarios import matrix
from specverify.testing.items import certify_item, judge_item, marker_spec, with_decision
from specverify.testing.ledger import Ledger
from specverify.testing.options import Options


def test_planned_tests_is_what_certify_divides_alpha_by():
    for models in ("toy", "checkpoint"):
        assert planned_tests(models) == _num_sampling_tests(matrix(models))
    assert per_test_alpha(1e-6) == 1e-6 / planned_tests()


def test_the_ledger_decides_from_json_what_it_decides_in_memory():
    spec = marker_spec(("specverify.zoo:bonus_from_draft",), {"isolation": "none"}, Options())
    meta = dict(
        key="k",
        kind="marker",
        factory=spec.factory_name,
        level="quick",
        seed=0,
        alpha=1e-6,
        models="toy",
        require="exact",
        planned=("temperature-1", "gamma-1", "greedy"),
        nodeid="t.py::test",
    )
    here, there = Ledger(), Ledger()
    for name in ("temperature-1", "gamma-1"):
        record = certify_item(spec, name, group="k", budget_s=None)
        record = with_decision(record, judge_item(record, spec, alpha_test=per_test_alpha(1e-6), core=False))
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
