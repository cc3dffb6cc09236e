"""The plain-path control (``--control plain|MODULE:ATTR``, docs/servers.md "Precision"): before a run against the
exact law, the same engine's plain path (speculation off: a server's own plain deployment) is certified on one law
scenario. A plain path that misses the exact law (a bf16 deployment: its forward is not the float64 oracle's within
the scenarios' margins) cannot tell a speculative bug from its precision, so the run then falls back to the
two-sample comparison with that plain path (``--against``) and is never ``exact``.

**What runs.** The control is ``CONTROL_SCENARIO`` (``temperature-1``: the core sampling scenario, on the first pair)
certified for the control's factory, with the run's engine options, level and seed, its planned N at the control's
α (a single scenario: its N is one scenario's of the run, not the run's). **α.** The family's α is split by
Bonferroni: the control gets ``CONTROL_SHARE`` (a tenth) of it, the run the remaining nine tenths (its own plan
splits those over its scenarios and tests as always), so the family-wise false-alarm rate stays ≤ α. A control
that fails falsely (probability ≤ α/10) only makes the verdict weaker, never ``exact``.

**The certificate** records the control (``engine["control"]``: its factory, scenario, N, p-value, the TV it could
detect, its α, whether it passed and its reproduce line; and the run's α). Where it passed, the run is the one
``--control`` was not given, at 0.9 α. Where it failed (its law rejected, or a protocol violation on the plain path),
the run is the ``--against`` run; the reason starts with the control's failure, and an ``exact`` of the rules becomes
``inconclusive``: the speculative path matched its plain deployment, which is all that can be said. A control that
cannot be set up, or does not cover its scenario, is the run's ``error``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Optional

from specverify.certification.checks.twosample import against_spec
from specverify.enums import Verdict

__all__ = ["CONTROL_SCENARIO", "CONTROL_SHARE", "run_with_control"]

CONTROL_SCENARIO = "temperature-1"
CONTROL_SHARE = 0.1


def run_with_control(config, execution, progress: Optional[Callable], execute: Callable, errored: Callable) -> object:
    """The outcome of ``config`` (whose ``control`` is set) run with its control first (module docstring);
    ``execute`` runs a ``RunConfig`` (``certify.execute``), ``errored`` makes the outcome of an error certificate."""
    from specverify.certification.config.execution import Execution
    from specverify.certification.results.verdict import error_certificate

    started = time.perf_counter()
    spec = against_spec(config.factory_name, config.control)
    alpha = config.alpha * CONTROL_SHARE
    control_config = replace(config, factory=spec, scenarios=(CONTROL_SCENARIO,), alpha=alpha, control=None,
                             budget_s=None, max_samples=None, engine_config=None)  # fmt: skip
    if progress is not None:
        progress(f"control: {spec} on {CONTROL_SCENARIO} at α {alpha:.3g}")
    control = execute(control_config, Execution(), progress).certificate
    found = [r for r in control.scenarios if r.scenario == CONTROL_SCENARIO and r.covered]
    if control.verdict == Verdict.ERROR or not found:
        why = control.reason if control.verdict == Verdict.ERROR else f"{CONTROL_SCENARIO} was not covered"
        elapsed = time.perf_counter() - started
        return errored(error_certificate(f"the plain control {spec} could not run: {why}", config=config,
                                          elapsed_s=elapsed))  # fmt: skip
    result = found[0]
    record = {
        "factory": spec,
        "scenario": CONTROL_SCENARIO,
        "alpha": alpha,
        "run_alpha": config.alpha - alpha,
        "passed": result.passed is True,
        "n": result.n,
        "pvalue": result.pvalue,
        "detectable_tv": result.detectable_tv,
        "verdict": str(control.verdict),
        "reproduce": result.reproduce,
    }
    passed = result.passed is True
    run_config = replace(config, alpha=config.alpha - alpha, control=None, against=None if passed else config.control)
    outcome = execute(run_config, execution, progress)
    certificates = tuple((run, _recorded(cert, config, record, control)) for run, cert in outcome.certificates)
    return replace(outcome, certificates=certificates)


def _why(record: dict, control) -> str:
    if control.verdict == Verdict.INVALID:
        return f"the plain path broke the protocol: {control.reason}"
    return (
        f"{record['scenario']} rejected on {record['factory']} (p = {record['pvalue']:.3g}, N = {record['n']}, "
        f"α = {record['alpha']:.3g}). Reproduce: {record['reproduce']}"
    )


def _recorded(cert, config, record: dict, control):
    """``cert`` of the run with the control recorded, the family's α and the run's own command line; after a failed
    control, never ``exact`` (module docstring)."""
    engine = {**(cert.engine or {"name": config.factory_name}), "control": record}  # a name: the schema's one key
    cert = replace(cert, engine=engine, alpha=config.alpha, config=config, command=config.reproduce())
    if record["passed"] or cert.verdict == Verdict.ERROR:
        return cert
    head = f"the plain control failed ({_why(record, control)}), so the run compared with it two-sample (--against)"
    if cert.verdict == Verdict.EXACT:
        agreed = [r.name for r in cert.scenarios if r.covered]
        reason = (
            f"never exact: {head}; the speculative path agreed with its plain path on {agreed}: as exact as the "
            "plain deployment's precision allows, and no more (serve it in float32 for the exact law)"
        )
        return replace(cert, verdict=Verdict.INCONCLUSIVE, reason=reason)
    return replace(cert, reason=f"{head}: {cert.reason}")
