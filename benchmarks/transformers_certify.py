"""Certify transformers' speculative decoding (and its plain control) with the transformers adapter.

    OMP_NUM_THREADS=1 python benchmarks/transformers_certify.py [--factory assisted prompt_lookup plain]
        [--models toy checkpoint] [--level quick] [--scenario NAME ...] [--isolation process|none]
        [--fixed | --sequential] [--workers K] [--engine-config NAME ...] [--json-dir DIR]
        [--before REF [--after REF] [--ab-out DIR]]

For each factory of ``specverify.adapters.transformers`` and each model family, runs
``specverify.certify("specverify.adapters.transformers:FACTORY", level=..., models=FAMILY, scenarios=...)`` and
prints the verdict, each scenario's N (planned N) and p-value, the calls per second (draws over the run's wall
time) and the wall time. The look rule is the certifier's default (sequential looks); ``--fixed`` runs the fixed
plan, ``--sequential`` asks for sequential looks by name (a tree older than the default needs it).
``--workers K`` passes the adapter's ``workers`` option (processes for ``sample()``; unset: the adapter's default,
2 on two cores). ``--json-dir`` writes each certificate as ``FACTORY-FAMILY.json`` (``specverify report`` renders
it). ``--before REF`` prints engine × (before, after): each factory and family once on the code of the git ref
``REF`` (a worktree) and once on this checkout's (or ``--after``'s ref), one after the other
(``benchmarks/_engine_ab.py``), with sequential looks on both sides. ``--engine-config NAME ...`` certifies each
named configuration of the factory (``dynamic-cache``, ``static-cache``; ``all``) as its own run, one after the
other, and prints, after each certificate, the configuration's line: whether its state was reached (the adapter's
``engine_info["state"]`` against the configuration's ``reaches``) and the state counts. Findings:
docs/findings/transformers.md.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # tiny matrices: threads only add overhead (workers inherit this)

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, this folder

FACTORIES = ("assisted", "prompt_lookup", "plain", "early_exit", "universal", "mtp", "dflash")
FAMILIES = ("toy", "checkpoint")


def configuration_names(factory: str, names) -> list:
    """``names`` with ``all`` expanded to every configuration the factory declares (in its order)."""
    from specverify.adapters import transformers as tfa
    from specverify.protocol import engine_configs_of

    presets, _ = engine_configs_of(getattr(tfa, factory))
    out = []
    for name in names:
        out += [n for n in (presets if name == "all" else [name]) if n not in out]
    return out


def print_state(factory: str, config: str, cert, wall: float) -> None:
    """The configuration's line: state reached or not (``EngineConfig.shortfall``), the state counts, elapsed."""
    from specverify.adapters import transformers as tfa
    from specverify.protocol import engine_configs_of

    preset = engine_configs_of(getattr(tfa, factory))[0][config]
    short = preset.shortfall(cert.engine)
    state = (cert.engine or {}).get("state")
    covered = "state reached" if short is None else f"NOT COVERED ({short})"
    print(f"== configuration {config}: verdict {cert.verdict}, {covered}; state {state}; wall {wall:.0f} s", flush=True)


def run_one(factory: str, family: str, level: str, scenarios, isolation: str, args, json_dir, config=None) -> None:
    import specverify as sv

    kwargs = {"level": level, "scenarios": scenarios or None, "isolation": isolation}
    if config is not None:
        kwargs["engine_config"] = config
    if args.fixed or args.sequential:  # else the certifier's default look rule
        kwargs["sequential"] = not args.fixed
    if args.workers is not None:
        kwargs["engine_options"] = {"workers": args.workers}
    kwargs["progress"] = lambda message: print(f"   {factory}/{family} {message}", flush=True)
    kwargs["models"] = family
    name = f"specverify.adapters.transformers:{factory}"
    started = time.perf_counter()
    cert = sv.certify(name, **kwargs)
    wall = time.perf_counter() - started
    label = f"{factory} / {family}" + (f" / {config}" if config else "")
    print_certificate(label, cert, wall)
    if config is not None:
        print_state(factory, config, cert, wall)
    write_certificate(cert, json_dir, f"{factory}-{family}" + (f"-{config}" if config else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", nargs="+", default=list(FACTORIES), choices=FACTORIES)
    ap.add_argument("--models", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--isolation", default="process", choices=("process", "none"))
    rule = ap.add_mutually_exclusive_group()
    rule.add_argument("--fixed", action="store_true", help="the fixed plan (default: sequential looks)")
    rule.add_argument("--sequential", action="store_true", help="sequential looks, by name")
    ap.add_argument("--workers", type=int, default=None, help="the adapter's workers option (default: its own)")
    ap.add_argument("--json-dir", default=None)
    ap.add_argument("--engine-config", nargs="+", default=None, help="configurations to certify, one run each (all)")
    ap.add_argument("--before", default=None, help="git ref: print engine × (before, after)")
    ap.add_argument("--after", default=None, help="with --before: the after side's git ref (default: this checkout)")
    ap.add_argument("--ab-out", default=None, help="with --before: each run's output into this folder")
    args = ap.parse_args()
    if args.before:
        from _engine_ab import ab

        runs = []
        for family in args.models:
            for factory in args.factory:
                argv = ["--factory", factory, "--models", family, "--level", args.level, "--isolation", args.isolation]
                argv += ["--fixed" if args.fixed else "--sequential"]
                argv += ["--scenario", *args.scenario] if args.scenario else []
                runs.append((f"{factory} / {family}", argv))
        ab(os.path.abspath(__file__), runs, args.before, args.ab_out, args.after)
        return
    for family in args.models:
        for factory in args.factory:
            configs = configuration_names(factory, args.engine_config) if args.engine_config else [None]
            for config in configs:
                run_one(factory, family, args.level, args.scenario, args.isolation, args, args.json_dir, config)


if __name__ == "__main__":
    main()
