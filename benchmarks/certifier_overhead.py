"""Certifier overhead: wall time of a certification against the time spent inside the decoder.

    OMP_NUM_THREADS=1 python benchmarks/certifier_overhead.py [--level quick|standard] [--before TREE --rounds 1]

Certifies the reference decoder (``specverify.reference:make_decoder``) wrapped so that every ``__call__`` and
``sample`` is timed, in-process (``isolation="none"``: a worker process adds its start, ~4 s, and IPC), and
prints the run's wall time, the decoder's time, and the rest — exact laws, tests, validation — as a share of the
decoder's time (#9's goal: < 5 % at standard; #24's: <= 10 %), and the same share over the sampling scenarios
alone, which reach the decoder through its ``sample()`` fast path.

The process first imports torch, scipy.stats and the modules a certification loads (once per process, whatever
the level: ~3.4 s on 2 cores); that time is printed on its own line and not counted as the certifier's, and the
share with it counted is printed beside.

``--before TREE`` (a checkout of another commit, e.g. ``git worktree add /tmp/before HEAD~1``) runs the same
measurement on that tree and on this one, each in its own process, ``--rounds`` times alternating, and prints
both with the median of each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPENT = {"call": 0.0, "sample": 0.0, "outcomes": 0}


class Timed:
    def __init__(self, target, draft):
        from specverify.reference import make_decoder

        self.inner = make_decoder(target, draft)
        self.capabilities = self.inner.capabilities

    def __call__(self, requests):
        started = time.perf_counter()
        try:
            return self.inner(requests)
        finally:
            SPENT["call"] += time.perf_counter() - started
            SPENT["outcomes"] += len(requests)

    def sample(self, request, n, **options):  # options: the protocol's draw offset (``start``) where used
        started = time.perf_counter()
        try:
            return self.inner.sample(request, n, **options)
        finally:
            SPENT["sample"] += time.perf_counter() - started
            SPENT["outcomes"] += n


def timed(target, draft) -> Timed:
    return Timed(target, draft)


def warm_imports() -> float:
    """Import what any certification of the reference loads (seconds taken)."""
    started = time.perf_counter()
    import scipy.stats  # noqa: F401
    import torch  # noqa: F401

    import specverify.certification.checks  # noqa: F401
    import specverify.oracles.acceptance_first  # noqa: F401
    import specverify.oracles.law  # noqa: F401
    import specverify.reference  # noqa: F401
    import specverify.stats  # noqa: F401

    return time.perf_counter() - started


def measure(level: str) -> dict:
    """The figures of one certification at ``level`` in this process (the tree first on sys.path)."""
    import specverify as sv

    imports = warm_imports()
    started = time.perf_counter()
    cert = sv.certify(timed, level=level, isolation="none")
    wall = time.perf_counter() - started
    sampled = [r for r in cert.scenarios if getattr(r, "kind", None) == "sampling"]
    slow = sorted(cert.scenarios, key=lambda r: -(r.elapsed_s or 0))[:5]
    return dict(
        level=level,
        verdict=str(cert.verdict),
        imports=imports,
        wall=wall,
        call=SPENT["call"],
        sample=SPENT["sample"],
        outcomes=SPENT["outcomes"],
        sampled=len(sampled),
        sampled_elapsed=sum(r.elapsed_s or 0 for r in sampled),
        slowest=[(r.name, r.elapsed_s or 0) for r in slow],
    )


def describe(m: dict) -> list:
    decoder = m["call"] + m["sample"]
    rest = m["wall"] - decoder
    lines = [
        f"level {m['level']}: verdict {m['verdict']}; {m['outcomes']} outcomes; imports first {m['imports']:.1f} s",
        f"  wall {m['wall']:.1f} s; inside the decoder {decoder:.1f} s (sample {m['sample']:.1f} s, calls "
        f"{m['call']:.1f} s); certifier {rest:.1f} s = {100 * rest / decoder:.1f} % of the decoder's time "
        f"({100 * (rest + m['imports']) / decoder:.1f} % counting the imports)",
        f"  through the protocol: {m['outcomes'] / m['wall']:,.0f} outcomes/s of wall time, "
        f"{m['outcomes'] / decoder:,.0f} outcomes/s inside the decoder",
    ]
    if m["sampled"] and m["sample"] > 0:
        other = m["sampled_elapsed"] - m["sample"]
        lines.append(
            f"  sampling scenarios ({m['sampled']}, the sample() fast path): elapsed {m['sampled_elapsed']:.1f} s, "
            f"inside sample() {m['sample']:.1f} s; the rest {other:.1f} s = {100 * other / m['sample']:.1f} % of "
            "sample()'s time"
        )
    lines.append("  slowest scenarios: " + ", ".join(f"{name} {s:.1f} s" for name, s in m["slowest"]))
    return lines


def compare(args) -> None:
    trees = {"before": os.path.abspath(args.before), "after": HERE}
    runs: dict = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            cmd = [sys.executable, os.path.abspath(__file__), "--tree", tree, "--json", "--level", args.level]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tree)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{args.rounds} process(es) per tree, alternating; load {os.getloadavg()[0]:.1f} at the end")
    for label, tree in trees.items():
        print(f"{label} ({tree}):")
        for m in runs[label]:
            print("\n".join(describe(m)))
    ratio = {
        label: statistics.median((m["wall"] - m["call"] - m["sample"]) / (m["call"] + m["sample"]) for m in runs[label])
        for label in trees
    }
    print(
        f"median certifier share of the decoder's time: before {100 * ratio['before']:.1f} %, after "
        f"{100 * ratio['after']:.1f} %"
    )


def main() -> None:
    from _trees import add_tree_arguments, enter_tree  # benchmarks/, first on sys.path as a script

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", default="quick")
    add_tree_arguments(ap, rounds=1)
    args = ap.parse_args()
    if args.before:
        return compare(args)
    enter_tree(args)
    figures = measure(args.level)
    if args.json:
        print(json.dumps(figures))
        return
    print("\n".join(describe(figures)))


if __name__ == "__main__":
    main()
