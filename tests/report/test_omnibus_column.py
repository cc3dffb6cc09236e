"""Which p-value a row shows: the battery's combined value (what Holm decides on, capped at 1) and, beside it, the
omnibus test's own p, whose spread is what a correct decoder looks like."""

from specverify.report import render_text
from specverify.report.text import OMNIBUS, format_pvalue, omnibus_pvalue
from specverify.stats.battery import BATTERY_TESTS


def test_the_omnibus_column_shows_the_pooled_tests_own_pvalue():
    import specverify as sv

    cert = sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["temperature-1", "greedy"],
                      isolation="none", sequential=False)  # fmt: skip
    sampling, greedy = cert.scenarios
    assert OMNIBUS == BATTERY_TESTS[0] and omnibus_pvalue(sampling) == dict(sampling.tests)["cressie-read"]
    combined = min(1.0, len(BATTERY_TESTS) * min(p for _, p in sampling.tests))
    assert sampling.pvalue == combined  # the combined value the row decides on (Bonferroni over the battery)
    assert omnibus_pvalue(greedy) is None
    text = render_text(cert)
    head = next(line for line in text.splitlines() if line.startswith("scenario"))
    assert head.split()[4:6] == ["p-value", "omnibus"]
    row = next(line for line in text.splitlines() if line.startswith("temperature-1 "))
    assert row.split()[4:6] == [format_pvalue(sampling.pvalue), format_pvalue(omnibus_pvalue(sampling))]
    assert "  omnibus  the pooled Cressie–Read test's own p at this N" in text
