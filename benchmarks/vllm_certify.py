"""Certify vLLM's speculative decoding (and its plain control) on the checkpoint family with the vLLM adapter.

    .venv-vllm/bin/python benchmarks/vllm_certify.py [--method draft_model ngram draft_model_greedy plain]
        [--engine-option KEY=VALUE ...] [--engine-config NAME ... | all] [--level quick] [--scenario NAME ...]
        [--isolation none|process] [--timeout 600] [--fixed | --sequential] [--json-dir DIR]

Run from the vLLM venv (see docs/findings/vllm.md). For each method of ``specverify.adapters.vllm.METHODS``
(``--factory`` is the old name of ``--method``): the engine start of one decoder (measured apart, then closed), then
``specverify.certify("specverify.adapters.vllm:METHOD", level=..., models="checkpoint", isolation=...,
engine_options=...)``, printing the verdict, each scenario's N (planned N), p-value and seconds, the outcomes drawn,
samples per second (draws over the run's wall time) and the elapsed wall time. Methods run one after another, each
with the same ``--engine-option`` s (e.g. ``workaround=expand-kernel``, ``draft_sample_method=greedy``) and
``--engine-config`` (presets of the factory's ``engine_configs``, ``specverify.adapters.vllm.configs``: ``patched``,
every workaround; the state presets; ``all``: every reachable one; each is its own run, whose line ``state ...;
covered`` gives the evidence of the state it reached, or why it is not covered). Each method runs
on its factory's checkpoint pair set (``checkpoint_pairs``: the MiMo pair for ``mtp``, the Llama pairs otherwise).
The look rule is the certifier's default (sequential looks); ``--fixed`` runs the fixed plan, ``--sequential``
names sequential looks (a tree older than that default needs it: ``vllm_plan_ab.py`` passes it). ``--json-dir``
writes each certificate as ``METHOD.json`` (``METHOD+OPTIONS.json`` with options). ``--without NAME`` leaves
scenarios out of the full matrix (e.g. ``--without batch-composition``). Each run also prints the engine starts it
made (``vllm.LLM`` constructions, counted here) and their seconds: ``engine starts N (S s)``;
``benchmarks/vllm_plan_ab.py`` reads that line.
"""

from __future__ import annotations

import argparse
import os
import re
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine runs in this process (or the worker)
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, this folder

FACTORIES = ("draft_model", "ngram", "draft_model_greedy", "plain")  # the default run


def engine_start(factory: str, options: dict) -> float:
    """Seconds to make one decoder (one engine) on the first pair of the factory's pair set (the main Llama pair, or
    the MiMo pair); the engine is shut down after."""
    from specverify.adapters import vllm as adapter
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, MIMO_PAIRS, pair_set_of

    pairs = MIMO_PAIRS["mimo"] if pair_set_of(getattr(adapter, factory)) == "mimo" else CHECKPOINT_PAIRS["main"]
    pair = pairs.build()
    started = time.perf_counter()
    decoder = getattr(adapter, factory)(pair.target, pair.draft, **options)
    seconds = time.perf_counter() - started
    decoder.close()
    return seconds


class _StartCounter:
    """Counts ``vllm.LLM`` constructions (the adapter imports ``LLM`` from ``vllm`` at each engine start)."""

    def __init__(self):
        import vllm

        self.module, self.real, self.seconds = vllm, vllm.LLM, []

    def __enter__(self):
        def counted(*args, **kwargs):
            started = time.perf_counter()
            try:
                return self.real(*args, **kwargs)
            finally:
                self.seconds.append(time.perf_counter() - started)

        self.module.LLM = counted
        return self

    def __exit__(self, *exc):
        self.module.LLM = self.real


