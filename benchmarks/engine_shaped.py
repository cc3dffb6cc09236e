"""What a certification costs an engine, per factory: elapsed, draws, decoder calls and the TV the run rules out,
before and after a change, in one run.

    python benchmarks/engine_shaped.py [--before /path/to/base/checkout] [--level standard] [--models toy]
        [--seeds 1] [--scenario NAME ...] [--json-dir DIR] FACTORY[@CONFIG] [FACTORY[@CONFIG] ...]

Each ``FACTORY`` (``module:attr``, default ``specverify.reference:make_decoder``) is certified in a fresh process
per checkout (``--before`` and this one as "after", interleaved per seed so a load change on a shared machine falls on
both), in-process (``--isolation none``), with ``@CONFIG`` its ``--engine-config`` (e.g.
``specverify.adapters.vllm:draft_model@patched``). The factory is wrapped by a counter that forwards every attribute
and counts what the certifier asks of each decoder it makes: calls (and how many of them hold one or two requests),
requests, ``sample()`` calls and their draws, and the decoders made (one per model pair when the certifier keeps
them alive). Printed per (factory, checkout): the verdict, the median elapsed wall time of the certification (the
imports apart), the draws (every scenario's N), the calls, calls of one or two requests, requests, the engine starts
a decoder reports (``engine_start_s``: vLLM's), the decoders made, the largest detectable TV of the sampling and
mixed scenarios (what the verdict line says is ruled out per scenario) and batch composition's seconds and calls.

vLLM (from the vLLM venv, after taking the engine lock; ``--models checkpoint`` is what the adapter runs):

    flock /tmp/engine.lock .venv-vllm/bin/python benchmarks/engine_shaped.py --before BASE --models checkpoint \\
        --level standard specverify.adapters.vllm:draft_model@patched specverify.adapters.vllm:plain
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from collections import Counter

AFTER = pathlib.Path(__file__).resolve().parents[1]


class _CountingDecoder:
    """Forwards everything to ``decoder``; counts calls by size and ``sample`` draws into ``counts``."""

    def __init__(self, decoder, counts: Counter):
        self._decoder, self._counts = decoder, counts

    def __call__(self, requests):
        requests = list(requests)
        size = len(requests)
        self._counts["calls"] += 1
        self._counts["requests"] += size
        self._counts["small_calls"] += size <= 2
        self._counts[f"calls_of_{min(size, 3)}"] += 1
        self._counts["composition_calls" if _in_composition() else "other_calls"] += 1
        return self._decoder(requests)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_decoder", "_counts"):  # copies and pickles: not forwarded
            raise AttributeError(name)
        attr = getattr(self._decoder, name)
        if name == "sample" and callable(attr):

            def sample(request, n, *args, **kwargs):
                self._counts["sample_calls"] += 1
                self._counts["sample_draws"] += n
                return attr(request, n, *args, **kwargs)

            import functools

            return functools.wraps(attr)(sample)
        return attr


_SCENARIO = [""]


def _in_composition() -> bool:
    return _SCENARIO[0] == "batch-composition"


class CountingFactory:
    """``factory`` with every decoder it makes wrapped in :class:`_CountingDecoder`; its declarations (engine
    configurations, default level, checkpoint pairs) forwarded."""

    def __init__(self, factory):
        self._factory = factory
        self.counts: Counter = Counter()
        self.made: list = []

    def __call__(self, target, draft, **options):
        decoder = self._factory(target, draft, **options)
        self.made.append(decoder)
        self.counts["decoders_made"] += 1
        return _CountingDecoder(decoder, self.counts)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_factory", "counts", "made"):
            raise AttributeError(name)
        return getattr(self._factory, name)


def one(spec: str, level: str, models: str, seed: int, scenarios: list, json_out) -> dict:
    """Certify ``spec`` (``module:attr[@config]``) here; the figures as a dict."""
    import specverify
    from specverify.certification.run.factory import resolve_factory

    name, _, config = spec.partition("@")
    factory = CountingFactory(resolve_factory(name))

    def progress(line: str) -> None:  # "specverify: [3/44] batch-composition (elapsed ...)"
        head = line.split("] ", 1)[-1]
        if config and head.startswith(f"{config}: "):
            head = head[len(config) + 2 :]
        if not head.endswith(" draws"):  # a long draw's progress line keeps its scenario
            _SCENARIO[0] = head.split(" ", 1)[0].rstrip(":")

    options = dict(level=level, models=models, seed=seed, isolation="none")
    if config:
        options["engine_config"] = config
    if scenarios:
        options["scenarios"] = scenarios
    started = time.perf_counter()
    cert = specverify.certify(factory, progress=progress, **options)
    elapsed = time.perf_counter() - started
    data = cert.to_dict()
    if json_out:  # the certificate document `specverify report` reads (kind and schema version included)
        from specverify.report import render_json

        pathlib.Path(json_out).write_text(render_json(cert))
    rows = data["scenarios"]
    tvs = [r["detectable_tv"] for r in rows if r.get("kind") in ("sampling", "mixed") and r.get("covered")
           and r.get("detectable_tv") is not None]  # fmt: skip
    composition = [r for r in rows if r.get("scenario") == "batch-composition"]
    starts = sum(len(getattr(d, "engine_start_s", ()) or ()) for d in factory.made)
    return dict(
        factory=spec, verdict=data["verdict"], elapsed=elapsed, draws=sum(int(r.get("n") or 0) for r in rows),
        tv=max(tvs) if tvs else float("nan"), engine_starts=starts,
        composition_s=max((r.get("elapsed_s") or 0.0 for r in composition), default=0.0),
        composition_n={r.get("member"): r.get("n") for r in composition}, package=specverify.__file__,
        **factory.counts,
    )  # fmt: skip


def run_in(root: pathlib.Path, spec: str, args, seed: int) -> dict:
    """:func:`one` in a fresh process that imports ``root``'s package."""
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--one", spec, "--level", args.level,
               "--models", args.models, "--first-seed", str(seed)]  # fmt: skip
    for name in args.scenario or ():
        command += ["--scenario", name]
    if args.json_dir:
        tag = "before" if root != AFTER else "after"
        command += ["--json", str(pathlib.Path(args.json_dir) / f"{spec.replace(':', '.')}-{tag}-{seed}.json")]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"{' '.join(command)} (in {root}) failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


