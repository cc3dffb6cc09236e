"""Engine configurations certified one by one: ``specverify certify FACTORY --engine-config NAME`` (repeatable, or
``all``) and :func:`certify_configurations`.

A factory names its configurations in ``factory.engine_configs`` (``{name: EngineConfig}``, docs/adapters.md,
"Engine configurations"). Each configuration is certified as its own decoder: its own run of the matrix, at the
whole α, with its own certificate and reproduce line (``--engine-config NAME``). A configuration that declares the
evidence of its state (``EngineConfig.reaches``: prefix-cache hits, preemptions) and whose run did not show it in
the engine's ``engine_info["state"]`` is *not covered*: its certificate stands as evidence about the law, but the
set does not meet its requirement, whatever the verdict. One that cannot run on this machine
(``EngineConfig.unreachable``: GPU-only) is listed under ``all`` and never run; named on its own it is not covered.
The set's verdict is the worst of its certificates' and its exit code needs every configuration to meet the run's
requirements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from specverify.certification.config.run_config import RunConfig
from specverify.certification.results.evidence import Certificate
from specverify.certification.run.factory import SetupFailure, resolve_factory
from specverify.enums import Verdict
from specverify.errors import InvalidArgument
from specverify.protocol import EngineConfig, engine_configs_of

__all__ = [
    "ConfigurationResult",
    "ConfigurationSet",
    "certify_configurations",
    "chosen_configurations",
    "run_configurations",
    "ALL",
]

ALL = "all"


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


def chosen_configurations(
    names: Sequence[str], presets: dict, factory_name: str, *, surface: str = "--engine-config "
) -> list:
    """The configuration names to run, in order: ``all`` expands to every declared one (in declaration order).
    ``surface`` spells the option in messages: ``--engine-config`` (the CLI) or
    ``@pytest.mark.specverify: engine_config=`` (the marker)."""
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgument(
            f"engine_configs={names!r} must be a non-empty list of configuration names (or ['all']), e.g. "
            "--engine-config NAME --engine-config OTHER."
        )
    if not presets:
        raise InvalidArgument(
            f"{surface}{' '.join(names)}: {factory_name} declares no engine configurations (its "
            "engine_configs attribute, docs/adapters.md)."
        )
    out = []
    for name in names:
        if name == ALL:
            out += [n for n in presets if n not in out]
            continue
        if name not in presets:
            raise InvalidArgument(
                f"{surface}{name!r} is not a configuration of {factory_name}: it names {sorted(presets)} (or {ALL!r})."
            )
        if name in out:
            raise InvalidArgument(f"{surface}{name!r} is named twice; name each configuration once.")
        out.append(name)
    return out


def run_configurations(
    config: RunConfig, names: Sequence[str], progress: Optional[Callable[[str], None]] = None
) -> ConfigurationSet:
    """Certify each configuration ``names`` picks (``all``: every one the factory declares) with the rest of
    ``config``: :func:`certify_configurations` of a ``RunConfig`` already built."""
    from specverify.certification.execution.certify import run_certification

    if config.engine_config is not None:
        raise InvalidArgument(
            f"engine_config={config.engine_config!r} together with engine_configs={list(names)!r}: give the "
            "configurations in one list."
        )
    try:
        factory = resolve_factory(config.factory)
    except SetupFailure:  # the factory cannot be set up: one certificate says so (verdict error)
        cert = run_certification(config, progress)
        failed = ConfigurationResult(",".join(map(str, names)), EngineConfig(), cert, False, "not set up")
        return ConfigurationSet(config.factory_name, None, (failed,))
    presets, default = engine_configs_of(factory)
    chosen = chosen_configurations(names, presets, config.factory_name)
    listing = ALL in names
    results = []
    for name in chosen:
        preset = presets[name]
        if preset.unreachable:
            named = not listing or name in names
            results.append(ConfigurationResult(name, preset, None, False if named else None,
                                               f"not reachable here: {preset.unreachable}"))  # fmt: skip
            continue
        if progress is not None:
            progress(f"configuration {name}: {preset.doc or dict(preset.options)}")
        cert = run_certification(replace(config, engine_config=name), progress)
        short = preset.shortfall(cert.engine) if cert.verdict != Verdict.ERROR else None
        if cert.verdict == Verdict.ERROR:
            covered, note = False, "not set up"
        elif short is not None:
            covered, note = False, f"not covered: {short}"
        else:
            state = (cert.engine or {}).get("state") or {}
            shown = ", ".join(f"{k} = {state[k]:g}" for k in preset.reaches)
            covered, note = True, (f"state reached: {shown}" if shown else "no state evidence declared")
        results.append(ConfigurationResult(name, preset, cert, covered, note))
    return ConfigurationSet(config.factory_name, default, tuple(results))


def certify_configurations(
    factory: object,
    engine_configs: Sequence[str],
    *,
    progress: Optional[Callable[[str], None]] = None,
    **options: object,
) -> ConfigurationSet:
    """Certify the decoder of ``factory`` once per engine configuration in ``engine_configs`` (names among
    ``factory.engine_configs``, or ``["all"]``), each as its own decoder with the other ``options`` of
    :func:`specverify.certify` (not ``engine_config``).

    Returns
    -------
    ConfigurationSet
        ``results``, one per configuration (its certificate, whether its state was reached), ``verdict`` the worst
        and ``met`` the exit code's answer.
    """
    if "engine_config" in options:
        raise InvalidArgument(
            f"engine_config={options['engine_config']!r}: certify_configurations takes the names in "
            "engine_configs=[...]; give engine_config to certify() for one configuration."
        )
    config = RunConfig.create(factory=factory, configurations=True, **options)
    return run_configurations(config, engine_configs, progress)
