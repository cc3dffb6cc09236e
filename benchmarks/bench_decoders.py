"""Outcomes per second of the reference decoders, measured through the protocol the certifier uses.

    python benchmarks/bench_decoders.py [--n 200000] [--repeat 3]

Vocab 8, 6 tokens, γ 3: speculative (``decoder.sample``) with processors off and with penalties + top-p + stop
strings on; plain sampling; and the exact-law enumeration (vocab 8 × 6 tokens, every processor on).
"""

from __future__ import annotations

import argparse
import time

import torch

from specverify import SamplingParams
from specverify.oracles import draft_near, exact_law, make_vocab, random_target
from specverify.protocol import Request
from specverify.reference import make_decoder, sample_plain


def best_rate(fn, n, repeat) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
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
    print(f"torch threads {torch.get_num_threads()}, n = {args.n}, best of {args.repeat}")
    for name, params in configs.items():
        req = Request((0, 1), params, 3, seed=1)
        rate = best_rate(lambda: decoder.sample(req, args.n), args.n, args.repeat)
        print(f"speculative γ=3, {name:26s} {rate:12,.0f} outcomes/s")
        rate = best_rate(lambda: sample_plain(target, req, args.n // 4), args.n // 4, 1)
        print(f"plain,          {name:26s} {rate:12,.0f} outcomes/s")
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
        elapsed = time.perf_counter() - start
        print(
            f"exact_law vocab 8 × 6 tokens, {name:30s}: {len(law):6d} outcomes in {elapsed:5.2f} s "
            f"= {len(law) / elapsed:9,.0f} outcomes/s"
        )


if __name__ == "__main__":
    main()