COLUMNS = ("verdict", "elapsed", "draws", "calls", "small_calls", "requests", "sample_calls", "engine_starts",
           "decoders_made", "tv", "composition_s", "composition_calls")  # fmt: skip


def table(runs: dict) -> str:
    head = f"{'factory':44s} {'tree':6s} " + " ".join(f"{c:>13s}" for c in COLUMNS)
    out = [head]
    for (spec, tree), rows in runs.items():
        cells = []
        for c in COLUMNS:
            values = [r.get(c, 0) for r in rows]
            if c == "verdict":
                cells.append(f"{','.join(sorted(set(values))):>13s}")
            elif c == "tv":
                cells.append(f"{max(values):13.3f}")
            elif c in ("elapsed", "composition_s"):
                cells.append(f"{statistics.median(values):13.1f}")
            else:
                cells.append(f"{statistics.median(values):13.0f}")
        out.append(f"{spec:44s} {tree:6s} " + " ".join(cells))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("factories", nargs="*", default=["specverify.reference:make_decoder"])
    ap.add_argument("--before", type=pathlib.Path, help="root of the base checkout (left out: this one only)")
    ap.add_argument("--level", default="standard")
    ap.add_argument("--models", default="toy")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--scenario", action="append", help="certify only these scenarios (repeatable)")
    ap.add_argument("--json-dir", help="write each certificate there")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.level, args.models, args.first_seed, args.scenario, args.json)))
        return
    if args.json_dir:  # made now: a run of many minutes must not end on a missing folder (it did once: 835 s lost)
        pathlib.Path(args.json_dir).mkdir(parents=True, exist_ok=True)
    roots = {"after": AFTER} if args.before is None else {"before": args.before.resolve(), "after": AFTER}
    runs: dict = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for spec in args.factories:
            for tree, root in roots.items():
                result = run_in(root, spec, args, seed)
                runs.setdefault((spec, tree), []).append(result)
                print(f"# {tree} seed {seed}: {json.dumps(result)}", flush=True)
    print(table(runs))


if __name__ == "__main__":
    main()
