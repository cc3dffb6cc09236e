"""The decoder's verdict where CI reads it: one failing report per decoder that misses its requirement while none of
its items failed, and the verdicts as JUnit testsuite properties.

A marked test's items pass or fail on their own scenario; the decoder's verdict is decided once, at the end of the
session (``ledger``). A scenario subset is inconclusive (core scenarios not covered) although its one item passed; a
verdict worse than the baseline's fails no item. Without a report of its own such a session printed "1 passed",
exited 1 and wrote a JUnit file with ``failures="0"``. The report made here (``NODEID::specverify-verdict``, a setup,
a failed call and a teardown, as pytest's runner sends them) goes through ``pytest_runtest_logreport``, so the
terminal's counts, its failures section and ``--junitxml`` all show it. When an item of the decoder failed already,
that item carries the failure and no second one is added.
"""

from __future__ import annotations

__all__ = ["VERDICT_ID", "verdict_reports", "suite_properties"]

VERDICT_ID = "specverify-verdict"


def _needs_report(decision) -> bool:
    group = decision.group
    return group.kind == "marker" and decision.meets is False and not any(r.failure for r in group.records)


def _reports(decision, text: str) -> list:
    from _pytest.reports import TestReport

    group = decision.group
    nodeid = f"{group.nodeid}::{VERDICT_ID}"
    location = (group.nodeid.split("::")[0], None, f"{group.nodeid.split('::', 1)[-1]}::{VERDICT_ID}")
    props = [
        ("specverify_factory", decision.certificate.factory),
        ("specverify_verdict", str(decision.certificate.verdict)),
        ("specverify_meets", "no"),
        ("specverify_reproduce", decision.certificate.command),
    ]
    keywords = {VERDICT_ID: 1}

    def report(when: str, outcome: str, longrepr=None, user_properties=()):
        return TestReport(nodeid, location, keywords, outcome, longrepr, when, user_properties=user_properties)

    return [report("setup", "passed"), report("call", "failed", text), report("teardown", "passed", None, props)]


def verdict_reports(decisions: list, options) -> list:
    """The reports to log for ``decisions`` (``ledger.Decision``): three per decoder that fails its requirement with
    no failed item, its summary block as the failure text."""
    from specverify.testing.summary import decision_lines

    out = []
    for d in decisions:
        if _needs_report(d):
            block = [line for line in decision_lines(d, options) if not line.startswith("  FAILS: ")]
            text = "\n".join([f"specverify: FAILS: {d.why}", *block])  # the decoder named once, in the block
            out += _reports(d, text)
    return out


def suite_properties(decisions: list) -> list:
    """``(name, value)`` testsuite properties: each decoder's verdict and whether it meets its requirement."""
    out = []
    for d in decisions:
        if d.meets is None:
            continue
        key = f"specverify_verdict[{d.group.nodeid}]"
        out.append((key, f"{d.certificate.verdict} ({'meets' if d.meets else 'FAILS'}: {d.why})"))
    return out
