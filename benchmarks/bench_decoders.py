"""Outcomes per second of the reference decoders, measured through the protocol the certifier uses.

    python benchmarks/bench_decoders.py [--n 200000] [--repeat 3] [--only speculative] [--before TREE]

Vocab 8, 6 tokens, γ 3: speculative (``decoder.sample``) with processors off and with penalties + top-p + stop
strings on; plain sampling; and the exact-law enumeration (vocab 8 × 6 tokens, every processor on).

``--before TREE`` (a checkout of another commit, e.g. ``git worktree add /tmp/before HEAD~1``) measures that tree
and this one in turn, each in its own process, ``--rounds`` times alternating, and prints each figure's median
for both with the ratio after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def best_rate(fn, n, repeat) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def measure(args) -> dict:
    """{figure: outcomes/s} for the tree first on sys.path (this process's)."""
    import torch

    from specverify import SamplingParams
    from specverify.oracles import draft_near, exact_law, make_vocab, random_target
    from specverify.protocol import Request
    from specverify.reference import make_decoder, sample_plain

    torch.set_num_threads(args.threads)
    vocab = make_vocab(8)
    target = random_target(vocab, seed=3, eos_bias=-1.0)
    draft = draft_near(target, distance=0.5, seed=7)
    decoder = make_decoder(target, draft)
    configs = {
        "processors off": SamplingParams(max_tokens=6),
        "penalties + top-p + stop": SamplingParams(
            max_tokens=6,
            repetition_penalty=1.3,
            frequency_penalty=0.4,
            presence_penalty=0.2,
            top_p=0.9,
            stop=("ab", " b"),
        ),
    }
    rates = {}
    for name, params in configs.items():
        req = Request((0, 1), params, 3, seed=1)
        decoder.sample(req, 1000)  # warm-up: first-touch allocations, torch's lazy init
        rates[f"speculative γ=3, {name}"] = best_rate(lambda: decoder.sample(req, args.n), args.n, args.repeat)
        if args.only != "speculative":
            rates[f"plain, {name}"] = best_rate(lambda: sample_plain(target, req, args.n // 4), args.n // 4, 1)
    if args.only == "speculative":
        return rates
    every = SamplingParams(
        max_tokens=6,
        temperature=0.9,
        top_k=6,
        top_p=0.995,
        min_p=0.001,
        repetition_penalty=1.2,
        frequency_penalty=0.3,
        presence_penalty=0.2,
        stop=("ab", " b"),
        min_tokens=1,
        bad_token_ids=(5,),
    )
    wide = SamplingParams(
        max_tokens=6, temperature=0.9, top_k=7, repetition_penalty=1.2, frequency_penalty=0.3, min_tokens=1
    )
    for name, params in (("every processor on", every), ("penalties + top-k + min_tokens", wide)):
        start = time.perf_counter()
        law = exact_law(target, (0, 1), params)
        rates[f"exact_law vocab 8 × 6 tokens, {name} ({len(law)} outcomes)"] = len(law) / (time.perf_counter() - start)
    return rates


def child_args(args, tree: str) -> list:
    return [
        sys.executable, os.path.abspath(__file__), "--tree", tree, "--json", "--n", str(args.n),
        "--repeat", str(args.repeat), "--threads", str(args.threads), "--only", args.only,
    ]  # fmt: skip


def compare(args) -> None:
    trees = {"before": os.path.abspath(args.before), "after": HERE}
    runs: dict = {"before": [], "after": []}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            out = subprocess.run(child_args(args, tree), capture_output=True, text=True, check=True, cwd=tree)
            runs[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"n = {args.n}, best of {args.repeat} per process, median of {args.rounds} processes per tree, load "
          f"{os.getloadavg()[0]:.1f}; before = {trees['before']}, after = {trees['after']}")  # fmt: skip
    for figure in runs["after"][0]:
        before = statistics.median(r[figure] for r in runs["before"])
        after = statistics.median(r[figure] for r in runs["after"])
        print(f"  {figure:60s} before {before:12,.0f}  after {after:12,.0f} outcomes/s  ratio {after / before:5.2f}")


def main() -> None:
    from _trees import add_tree_arguments, enter_tree  # benchmarks/, first on sys.path as a script

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", choices=("all", "speculative"), default="all")
    add_tree_arguments(ap, rounds=3)
    args = ap.parse_args()
    if args.before:
        return compare(args)
    enter_tree(args)
    rates = measure(args)
    if args.json:
        print(json.dumps(rates))
        return
    print(f"torch threads {args.threads}, n = {args.n}, best of {args.repeat}, load {os.getloadavg()[0]:.1f}")
    for figure, rate in rates.items():
        print(f"  {figure:60s} {rate:12,.0f} outcomes/s")


if __name__ == "__main__":
    main()
