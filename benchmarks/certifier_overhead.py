"""Certifier overhead: wall time of a certification against the time spent inside the decoder.

    OMP_NUM_THREADS=1 python benchmarks/certifier_overhead.py [--level quick|standard]

Certifies the reference decoder (``specverify.reference:make_decoder``) wrapped so that every ``__call__`` and
``sample`` is timed, in-process (``isolation="none"``: a worker process adds its start, ~4 s, and IPC), and
prints the run's wall time, the decoder's time, and the rest — exact laws, tests, validation, worker start and
IPC — as a share of the decoder's time (#9's goal: < 5 % at standard; #24's: <= 10 %), and the same share over the
sampling scenarios alone, which reach the decoder through its ``sample()`` fast path.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

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


def main() -> None:
    import specverify as sv

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", default="quick")
    args = ap.parse_args()
    started = time.perf_counter()
    cert = sv.certify(timed, level=args.level, isolation="none")
    wall = time.perf_counter() - started
    decoder = SPENT["call"] + SPENT["sample"]
    print(f"level {args.level}: verdict {cert.verdict}; {SPENT['outcomes']} outcomes")
    print(
        f"  wall {wall:.1f} s; inside the decoder {decoder:.1f} s (sample {SPENT['sample']:.1f} s, calls "
        f"{SPENT['call']:.1f} s); certifier {wall - decoder:.1f} s = {100 * (wall - decoder) / decoder:.0f} % of "
        f"the decoder's time"
    )
    print(
        f"  through the protocol: {SPENT['outcomes'] / wall:,.0f} outcomes/s of wall time, "
        f"{SPENT['outcomes'] / decoder:,.0f} outcomes/s inside the decoder"
    )
    sampled = [r for r in cert.scenarios if getattr(r, "kind", None) == "sampling"]
    if sampled and SPENT["sample"] > 0:
        elapsed = sum(r.elapsed_s or 0 for r in sampled)
        print(
            f"  sampling scenarios ({len(sampled)}, the sample() fast path): elapsed {elapsed:.1f} s, inside "
            f"sample() {SPENT['sample']:.1f} s; the rest {elapsed - SPENT['sample']:.1f} s = "
            f"{100 * (elapsed - SPENT['sample']) / SPENT['sample']:.0f} % of sample()'s time"
        )
    slow = sorted(cert.scenarios, key=lambda r: -(r.elapsed_s or 0))[:5]
    print("  slowest scenarios: " + ", ".join(f"{r.name} {r.elapsed_s:.1f} s" for r in slow))


if __name__ == "__main__":
    main()
