"""``certify``: one way to execute a run — plan its parts, run them (here, as a shard, or on Ray) into a store, merge.

Every certification goes through :func:`execute`: ``plan.plan`` cuts the run into parts (whole scenarios, or a
sampling scenario's blocks with ``block_draws``) for each engine configuration; ``local.run_local`` or
``ray.run_on_ray`` runs them into a store (memory, or the resume file with ``resume``); then either the shard's
parts are its evidence (``shard``: a bundle written to ``counts_out``, merged later by :func:`merge_files`) or
``merge.merge`` decides each decoder's certificate. However a run executes, the same ``RunConfig`` gives the same
verdict and seeded counts (docs/design.md, "Execution").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from specverify.certification.config.execution import Execution, command_line, create_run
from specverify.certification.config.options import Executor
from specverify.certification.config.run_config import RunConfig
from specverify.certification.execution.configurations import ConfigurationSet, configuration_set, not_set_up
from specverify.certification.execution.merge import merge
from specverify.certification.execution.plan import Plan, plan
from specverify.certification.execution.store import BUNDLE_KIND, MemoryStore, PartsBundle, ResumeFile
from specverify.certification.results.evidence import Certificate
from specverify.certification.run.factory import SetupFailure
from specverify.enums import Verdict
from specverify.errors import InvalidArgument, check

__all__ = ["certify", "certify_configurations", "run_certification", "execute", "Outcome", "merge_files"]

_now = time.perf_counter


@dataclass(frozen=True)
class Outcome:
    """What one execution gives: ``certificates``, one per decoder (``[(run plan, Certificate)]``, the run's own
    or each engine configuration's); for a shard, ``shard`` (its own ``inconclusive`` certificate carrying its
    parts in ``shard_info``) instead; ``plan`` None when the factory could not be set up (then ``certificates``
    holds its ``error`` certificate)."""

    plan: Optional[Plan]
    certificates: tuple = ()
    shard: Optional[Certificate] = None

    @property
    def certificate(self) -> Certificate:
        """The one certificate of a run of one decoder (or a shard's own)."""
        if self.shard is not None:
            return self.shard
        check(
            len(self.certificates) == 1,
            f"the run certified {len(self.certificates)} engine configurations: read Outcome.configurations().",
        )
        return self.certificates[0][1]

    def configurations(self, names: Sequence[str] = ()) -> ConfigurationSet:
        """The certificates as a configuration set (each configuration, whether its state was reached)."""
        if self.plan is None:
            return not_set_up(self.certificates[0][1], list(names))
        return configuration_set(self.plan, list(self.certificates))


def execute(
    config: RunConfig, execution: Optional[Execution] = None, progress: Optional[Callable[[str], None]] = None
) -> Outcome:
    """Run ``config`` as ``execution`` says (module docstring)."""
    from specverify.certification.results.verdict import error_certificate

    execution = Execution() if execution is None else execution
    if not config.control and not config.against and not config.target_dir and execution.shard is None:
        config = replace(config, control=declared_control(config))
    if config.control:  # the plain path first, then this run or its two-sample fall-back (control.py)
        from specverify.certification.execution.control import run_with_control

        return run_with_control(config, execution, progress, execute, lambda cert: Outcome(None, ((None, cert),)))
    started = _now()
    try:
        the_plan = plan(config, execution)
    except SetupFailure as exc:
        return Outcome(None, ((None, error_certificate(exc.reason, config=config, elapsed_s=_now() - started)),))
    store = ResumeFile(execution.resume, the_plan) if execution.resume else MemoryStore()
    executor = None
    try:
        if execution.executor == Executor.RAY:
            from specverify.certification.execution.ray import run_on_ray

            executor = run_on_ray(the_plan, store, progress=progress)
        else:
            from specverify.certification.execution.local import run_local

            run_local(the_plan, store, progress=progress)
    except SetupFailure as exc:  # the executor could not start an engine host (a malformed ray_resources)
        return Outcome(None, ((None, error_certificate(exc.reason, config=config, elapsed_s=_now() - started)),))
    elapsed = _now() - started + store.earlier_s  # a resumed run's earlier processes count (docs/ci.md)
    if execution.shard is not None:
        return Outcome(the_plan, shard=_shard_certificate(the_plan, store, elapsed))
    merged = []
    for run, cert in merge(the_plan, store.documents()):
        cert = replace(cert, elapsed_s=elapsed) if len(the_plan.runs) == 1 else cert
        if executor is not None:
            cert = replace(cert, versions={**cert.versions, "executor": executor})
        merged.append((run, cert))
    return Outcome(the_plan, tuple(merged))


def declared_control(config: RunConfig) -> Optional[str]:
    """The plain-path control the factory declares for the run's engine options (``factory.default_control``, a
    callable of the options dict returning ``"module:attr"`` or None: a server factory asked for a precision other
    than float32 runs its own plain deployment first, docs/servers.md "Precision"); None where it declares none or
    the factory does not import (the run's set-up then says why)."""
    from specverify.certification.run.factory import resolve_factory

    try:
        factory = resolve_factory(config.factory)
    except Exception:  # noqa: BLE001 - reported by the run's own set-up
        return None
    declared = getattr(factory, "default_control", None)
    return declared(dict(config.engine_options or {})) if callable(declared) else None


def _shard_certificate(the_plan: Plan, store, elapsed: float) -> Certificate:
    """A shard's own certificate: ``inconclusive``, its parts (a bundle) in ``shard_info``, written to the
    execution's ``counts_out`` when given."""
    from specverify.certification.results.verdict import finish_certificate

    execution = the_plan.execution
    bundle = PartsBundle.of(the_plan, store.documents()).to_dict()
    if execution.counts_out:
        with open(execution.counts_out, "w") as fh:
            json.dump(bundle, fh)
    first = the_plan.runs[0] if the_plan.runs else None
    cert = finish_certificate(
        [], None, (None, "not run in this shard"), config=the_plan.config, matrix=first.matrix if first else {},
        elapsed_s=elapsed,
    )  # fmt: skip
    index, total = execution.shard
    reason = f"shard {index}/{total} only: merge every shard's --counts-out with `specverify merge`"
    command = command_line(the_plan.config, execution)
    return replace(cert, verdict=Verdict.INCONCLUSIVE, reason=reason, shard_info=bundle, command=command)


def run_certification(
    config: RunConfig, progress: Optional[Callable[[str], None]] = None, execution: Optional[Execution] = None
) -> Certificate:
    """:func:`certify` of a ``RunConfig`` (and ``Execution``) already built."""
    return execute(config, execution, progress).certificate


def certify(factory: object, *, progress: Optional[Callable[[str], None]] = None, **options: object) -> Certificate:
    """Certify the decoder made by ``factory(target, draft)`` (a callable or ``"module:attr"``).

    Parameters
    ----------
    factory : str or callable
        ``"module:attr"`` of ``factory(target, draft, **engine_options) -> decoder`` (docs/adapters.md).
    progress : callable, optional
        Called with one line per part of the run (its position, name, elapsed time and an ETA), and inside a long
        one with how far its draws are.
    **options
        Every field of :class:`~specverify.certification.config.run_config.RunConfig` (``level``, ``seed``,
        ``alpha``, ``power``, ``models``, ``drafts``, ``scenarios``, ``isolation``, ``timeout_s``, ``threads``,
        ``budget_s``, ``max_samples``, ``sequential``, ``against``, ``target_dir``/``draft_dir``,
        ``engine_options``, ``engine_config``, ``require*``) and of
        :class:`~specverify.certification.config.execution.Execution` (``block_draws``, ``executor``,
        ``ray_address``, ``ray_workers``, ``shard``, ``counts_out``, ``resume``); ``config=RunConfig(...)`` (with
        ``execution=Execution(...)``) instead passes them whole. ``specverify certify --help`` says what each does;
        docs/design.md gives the verdict rules.

    A set-up failure (the factory raises, its module raises on import, it returns no decoder, unknown
    ``capabilities``) gives the verdict ``error``: it says nothing about the decoder. A shard (``shard=(I, N)``) is
    ``inconclusive`` by itself; its ``shard_info`` holds its parts, which :func:`merge_files` turns into one
    certificate with the others'. Several engine configurations are :func:`certify_configurations`.

    Returns
    -------
    Certificate
        ``verdict`` in exact / greedy-only / approximate / invalid / inconclusive / error, with per-scenario evidence
        and ``command``, the line that reproduces it.
    """
    config, execution = _given(factory, options)
    if execution.engine_configs and execution.shard is None:
        raise InvalidArgument(
            f"engine_configs={list(execution.engine_configs)!r}: several configurations are several certificates; "
            "use certify_configurations(factory, [...]), or give one engine_config."
        )
    return run_certification(config, progress, execution)


def _given(factory: object, options: dict) -> tuple:
    config, execution = options.pop("config", None), options.pop("execution", None)
    if config is None:
        check(execution is None, "execution=... goes with config=RunConfig(...); give its options by name instead.")
        return create_run(factory=factory, **options)
    if options or not isinstance(config, RunConfig) or not isinstance(execution, (Execution, type(None))):
        raise InvalidArgument(
            f"config={config!r} must be a RunConfig, given alone (with execution=Execution(...), no other options)."
        )
    return config, execution or Execution()


def certify_configurations(
    factory: object,
    engine_configs: Sequence[str],
    *,
    progress: Optional[Callable[[str], None]] = None,
    **options: object,
) -> ConfigurationSet:
    """Certify the decoder of ``factory`` once per engine configuration in ``engine_configs`` (names among
    ``factory.engine_configs``, or ``["all"]``), each as its own decoder of one run, with the other ``options`` of
    :func:`certify` (not ``engine_config``).

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
    check(
        isinstance(engine_configs, (list, tuple)) and bool(engine_configs),
        f"engine_configs={engine_configs!r} must be a non-empty list of configuration names (or ['all']), e.g. "
        "['prefix-cache', 'preempt'].",
    )
    config, execution = create_run(factory=factory, engine_configs=list(engine_configs), **options)
    check(execution.shard is None, "shard=... with certify_configurations: certify(..., shard=...) runs a shard.")
    return execute(config, execution, progress).configurations(execution.engine_configs)


def merge_files(items: Sequence[object]) -> Outcome:
    """The outcome of a run from its shards' parts: ``--counts-out`` files or loaded documents (bundles, part
    documents, or the counts files of older versions, migrated), each shard given once."""
    from specverify.certification.results.migrate import parts_of_shard_files

    check(
        isinstance(items, (list, tuple)) and bool(items),
        f"items={items!r} must hold every shard's counts file (specverify merge PART1.json PART2.json ...).",
    )
    bundles = parts_of_shard_files([_load(item) for item in items])
    first = bundles[0]
    config, execution = create_run(
        **{k: v for k, v in first["run"].items() if v is not None and k != "shard"},
        block_draws=first.get("block_draws"),
        engine_configs=first.get("engine_configs") or None,
    )
    _check_shards(bundles)
    the_plan = plan(config, execution)
    docs = [_with_pair(the_plan, doc) for bundle in bundles for doc in bundle["parts"]]
    elapsed = max((sum(d.get("elapsed_s", 0.0) for d in b["parts"]) for b in bundles), default=0.0)
    merged = [(run, replace(cert, elapsed_s=elapsed)) for run, cert in merge(the_plan, docs)]
    return Outcome(the_plan, tuple(merged))


def _with_pair(the_plan: Plan, doc: dict) -> dict:
    """A migrated whole-scenario part names no pair (an old shard file did not): the plan's part does."""
    part = doc.get("part") if isinstance(doc, dict) else None
    if not isinstance(part, dict) or part.get("pair") is not None or part.get("id") not in the_plan.by_id:
        return doc
    return {**doc, "part": dict(part, pair=the_plan.by_id[part["id"]].pair)}