def run_one(
    factory: str,
    level: str,
    scenarios,
    isolation: str,
    timeout_s: float,
    sequential=None,
    json_dir=None,
    options=(),
    engine_config=None,
) -> None:
    import specverify as sv
    from specverify.adapters import vllm as adapter
    from specverify.certification.config.options import engine_value

    parsed = dict(adapter.ENGINE_CONFIGS[engine_config].options) if engine_config else {}
    parsed.update({k: engine_value(v) for k, _, v in (o.partition("=") for o in options)})
    start_s = engine_start(factory, parsed)
    stamp = time.perf_counter()
    kwargs = dict(level=level, scenarios=scenarios or None, isolation=isolation, models="checkpoint")
    if sequential is not None:  # else the certifier's default look rule
        kwargs["sequential"] = sequential
    kwargs["engine_options"] = list(options)
    kwargs["engine_config"] = engine_config
    kwargs["progress"] = lambda m: print(f"   {factory} {m} (+{time.perf_counter() - stamp:.0f} s)", flush=True)
    started = time.perf_counter()
    with _StartCounter() as starts:
        cert = sv.certify(f"specverify.adapters.vllm:{factory}", timeout_s=timeout_s, **kwargs)
    wall = time.perf_counter() - started
    adapter.close_all()
    parts = [factory, *([engine_config] if engine_config else []), *(o.replace("=", "-") for o in options)]
    label = re.sub(r"[^A-Za-z0-9_.,+-]", "", "+".join(parts))
    print_certificate(label, cert, wall, setup=f"engine start {start_s:.1f} s")
    print(f"   {label}: verdict {cert.verdict}, elapsed {wall:.0f} s, outcomes drawn {_drawn(cert)}", flush=True)
    print(f"   {label}: engine starts {len(starts.seconds)} ({sum(starts.seconds):.1f} s)", flush=True)
    if engine_config:  # the configuration's evidence (adapters/vllm/configs.py): reached, or not covered
        preset = adapter.ENGINE_CONFIGS[engine_config]
        state = (cert.engine or {}).get("state") or {}
        short = preset.shortfall(cert.engine) if cert.verdict != "error" else "not set up"
        shown = ", ".join(f"{k} {v:g}" for k, v in state.items() if v)
        print(f"   {label}: state {shown or 'none'}; {'covered' if short is None else short}", flush=True)
    write_certificate(cert, json_dir, label)


def configurations(names) -> list:
    """``--engine-config`` names, ``all`` expanded to every reachable configuration of the adapter (in order)."""
    from specverify.adapters import vllm as adapter

    out = []
    for name in names:
        if name == "all":
            out += [n for n, p in adapter.ENGINE_CONFIGS.items() if not p.unreachable and n not in out]
        elif name not in adapter.ENGINE_CONFIGS:
            raise SystemExit(f"--engine-config {name!r}: the adapter names {sorted(adapter.ENGINE_CONFIGS)} (or all)")
        elif name not in out:
            out.append(name)
    return out or [None]


def _drawn(cert) -> int:
    return sum(r.n for r in cert.scenarios if r.covered and r.n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    from specverify.adapters.vllm import METHODS

    ap.add_argument("--method", "--factory", dest="method", nargs="+", default=list(FACTORIES), choices=list(METHODS))
    ap.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--engine-config", nargs="+", default=[], help="presets of engine_configs (vllm/configs.py); all")
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--without", nargs="*", default=[], help="scenarios left out of the full matrix")
    ap.add_argument("--isolation", default="none", choices=("process", "none"))
    ap.add_argument("--timeout", type=float, default=600.0, help="per-call limit with --isolation process")
    rule = ap.add_mutually_exclusive_group()
    rule.add_argument("--fixed", action="store_true", help="the fixed plan (default: sequential looks)")
    rule.add_argument("--sequential", action="store_true", help="sequential looks, by name")
    ap.add_argument("--json-dir", default=None)
    args = ap.parse_args()
    scenarios = args.scenario
    if args.without:
        from specverify.certification.matrix.scenarios import matrix

        scenarios = [n for n in (scenarios or matrix("checkpoint")) if n not in set(args.without)]
    for method in args.method:
        for engine_config in configurations(args.engine_config):
            run_one(
                method,
                args.level,
                scenarios,
                args.isolation,
                args.timeout,
                False if args.fixed else (True if args.sequential else None),
                args.json_dir,
                args.engine_option,
                engine_config,
            )


if __name__ == "__main__":
    main()
