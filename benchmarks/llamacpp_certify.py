"""Certify llama.cpp's speculative paths (and their controls) on the checkpoint family with the llama.cpp adapter.

    LLAMA_CPP_LIB_PATH=<build>/bin SPECVERIFY_LLAMACPP_BIN=<build>/bin OMP_NUM_THREADS=1 \
    .venv-llama/bin/python benchmarks/llamacpp_certify.py [--factory plain python_draft_model ...] [--level quick] \
        [--scenario NAME ...] [--budget 1800] [--fixed | --sequential] [--engine-config NAME ...] [--json-dir DIR]
        [--before REF [--after REF] [--ab-out DIR]]

Run from the llama.cpp venv (docs/findings/llamacpp.md). For each factory of ``specverify.adapters.llamacpp``: the
set-up of one decoder (GGUF export on first use, server start), measured apart, then
``specverify.certify("specverify.adapters.llamacpp:FACTORY", level=..., models="checkpoint", ...)``, printing the
verdict, each scenario's N (planned N), p-value, TV estimate and seconds, samples per second and the wall time.
Factories run one after another, in this process (``--isolation none``) unless ``--isolation process``. The look
rule is the certifier's default (sequential looks); ``--fixed`` runs the fixed plan, ``--sequential`` names
sequential looks (a tree older than the default needs it). ``--before REF`` prints engine × (before, after): each
factory once on the code of the git ref ``REF`` (a worktree) and once on this checkout's (or ``--after``'s ref),
one after the other, with sequential looks on both sides (``benchmarks/_engine_ab.py``). ``--engine-config NAME
...`` certifies each named configuration of each factory (``cache-prompt``, ``no-cache-prompt``; the server's
``slots`` too; ``all``) as its own run and prints after each certificate the configuration's line: whether its state
was reached (``engine_info["state"]`` against the configuration's ``reaches``), the state counts and the wall time;
a configuration that cannot run here (``context-shift``) is listed with its reason. ``--json-dir`` writes each
certificate as ``FACTORY[-CONFIG].json``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, the script's folder

FACTORIES = (
    "plain",
    "python_draft_model",
    "python_prompt_lookup",
    "server_plain",
    "server_draft_model",
    "speculative_example",
    "speculative_example_tree",
)


def setup_seconds(factory: str, options: dict) -> float:
    """Seconds to make one decoder on the main checkpoint pair with ``options`` (closed after)."""
    from specverify.adapters import llamacpp
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    pair = CHECKPOINT_PAIRS["main"].build()
    started = time.perf_counter()
    decoder = getattr(llamacpp, factory)(pair.target, pair.draft, **options)
    seconds = time.perf_counter() - started
    getattr(decoder, "close", lambda: None)()
    return seconds


def configuration_names(factory: str, names) -> list:
    """``names`` with ``all`` expanded to every configuration the factory declares (in its order)."""
    from specverify.adapters import llamacpp
    from specverify.protocol import engine_configs_of

    presets, _ = engine_configs_of(getattr(llamacpp, factory))
    out = []
    for name in names:
        out += [n for n in (presets if name == "all" else [name]) if n not in out]
    return out


def _preset(factory: str, config: str):
    from specverify.adapters import llamacpp
    from specverify.protocol import engine_configs_of

    return engine_configs_of(getattr(llamacpp, factory))[0][config]


def print_state(factory: str, config: str, cert, wall: float) -> None:
    """The configuration's line: state reached or not (``EngineConfig.shortfall``), the state counts, elapsed."""
    short = _preset(factory, config).shortfall(cert.engine)
    state = (cert.engine or {}).get("state")
    covered = "state reached" if short is None else f"NOT COVERED ({short})"
    print(f"== {factory} / {config}: verdict {cert.verdict}, {covered}; state {state}; wall {wall:.0f} s", flush=True)


def run_one(factory: str, args, config=None) -> None:
    import specverify as sv

    if config is not None and _preset(factory, config).unreachable:
        print(f"== {factory} / {config}: not run, not reachable here: {_preset(factory, config).unreachable}")
        return
    options = dict(_preset(factory, config).options) if config is not None else {}
    start_s = setup_seconds(factory, options)
    stamp = time.perf_counter()
    kwargs = dict(level=args.level, scenarios=args.scenario or None, isolation=args.isolation, models="checkpoint")
    kwargs["progress"] = lambda m: print(f"   {factory} {m} (+{time.perf_counter() - stamp:.0f} s)", flush=True)
    if args.budget:
        kwargs["budget_s"] = args.budget
    started = time.perf_counter()
    if args.fixed or args.sequential:  # else the certifier's default look rule
        kwargs["sequential"] = not args.fixed
    if config is not None:
        kwargs["engine_config"] = config
    cert = sv.certify(f"specverify.adapters.llamacpp:{factory}", timeout_s=args.timeout, **kwargs)
    wall = time.perf_counter() - started
    print_certificate(factory + (f" / {config}" if config else ""), cert, wall, setup=f"set-up {start_s:.1f} s")
    if config is not None:
        print_state(factory, config, cert, wall)
    write_certificate(cert, args.json_dir, factory + (f"-{config}" if config else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", nargs="+", default=list(FACTORIES), choices=FACTORIES)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--isolation", default="none", choices=("process", "none"))
    ap.add_argument("--timeout", type=float, default=600.0, help="per-call limit with --isolation process")
    ap.add_argument("--budget", type=float, default=0.0, help="wall-clock budget per factory in seconds (0: none)")
    rule = ap.add_mutually_exclusive_group()
    rule.add_argument("--fixed", action="store_true", help="the fixed plan (default: sequential looks)")
    rule.add_argument("--sequential", action="store_true", help="sequential looks, by name")
    ap.add_argument("--engine-config", nargs="+", default=None, help="configurations to certify, one run each (all)")
    ap.add_argument("--json-dir", default=None, help="write each certificate as FACTORY[-CONFIG].json here")
    ap.add_argument("--before", default=None, help="git ref: print engine × (before, after)")
    ap.add_argument("--after", default=None, help="with --before: the after side's git ref (default: this checkout)")
    ap.add_argument("--ab-out", default=None, help="with --before: each run's output into this folder")
    args = ap.parse_args()
    if args.before:
        from _engine_ab import ab

        runs = []
        for factory in args.factory:
            argv = ["--factory", factory, "--level", args.level, "--isolation", args.isolation]
            argv += ["--timeout", str(args.timeout), "--budget", str(args.budget)]
            argv += ["--fixed" if args.fixed else "--sequential"]
            argv += ["--scenario", *args.scenario] if args.scenario else []
            runs.append((factory, argv))
        ab(os.path.abspath(__file__), runs, args.before, args.ab_out, args.after)
        return
    for factory in args.factory:
        for config in configuration_names(factory, args.engine_config) if args.engine_config else [None]:
            run_one(factory, args, config)


if __name__ == "__main__":
    main()
