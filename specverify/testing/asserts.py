"""Assertion helpers on whole certificates: ``assert_exact`` and ``assert_greedy_equal``; ``certify_with`` (the
session's options as ``certify`` arguments) and ``model_pair`` (the toy and checkpoint pairs the fixtures serve).

Each helper takes a factory (``"module:attr"`` or a callable) and certifies it, or takes a ``Certificate`` already
made (``assert_exact(specverify_certify(FACTORY))`` binds the pytest session's options). A failure raises
``AssertionError`` with :func:`specverify.testing.messages.explain`'s text, never the certificate's repr.
"""

from __future__ import annotations

from specverify.enums import ModelFamily, ScenarioKind, Verdict
from specverify.errors import check

__all__ = ["assert_exact", "assert_greedy_equal", "certify_with", "model_pair"]


def _hide_assertion(excinfo) -> bool:  # pytest's __tracebackhide__: a failure's message says it all
    return excinfo.errisinstance(AssertionError)


def certify_with(options, factory: object, **kwargs) -> object:
    """``certify(factory, ...)`` with the session's ``options`` (its run options: level, seed, alpha, models,
    scenarios, isolation, budget, …); ``kwargs`` (any ``certify`` argument) win over them."""
    from specverify.certification.execution.certify import run_certification

    progress = kwargs.pop("progress", None)
    return run_certification(options.config(factory, **kwargs), progress)


def _certificate(factory_or_cert, kwargs: dict):
    from specverify.certification import Certificate, certify

    if isinstance(factory_or_cert, Certificate):
        check(
            not kwargs,
            f"{sorted(kwargs)!r}: certify arguments are for a factory; a Certificate is checked as it is.",
        )
        return factory_or_cert
    return certify(factory_or_cert, **kwargs)


def assert_exact(
    factory_or_cert: object, *, allow_inconclusive: bool = False, require_reproducible: bool = False, **kwargs
) -> object:
    """Certify (``kwargs`` go to ``specverify.certify``) and fail unless the verdict is ``exact``.

    ``allow_inconclusive`` accepts an inconclusive certificate that rejected nothing (a scenario subset, a budget);
    ``require_reproducible`` also needs the reproducibility check to pass. Returns the certificate.
    """
    __tracebackhide__ = _hide_assertion
    cert = _certificate(factory_or_cert, kwargs)
    if cert.meets(Verdict.EXACT, require_reproducible=require_reproducible):
        return cert
    if allow_inconclusive and cert.verdict == Verdict.INCONCLUSIVE and not cert.failures:
        return cert
    from specverify.testing.messages import explain

    text = explain(cert, require="exact")
    if require_reproducible and cert.meets(Verdict.EXACT):
        text = f"not reproducible: {cert.reproducibility_note}\n{text}"
    raise AssertionError(text)


def assert_greedy_equal(factory_or_cert: object, **kwargs) -> object:
    """Fail unless every covered greedy scenario's output equals the target's greedy output (and at least one was
    covered, and the protocol held). Without ``scenarios=`` a factory is certified on the greedy scenarios only."""
    from specverify.certification.matrix.scenarios import matrix

    __tracebackhide__ = _hide_assertion
    if "scenarios" not in kwargs and not hasattr(factory_or_cert, "verdict"):
        family = matrix(kwargs.get("models", "toy"))
        kwargs["scenarios"] = [n for n, s in family.items() if s.kind == ScenarioKind.GREEDY]
    cert = _certificate(factory_or_cert, kwargs)
    greedy = [s for s in cert.scenarios if s.kind == ScenarioKind.GREEDY]
    covered = [s for s in greedy if s.covered]
    wrong = [s for s in covered if s.passed is False]
    if cert.verdict not in (Verdict.INVALID, Verdict.ERROR) and covered and not wrong:
        return cert
    from specverify.testing.messages import explain, scenario_lines

    if cert.verdict in (Verdict.INVALID, Verdict.ERROR):
        raise AssertionError(explain(cert, require="greedy-only"))
    lines = [f"specverify: {cert.factory}: greedy output differs from the target's greedy output"]
    if not covered:
        notes = "; ".join(f"{s.name}: {s.note}" for s in greedy) or "no greedy scenario was run"
        lines = [f"specverify: {cert.factory}: no greedy scenario covered ({notes})"]
    for s in wrong:
        lines += scenario_lines(s, why="greedy mismatch")
    lines.append(f"Reproduce: {next((s.reproduce for s in wrong), cert.command)}")
    raise AssertionError("\n".join(lines))


def model_pair(family: str = "toy", distance: float | None = None, **fields) -> object:
    """A built ``ModelPair`` (``.target``, ``.draft``, ``.vocab``) of the ``toy`` or ``checkpoint`` family.

    ``distance``: how far the draft is from the target (toy: ``draft_distance`` in [0, 1], 0 = a copy; checkpoint:
    ``draft_sigma``, the noise on every weight, 0 = a copy). Toy ``fields`` are ``ToyPairSpec``'s; checkpoint
    ``fields`` are ``pair`` (a name of ``CHECKPOINT_PAIRS``: main, sharp-close, far-eos), ``draft_seed`` and
    ``CheckpointSpec``'s fields of the target.
    """
    from dataclasses import fields as dc_fields
    from dataclasses import replace

    family = ModelFamily.parse(family, "family")
    check(
        distance is None or (isinstance(distance, (int, float)) and distance >= 0),
        f"distance={distance!r} must be None or a number >= 0 (how far the draft is from the target).",
    )
    if family == "toy":
        from specverify.oracles.pairs import ToyPairSpec

        known = {f.name for f in dc_fields(ToyPairSpec)}
        check(set(fields) <= known, f"{sorted(set(fields) - known)!r} are not ToyPairSpec fields; use {sorted(known)}.")
        spec = ToyPairSpec(**fields) if distance is None else ToyPairSpec(draft_distance=float(distance), **fields)
        return spec.build()
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
    from specverify.oracles.checkpoint_spec import CheckpointSpec

    name = fields.pop("pair", "main")
    check(name in CHECKPOINT_PAIRS, f"pair={name!r} must be one of {sorted(CHECKPOINT_PAIRS)}.")
    spec = CHECKPOINT_PAIRS[name]
    draft_seed = fields.pop("draft_seed", spec.draft_seed)
    known = {f.name for f in dc_fields(CheckpointSpec)}
    check(set(fields) <= known, f"{sorted(set(fields) - known)!r} are not CheckpointSpec fields; use {sorted(known)}.")
    spec = replace(spec, target=replace(spec.target, **fields), draft_seed=draft_seed)
    if distance is not None:
        spec = replace(spec, draft_sigma=float(distance))
    return spec.build()
