"""How far each zoo decoder's output law is from the exact law: TV estimates with intervals.

    python benchmarks/zoo_tv.py [--n 200000] [--entries NAME ...] [--jobs 2] [--seed 0]

For every entry of ``specverify.zoo.ZOO`` and each of its showcases (plus ``plain``), it draws n outcomes
through ``decoder.sample`` (seeded request) and prints the plug-in TV to ``exact_law`` minus the plug-in's mean
under the exact law (its null bias), an interval for the true TV (``specverify.stats.tv_estimate``'s noise bound
around the plug-in), and the number of draws whose outcome has exact probability 0 (that mass counts in the TV).
For ``unseeded_shared_stream`` it also prints the collision rate of identical unseeded requests against Σp².
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import torch

from specverify.oracles import exact_law
from specverify.stats import tv_estimate
from specverify.zoo import SHOWCASES, ZOO


def tv_figures(outcomes: dict, law, *, seed: int):
    """(bias-corrected TV, (low, high), zero-probability count) of observed ``outcomes`` against ``law``."""
    n = sum(outcomes.values())
    counts = np.zeros(len(law), dtype=np.int64)
    zero = 0
    for outcome, c in outcomes.items():
        i = law.index(outcome)
        if i < 0:
            zero += c
        else:
            counts[i] += c
    plug_in = 0.5 * (np.abs(counts / n - law.probs).sum() + zero / n)
    noise = tv_estimate(counts, law.probs, seed=seed) if counts.sum() else None
    bias = noise.null_mean if noise else 0.0
    bound = (noise.interval[1] - noise.estimate) if noise else 0.0
    return max(0.0, plug_in - bias), (max(0.0, plug_in - bound), min(1.0, plug_in + bound)), zero


def measure(job):
    name, showcase_name, n, seed = job
    torch.set_num_threads(1)
    showcase = SHOWCASES[showcase_name]
    target, draft = showcase.models()
    decoder = ZOO[name].factory(target, draft, entropy=seed)
    law = exact_law(target, showcase.prompt, showcase.params)
    outcomes = decoder.sample(showcase.request(seed=seed + 1), n).outcomes
    return (name, showcase_name) + tv_figures(outcomes, law, seed=seed)


def collision_line(n: int, seed: int) -> str:
    """Collision rate of disjoint pairs of identical unseeded requests for ``unseeded_shared_stream``."""
    showcase = SHOWCASES["plain"]
    target, draft = showcase.models()
    law = exact_law(target, showcase.prompt, showcase.params)
    decoder = ZOO["unseeded_shared_stream"].factory(target, draft, entropy=seed)
    out = decoder([showcase.request() for _ in range(2 * n)])  # pairs (2i, 2i+1), as docs/design.md's collision test
    outcomes = [(c.tokens, c.finish_reason) for c in out]
    rate = np.mean([outcomes[2 * i] == outcomes[2 * i + 1] for i in range(n)])
    return (
        f"unseeded_shared_stream: collision rate of identical unseeded pairs {rate:.3f} over {n} pairs; "
        f"exact law: Σp² = {float((law.probs**2).sum()):.4f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--entries", nargs="*", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    names = args.entries or [
        n for n, e in ZOO.items() if e.drafts == "ar"
    ]  # family entries: benchmarks/drafts_certify.py
    jobs = [(name, s, args.n, args.seed) for name in names for s in dict.fromkeys(ZOO[name].showcases + ("plain",))]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(measure, jobs))
    print(f"n = {args.n} draws per row, seed {args.seed}; TV = plug-in minus null bias; interval ~95 %")
    print(f"{'entry':32s} {'tag':12s} {'showcase':13s} {'TV':>7s}  {'interval':17s} {'p=0 draws':>9s}")
    for name, showcase, tv, (low, high), zero in rows:
        print(f"{name:32s} {ZOO[name].verdict:12s} {showcase:13s} {tv:7.4f}  [{low:.4f}, {high:.4f}] {zero:9d}")
    if "unseeded_shared_stream" in names:
        print(collision_line(2000, args.seed))


if __name__ == "__main__":
    main()
