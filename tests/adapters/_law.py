"""What the engine tests of ONNX Runtime GenAI and OpenVINO GenAI share: a small law check at temperature 1 and
greedy equality on the main checkpoint pair, against the oracle (``exact_law``, ``greedy_outcome``)."""

import collections

import numpy as np

from specverify.params import SamplingParams
from specverify.protocol import Request


def law_check(decoder, pair, n, gamma=3, seed=None, prompt=(0, 1)):
    """(the battery's result at α 1e-6, outcomes of probability 0, the completions) for ``n`` draws of ``prompt`` at
    temperature 1, ``max_tokens`` 3; seeded requests ``seed + i`` when ``seed`` is given."""
    from specverify.oracles.law import exact_law
    from specverify.stats import battery

    params = SamplingParams(temperature=1.0, max_tokens=3)
    law = exact_law(pair.target, prompt, params)
    seeds = [None] * n if seed is None else [seed + i for i in range(n)]
    out = decoder([Request(prompt, params, gamma, seed=s) for s in seeds])
    vec, impossible = law.align(collections.Counter((c.tokens, c.finish_reason) for c in out))
    return battery(vec, law.probs, alpha=1e-6, seed=0), impossible, out


def greedy_mismatches(decoder, pair):
    """Prompts whose temperature-0 completion differs from the oracle's greedy outcome (20 seeded prompts)."""
    from specverify.oracles.law import greedy_outcome

    rng = np.random.default_rng(7)
    prompts = [tuple(int(t) for t in rng.integers(0, 5, size=int(rng.integers(1, 6)))) for _ in range(20)]
    params = SamplingParams(temperature=0.0, max_tokens=5)
    got = decoder([Request(p, params, 2 + i % 2) for i, p in enumerate(prompts)])
    want = [greedy_outcome(pair.target, p, params) for p in prompts]
    return [
        (p, (c.tokens, c.finish_reason), w) for p, c, w in zip(prompts, got, want) if (c.tokens, c.finish_reason) != w
    ]
