"""vLLM 0.32 (CPU) masks EOS on the bonus row while min_tokens is unmet by the committed tokens (docs/findings/vllm.md,
finding 8): the counts of that finding, as shipped and with the adapter's ``workaround=min-tokens-bonus``.

    .venv-vllm/bin/python benchmarks/vllm_min_tokens.py greedy [METHOD,...]   # wrong greedy outputs per γ, min_tokens
    .venv-vllm/bin/python benchmarks/vllm_min_tokens.py law [METHOD,...] [N]  # the min-tokens scenario's law, γ 1 and 3

``greedy``: the ``greedy-masks`` scenario's own prompts (seed 0, the greedy check's margin rule) on the far-eos pair,
``min_tokens`` 0, 2 and 3, one γ per row (default methods ngram, draft_model_greedy, plain). ``law``: the checkpoint
``min-tokens`` scenario at temperature 1, N draws (default 3000), battery at α 1e-6, finding 1 worked around with
``workaround=expand-kernel`` (default methods draft_model, ngram, plain). Each row prints as it finishes.
"""

from __future__ import annotations

import collections
import os
import sys
import types
from dataclasses import replace

os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind")


def greedy(methods: list) -> None:
    from specverify.adapters import vllm as va
    from specverify.certification.checks.greedy import _prompts
    from specverify.certification.checks.judge import MIN_MARGIN
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, checkpoint_matrix
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.oracles.law import boundary_margin, greedy_outcome
    from specverify.protocol import Request

    scenario = checkpoint_matrix(SCENARIOS)["greedy-masks"]
    pair = CHECKPOINT_PAIRS["far-eos"].build()
    base = _prompts(types.SimpleNamespace(seed=0), scenario, pair.target)
    variants = {}
    for min_tokens in (0, 2, 3):
        params = replace(scenario.params, min_tokens=min_tokens)
        prompts = [p for p in base if boundary_margin(pair.target, p, params) >= MIN_MARGIN]
        variants[min_tokens] = (params, prompts, [greedy_outcome(pair.target, p, params) for p in prompts])
    for method in methods:
        for on in (False, True):  # vLLM as shipped, then with the adapter's workaround (one setting per process)
            decoder = getattr(va, method)(pair.target, pair.draft, workaround="min-tokens-bonus" if on else None)
            for gamma in (0,) if method == "plain" else (1, 2, 3):
                for min_tokens, (params, prompts, want) in variants.items():
                    got = decoder([Request(p, params, max(gamma, 1)) for p in prompts])
                    bad = [(list(p), list(c.tokens), list(w[0])) for p, c, w in zip(prompts, got, want)
                           if (c.tokens, c.finish_reason) != w]  # fmt: skip
                    print(f"{method} γ{gamma} min_tokens {min_tokens} patch {'on ' if on else 'off'}: "
                          f"{len(bad)} of {len(prompts)} wrong {bad[:2]}", flush=True)  # fmt: skip
            decoder.close()


def law(methods: list, n: int) -> None:
    from specverify.adapters import vllm as va
    from specverify.certification.matrix.checkpoint import checkpoint_matrix
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.oracles.law import exact_law
    from specverify.protocol import Request
    from specverify.stats import battery

    scenario = checkpoint_matrix(SCENARIOS)["min-tokens"]
    pair = scenario.pair.build()
    exact = exact_law(pair.target, scenario.prompt, scenario.params)
    for method in methods:
        for on in (False, True):
            names = ([] if method == "plain" else ["expand-kernel"]) + (["min-tokens-bonus"] if on else [])
            decoder = getattr(va, method)(pair.target, pair.draft, workaround=names or None)
            for gamma in (1,) if method == "plain" else (1, 3):
                out = decoder([Request(scenario.prompt, scenario.params, gamma) for _ in range(n)])
                vec, impossible = exact.align(collections.Counter((c.tokens, c.finish_reason) for c in out))
                r = battery(vec, exact.probs, alpha=1e-6, seed=0)
                print(f"{method} γ{gamma} patch {'on ' if on else 'off'}: passed={r.passed} min p={r.pvalue_min:.3g} "
                      f"TV={r.tv.estimate:.3f} impossible={impossible}", flush=True)  # fmt: skip
            decoder.close()


def main(argv: list) -> None:
    if not argv or argv[0] not in ("greedy", "law"):
        raise SystemExit(__doc__)
    if argv[0] == "greedy":
        greedy((argv[1] if len(argv) > 1 else "ngram,draft_model_greedy,plain").split(","))
    else:
        law(
            (argv[1] if len(argv) > 1 else "draft_model,ngram,plain").split(","),
            int(argv[2]) if len(argv) > 2 else 3000,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
