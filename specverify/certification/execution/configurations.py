"""What a run over engine configurations says: ``specverify certify FACTORY --engine-config NAME`` (repeatable, or
``all``) and ``certify_configurations``.

A factory names its configurations in ``factory.engine_configs`` (``{name: EngineConfig}``, docs/adapters.md,
"Engine configurations"). Each configuration is certified as its own decoder: its own parts of the run's plan
(``plan.RunPlan``), its own matrix at the whole α, its own certificate and reproduce line (``--engine-config NAME``).
A configuration that declares the evidence of its state (``EngineConfig.reaches``: prefix-cache hits, preemptions)
and whose run did not show it in the engine's ``engine_info["state"]`` is *not covered*: its certificate stands as
evidence about the law, but the set does not meet its requirement, whatever the verdict. One that cannot run on
this machine (``EngineConfig.unreachable``: GPU-only) is listed under ``all`` and never run; named on its own it is
not covered.
The set's verdict is the worst of its certificates' and its exit code needs every configuration to meet the run's
requirements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from specverify.certification.results.evidence import Certificate
from specverify.enums import Verdict
from specverify.protocol import EngineConfig

__all__ = ["ConfigurationResult", "ConfigurationSet", "configuration_set", "not_set_up"]


@dataclass(frozen=True)
class ConfigurationResult:
    """One configuration's outcome. ``certificate`` None: not run (unreachable here). ``covered``: True when its
    state was reached (or it declares none), False when not (or it was named but cannot run here), None when it was
    only listed (``all`` on a machine that cannot run it). ``note`` says which."""

    name: str
    preset: EngineConfig
    certificate: Optional[Certificate]
    covered: Optional[bool]
    note: str = ""

    @property
    def met(self) -> bool:
        """Whether this configuration meets the run's requirements (a listed-only one is no failure)."""
        if self.covered is None:
            return True
        return bool(self.covered) and self.certificate is not None and self.certificate.requirements()["met"]


@dataclass(frozen=True)
class ConfigurationSet:
    """The certificates of one factory's configurations, in the order they ran. ``default`` names the
    configuration equal to running with no ``--engine-config`` (``factory.default_engine_config``; None: not
    declared)."""

    factory: str
    default: Optional[str]
    results: tuple

    @property
    def certificates(self) -> tuple:
        return tuple(r.certificate for r in self.results if r.certificate is not None)

    @property
    def verdict(self) -> Verdict:
        """The worst verdict of the certificates run (error before inconclusive; inconclusive when none ran)."""
        ran = [Verdict(c.verdict) for c in self.certificates]
        if not ran:
            return Verdict.INCONCLUSIVE
        if Verdict.ERROR in ran:
            return Verdict.ERROR
        return min(ran, key=lambda v: v.rank)

    @property
    def met(self) -> bool:
        """The exit code's answer: every configuration run or named meets the requirements, and one at least ran."""
        return bool(self.certificates) and all(r.met for r in self.results)


def _result(name: str, preset: EngineConfig, cert: Certificate) -> ConfigurationResult:
    if cert.verdict == Verdict.ERROR:
        return ConfigurationResult(name, preset, cert, False, "not set up")
    short = preset.shortfall(cert.engine)
    if short is not None:
        return ConfigurationResult(name, preset, cert, False, f"not covered: {short}")
    state = (cert.engine or {}).get("state") or {}
    shown = ", ".join(f"{k} = {state[k]:g}" for k in preset.reaches)
    return ConfigurationResult(
        name, preset, cert, True, f"state reached: {shown}" if shown else "no state evidence declared"
    )


def configuration_set(plan, merged: list) -> ConfigurationSet:
    """The configuration set of a run over engine configurations: ``merged`` (``[(run plan, certificate)]``, the
    merge's) in the plan's order, with the configurations it lists but cannot run here (``plan.listed``: named ones
    are not covered, ones only listed by ``all`` are not a failure). A run of one ``engine_config`` is a set of one."""
    from specverify.certification.config.execution import ALL_CONFIGURATIONS

    names = list(plan.execution.engine_configs)
    listing = ALL_CONFIGURATIONS in names
    certificates = {run.configuration or run.config.engine_config: cert for run, cert in merged}
    order = [n for n in plan.presets if n in certificates or n in plan.listed] if plan.presets else list(certificates)
    results = []
    for name in order:
        preset = plan.presets.get(name, EngineConfig())
        if name in plan.listed:
            named = not listing or name in names
            results.append(ConfigurationResult(name, preset, None, False if named else None,
                                               f"not reachable here: {preset.unreachable}"))  # fmt: skip
        else:
            results.append(_result(name, preset, certificates[name]))
    return ConfigurationSet(plan.config.factory_name, plan.default, tuple(results))


def not_set_up(cert: Certificate, names: list) -> ConfigurationSet:
    """The set of a run whose factory could not be set up at all: one certificate (verdict error) says so."""
    failed = ConfigurationResult(",".join(map(str, names)), EngineConfig(), cert, False, "not set up")
    return ConfigurationSet(cert.factory, None, (failed,))