def _load(item: object) -> dict:
    if isinstance(item, dict):
        return item
    try:
        with open(item) as fh:
            doc = json.load(fh)
    except ValueError as exc:
        raise InvalidArgument(f"{item}: not JSON ({exc}); give the files `specverify certify --counts-out` wrote.")
    if not isinstance(doc, dict):
        raise InvalidArgument(
            f"{item}: holds a JSON {type(doc).__name__}, not a shard's counts file (an object with "
            f'"kind": "{BUNDLE_KIND}"): give the files `specverify certify ... --counts-out` wrote.'
        )
    return doc


def _check_shards(bundles: list) -> None:
    """Every shard of one split, each once, of one run."""
    runs = [{k: v for k, v in b["run"].items() if k != "shard"} for b in bundles]
    for run in runs[1:]:
        differ = sorted(k for k in set(run) | set(runs[0]) if run.get(k) != runs[0].get(k))
        check(not differ, f"shards of different runs: {differ!r} differ (one run: same factory, flags and --seed).")
    shards = [tuple(b["shard"]) if b.get("shard") else None for b in bundles]
    check(None not in shards, "a counts file without its shard: give the files `--shard I/N --counts-out` wrote.")
    total = shards[0][1]
    check(
        all(n == total for _, n in shards),
        f"shards of different splits: {sorted(set(shards))!r}; merge the shards of one split.",
    )
    seen = sorted(i for i, _ in shards)
    check(
        seen == list(range(1, total + 1)),
        f"shards {seen!r} given, expected each of 1..{total} exactly once: run the missing --shard I/{total}.",
    )
