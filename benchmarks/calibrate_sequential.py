"""Certificate-level calibration of sequential looks (the default look rule): how often is an exact decoder failed?

    python benchmarks/calibrate_sequential.py --out build/calib-seq.jsonl              # all 300, resumable
    python benchmarks/calibrate_sequential.py --out build/calib-seq.jsonl --part 2/4   # a quarter of them
    python benchmarks/calibrate_sequential.py --out build/calib-seq.jsonl --table      # the table of what is done

Certifies two exact decoders — the reference through its ``sample()`` fast path, and the same reference with
``sample`` hidden, so every draw goes through ``__call__`` (the slow path) — on the core scenarios at level quick,
in-process, at family α (default 0.05, where false alarms are frequent enough to count), 150 seeds of our own
each (70000 + i; the issue's examples used 70004). Each certification is one JSON line in ``--out``; a rerun skips
the (decoder, seed) pairs already there, so the run can be split with ``--part I/N`` and resumed after a kill.

The table: per decoder and in total, certifications, how many were not ``exact`` (false alarms), the rate with its
Clopper–Pearson 95 % interval (calibrated: α inside it or above it), the mean N per scenario, how many scenarios
stopped at an early pass / held back by the p-value floor / at the last look, how many stopped at a rejecting look,
how many failed under Holm, and the consistency count: results that failed under Holm while their note called them
a pass (must be 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

DECODERS = ("reference", "slow-path")
CORE = ("temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy")


class _SlowPath:
    """The reference decoder without its ``sample`` fast path: the certifier draws through ``__call__``."""

    def __init__(self, target, draft):
        from specverify.reference import make_decoder

        self._inner = make_decoder(target, draft)
        self.capabilities = self._inner.capabilities

    def __call__(self, requests):
        return self._inner(requests)


def slow_path(target, draft) -> _SlowPath:
    return _SlowPath(target, draft)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple:
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf((1 - level) / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - (1 - level) / 2, k + 1, n - k))
    return lo, hi


def _part(text: str) -> tuple:
    i, n = (int(x) for x in text.split("/"))
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--part {text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return i, n


def _done(path: str) -> dict:
    seen = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    seen[(row["decoder"], row["seed"])] = row
    return seen


def certify_one(decoder: str, seed: int, alpha: float, level: str) -> dict:
    import specverify as sv

    factory = "specverify.reference:make_decoder" if decoder == "reference" else slow_path
    started = time.perf_counter()
    cert = sv.certify(factory, level=level, seed=seed, alpha=alpha, scenarios=list(CORE), isolation="none")
    rows = []
    for s in cert.scenarios:
        if s.kind != "sampling":
            continue
        note = s.note or ""
        rows.append(
            dict(name=s.name, passed=s.passed, n=s.n, pvalue=s.pvalue, note=note,
                 early="early pass" in note, held="held back" in note, last="last look" in note)
        )  # fmt: skip
    return dict(
        decoder=decoder, seed=seed, alpha=alpha, level=level, verdict=str(cert.verdict),
        elapsed_s=time.perf_counter() - started, scenarios=rows,
    )  # fmt: skip


def table(rows: list, alpha: float) -> None:
    print(f"{'decoder':<11} {'certs':>5} {'not exact':>9} {'rate':>6} {'95 % interval':>17} {'mean N':>8} "
          f"{'early':>6} {'held':>5} {'last':>5} {'reject':>6} {'failed':>6} "
          f"{'contradictions':>14} {'s/cert':>6}")  # fmt: skip
    groups = collections.defaultdict(list)
    for r in rows:
        groups[r["decoder"]].append(r)
    groups["all"] = list(rows)
    for name in (*DECODERS, "all"):
        got = groups.get(name) or []
        if not got:
            continue
        bad = sum(r["verdict"] != "exact" for r in got)
        lo, hi = clopper_pearson(bad, len(got))
        sc = [s for r in got for s in r["scenarios"]]
        contradictions = sum(1 for s in sc if s["passed"] is False and "pass" in s["note"] and "held" not in s["note"])
        print(
            f"{name:<11} {len(got):>5} {bad:>9} {bad / len(got):>6.3f} [{lo:.3f}, {hi:.3f}]{'':>3} "
            f"{sum(s['n'] for s in sc) / max(len(sc), 1):>8.0f} {sum(s['early'] for s in sc):>6} "
            f"{sum(s['held'] for s in sc):>5} {sum(s['last'] for s in sc):>5} "
            f"{sum(s['note'].startswith('sequential: reject') for s in sc):>6} "
            f"{sum(s['passed'] is False for s in sc):>6} {contradictions:>14} "
            f"{sum(r['elapsed_s'] for r in got) / len(got):>6.2f}"
        )
    fails = collections.Counter(s["name"] for r in rows for s in r["scenarios"] if s["passed"] is False)
    print(f"α = {alpha:g}; calibrated when α lies inside the interval or above it. Failing scenarios: {dict(fails)}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON-lines file of results (appended; reruns resume)")
    ap.add_argument("--seeds", type=int, default=150, help="seeds per decoder (default 150: 300 certifications)")
    ap.add_argument("--first-seed", type=int, default=70000)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--level", default="quick")
    ap.add_argument("--decoders", default=",".join(DECODERS), help=f"comma-separated, among {DECODERS}")
    ap.add_argument("--part", type=_part, default=(1, 1), help="run only part I of N of the (decoder, seed) list")
    ap.add_argument("--table", action="store_true", help="print the table of what --out holds and stop")
    args = ap.parse_args(argv)
    decoders = [d for d in args.decoders.split(",") if d]
    unknown = [d for d in decoders if d not in DECODERS]
    if unknown:
        ap.error(f"--decoders: unknown {unknown}; choose among {DECODERS}")
    done = _done(args.out)
    if not args.table:
        todo = [(d, args.first_seed + i) for i in range(args.seeds) for d in decoders]
        i, n = args.part
        todo = [key for k, key in enumerate(todo) if k % n == i - 1 and key not in done]
        print(f"{len(todo)} certifications to run ({len(done)} already in {args.out})", flush=True)
        for decoder, seed in todo:
            row = certify_one(decoder, seed, args.alpha, args.level)
            with open(args.out, "a") as f:  # one line per certification: a kill loses at most the one running
                f.write(json.dumps(row) + "\n")
            done[(decoder, seed)] = row
            print(f"{decoder} seed {seed}: {row['verdict']} ({row['elapsed_s']:.1f} s)", flush=True)
    rows = [r for r in done.values() if r["alpha"] == args.alpha and r["level"] == args.level]
    table(rows, args.alpha)


if __name__ == "__main__":
    main()
