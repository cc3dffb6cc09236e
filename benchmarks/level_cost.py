"""What a level costs on the reference: elapsed, draws and the TV ruled out, before and after a change, in one run.

    python benchmarks/level_cost.py --before /path/to/base/checkout [--seeds 3] [--levels quick standard]

For each checkout (``--before``, and this one as "after") and level, ``specverify certify
specverify.reference:make_decoder --level LEVEL --seed S --isolation none`` runs in a fresh process from the
checkout's root (so it imports that checkout's package), once per seed, interleaved (before, after, before, ...) so
that a load change on a shared machine falls on both. Printed per (checkout, level): the median elapsed wall time
(the process's, imports included), the median draws (every scenario's N), the verdict, the largest detectable TV of
the sampling and mixed scenarios (what the verdict line says the run rules out per scenario; batch composition's
coarser plans apart) and the standard/quick ratio of the elapsed times.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

AFTER = pathlib.Path(__file__).resolve().parents[1]


def run_once(root: pathlib.Path, level: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "cert.json"
        command = [sys.executable, "-m", "specverify", "certify", "specverify.reference:make_decoder", "--level", level,
                   "--seed", str(seed), "--isolation", "none", "--json", str(out)]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(command, cwd=root, check=False, capture_output=True)
        elapsed = time.perf_counter() - started
        cert = json.loads(out.read_text())
    sampling = [s for s in cert["scenarios"] if s.get("kind") in ("sampling", "mixed") and s.get("covered")]
    tvs = [s["detectable_tv"] for s in sampling if s.get("detectable_tv") is not None]
    draws = sum(int(s.get("n") or 0) for s in cert["scenarios"])
    return dict(elapsed=elapsed, draws=draws, verdict=cert["verdict"], tv=max(tvs) if tvs else float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=pathlib.Path, required=True, help="root of the base checkout")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--levels", nargs="+", default=["quick", "standard"])
    args = ap.parse_args()
    roots = {"before": args.before.resolve(), "after": AFTER}
    runs: dict = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for level in args.levels:
            for name, root in roots.items():
                result = run_once(root, level, seed)
                runs.setdefault((name, level), []).append(result)
                print(f"# {name} {level} seed {seed}: {result}", flush=True)
    print(
        f"{'checkout':8s} {'level':9s} {'elapsed s':>9s} {'draws':>9s} {'rules out TV':>12s}  verdicts   ratio to quick"
    )
    for name in roots:
        quick = statistics.median(r["elapsed"] for r in runs.get((name, "quick"), [{"elapsed": float("nan")}]))
        for level in args.levels:
            rows = runs[(name, level)]
            elapsed = statistics.median(r["elapsed"] for r in rows)
            draws = statistics.median(r["draws"] for r in rows)
            tv = max(r["tv"] for r in rows)
            verdicts = ",".join(sorted({r["verdict"] for r in rows}))
            print(f"{name:8s} {level:9s} {elapsed:9.1f} {draws:9.0f} {tv:12.3f}  {verdicts:10s} {elapsed / quick:5.2f}")


if __name__ == "__main__":
    main()
