"""Draws per second of the transformers adapter's ``sample()`` in this process against its worker processes.

    OMP_NUM_THREADS=1 python benchmarks/transformers_sample_rate.py [--factory assisted] [--n 600] [--repeat 3]
        [--workers 0 2]

One seeded request shaped like the quick ``temperature-1`` scenario (checkpoint pair "main", prompt (0, 1),
``max_tokens`` 3, γ 3), ``sample(request, n, start)`` timed ``--repeat`` times for each ``--workers`` value,
alternating (A, B, A, B, ...) so that a change in the machine's load falls on both; the workers' start-up is paid
before the first timed call. Prints the load, each median draws/s and the ratio to the first ``--workers`` value,
and checks that every setting drew the same counts for the same (seed, start) (the law of a draw does not depend
on the worker: ``specverify/adapters/draw_pool.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--factory", default="assisted", choices=("assisted", "prompt_lookup", "plain"))
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = ap.parse_args()

    from specverify.adapters import transformers as tfa
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
    from specverify.params import SamplingParams
    from specverify.protocol import Request

    pair = CHECKPOINT_PAIRS["main"].build()
    request = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=3), num_draft_tokens=3, seed=2024)
    decoders = {w: getattr(tfa, args.factory)(pair.target, pair.draft, workers=w) for w in args.workers}
    for decoder in decoders.values():
        decoder.sample(request, 8)  # start-up (worker processes, first forward) outside the timed calls
    rates, counts = {w: [] for w in args.workers}, {}
    print(f"load before {os.getloadavg()[0]:.2f}", flush=True)
    for i in range(args.repeat):
        for w, decoder in decoders.items():
            began = time.perf_counter()
            got = decoder.sample(request, args.n, start=i * args.n)
            rates[w].append(args.n / (time.perf_counter() - began))
            counts.setdefault(i, []).append(got.outcomes)
    print(f"load after {os.getloadavg()[0]:.2f}")
    base = statistics.median(rates[args.workers[0]])
    for w in args.workers:
        median = statistics.median(rates[w])
        spread = ", ".join(f"{r:.1f}" for r in rates[w])
        print(f"{args.factory} workers={w}: {median:.1f} draws/s (runs {spread}), x{median / base:.2f}")
    same = all(all(c == outs[0] for c in outs) for outs in counts.values())
    print(f"same counts for the same (seed, start) in every setting: {same}")
    for decoder in decoders.values():
        decoder.close()


if __name__ == "__main__":
    main()
