"""Certify the factories of an engine adapter without a script of its own (ONNX Runtime GenAI, OpenVINO GenAI) on the
checkpoint family, one after another in this process, from the engine's venv:

    .venv-ortgenai/bin/python benchmarks/engine_certify.py onnxruntime_genai --factory plain draft_model \
        [--level quick] [--engine-config NAME ...] [--scenario NAME ...] [--json-dir DIR]

For each factory (and each ``--engine-config``, ``all`` for every one it declares): the time to make one decoder on
the main pair, then ``specverify.certify("specverify.adapters.ADAPTER:FACTORY", models="checkpoint",
isolation="none", ...)`` with the certifier's default look rule, printing the verdict, a line per scenario
(``_engine_report``), then one summary line: elapsed, draws, the first round's accepted counts of temperature-1
(observed beside the exact expectation's means), and, for a configuration, whether its state was reached.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from _engine_report import print_certificate, write_certificate  # noqa: E402 -- benchmarks/, the script's folder


def setup_seconds(adapter, factory: str, options: dict) -> float:
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    pair = CHECKPOINT_PAIRS["main"].build()
    started = time.perf_counter()
    decoder = getattr(adapter, factory)(pair.target, pair.draft, **options)
    seconds = time.perf_counter() - started
    getattr(decoder, "close", lambda: None)()
    return seconds


def first_round(cert, scenario: str = "temperature-1") -> str:
    """The observed first-round accepted counts of ``scenario`` and the exact expectation's shares."""
    for r in cert.scenarios:
        if r.name == scenario and r.covered:
            data = r.to_dict() if hasattr(r, "to_dict") else vars(r)
            observed = data.get("accepted_observed")
            expected = data.get("accepted_expected")
            if not observed:
                return "first round: not reported"
            shown = f"first round {scenario}: observed {dict(observed)}"
            if expected:
                shown += " expected shares " + ", ".join(f"{e:.3f}" for e in expected)
            return shown
    return "first round: -"


def run_one(name: str, factory: str, args, config=None) -> None:
    import specverify as sv
    from specverify.protocol import engine_configs_of

    adapter = importlib.import_module(f"specverify.adapters.{name}")
    presets, _ = engine_configs_of(getattr(adapter, factory))
    if config is not None and presets[config].unreachable:
        print(f"== {factory} / {config}: not run here: {presets[config].unreachable}", flush=True)
        return
    options = dict(presets[config].options) if config is not None else {}
    start_s = setup_seconds(adapter, factory, options)
    kwargs = dict(level=args.level, scenarios=args.scenario or None, isolation="none", models="checkpoint")
    if config is not None:
        kwargs["engine_config"] = config
    started = time.perf_counter()
    cert = sv.certify(f"specverify.adapters.{name}:{factory}", **kwargs)
    wall = time.perf_counter() - started
    label = factory + (f" / {config}" if config else "")
    print_certificate(label, cert, wall, setup=f"set-up {start_s:.1f} s")
    draws = sum(r.n for r in cert.scenarios if r.covered and r.n)
    state = ""
    if config is not None:
        short = presets[config].shortfall(cert.engine)
        state = "; state reached" if short is None else f"; state NOT reached ({short})"
    print(f"== {label}: {cert.verdict}, {wall:.0f} s, {draws} draws; {first_round(cert)}{state}", flush=True)
    write_certificate(cert, args.json_dir, factory + (f"-{config}" if config else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("adapter", help="the package under specverify.adapters, e.g. onnxruntime_genai or openvino")
    ap.add_argument("--factory", nargs="+", required=True)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--scenario", nargs="*", default=[])
    ap.add_argument("--engine-config", nargs="+", default=None, help="configurations to certify, one run each (all)")
    ap.add_argument("--json-dir", default=None, help="write each certificate as FACTORY[-CONFIG].json here")
    args = ap.parse_args()
    from specverify.protocol import engine_configs_of

    adapter = importlib.import_module(f"specverify.adapters.{args.adapter}")
    for factory in args.factory:
        configs = [None]
        if args.engine_config:
            presets, _ = engine_configs_of(getattr(adapter, factory))
            configs = list(presets) if args.engine_config == ["all"] else args.engine_config
        for config in configs:
            run_one(args.adapter, factory, args, config)


if __name__ == "__main__":
    main()
