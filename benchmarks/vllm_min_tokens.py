"""vLLM 0.32 (CPU) masks EOS on the bonus row while min_tokens is unmet by the committed tokens (docs/findings/vllm.md,
finding 8): the counts of that finding, as shipped and with the local bonus-row patch bound by monkeypatching.

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

PATCH = {"on": False}


def install_bonus_row_patch() -> None:
    """Finding 8's local patch: the bonus row of request i is masked while its committed output plus its
    ``num_draft_tokens[i]`` drafts is shorter than min_tokens (``PATCH['on']`` switches it)."""
    import torch
    from vllm.v1.sample import rejection_sampler as rs
    from vllm.v1.sample.logits_processor import builtin

    forward, apply = rs.RejectionSampler.forward, builtin.MinTokensLogitsProcessor.apply

    def patched_forward(self, metadata, draft_probs, logits, sampling_metadata):
        procs = [
            p
            for p in sampling_metadata.logitsprocs.non_argmax_invariant
            if isinstance(p, builtin.MinTokensLogitsProcessor)
        ]
        for p in procs:
            p.bonus_offsets = metadata.num_draft_tokens if PATCH["on"] else None
        try:
            return forward(self, metadata, draft_probs, logits, sampling_metadata)
        finally:
            for p in procs:
                p.bonus_offsets = None

    def patched_apply(self, logits):
        offsets = getattr(self, "bonus_offsets", None)
        if offsets is None or not self.min_toks:
            return apply(self, logits)
        rows, toks = [], []
        for req, (min_tok, out, stops, _) in self.min_toks.items():
            if len(out) + offsets[req] < min_tok:
                rows += [req] * len(stops)
                toks += list(stops)
        if rows:
            logits[torch.tensor(rows), torch.tensor(toks)] = float("-inf")
        return logits

    rs.RejectionSampler.forward, builtin.MinTokensLogitsProcessor.apply = patched_forward, patched_apply


def greedy(methods: list) -> None:
    from specverify.adapters import vllm as va
    from specverify.certification.checks.greedy import _prompts
    from specverify.certification.checks.judge import MIN_MARGIN
    from specverify.certification.matrix_checkpoint import CHECKPOINT_PAIRS, checkpoint_matrix
    from specverify.certification.scenarios import SCENARIOS
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
        decoder = getattr(va, method)(pair.target, pair.draft)
        for gamma in (0,) if method == "plain" else (1, 2, 3):
            for min_tokens, (params, prompts, want) in variants.items():
                for on in (False, True):
                    PATCH["on"] = on
                    got = decoder([Request(p, params, max(gamma, 1)) for p in prompts])
                    bad = [(list(p), list(c.tokens), list(w[0])) for p, c, w in zip(prompts, got, want)
                           if (c.tokens, c.finish_reason) != w]  # fmt: skip
                    print(f"{method} γ{gamma} min_tokens {min_tokens} patch {'on ' if on else 'off'}: "
                          f"{len(bad)} of {len(prompts)} wrong {bad[:2]}", flush=True)  # fmt: skip
        decoder.close()


def law(methods: list, n: int) -> None:
    from specverify.adapters import vllm as va
    from specverify.certification.matrix_checkpoint import checkpoint_matrix
    from specverify.certification.scenarios import SCENARIOS
    from specverify.oracles.law import exact_law
    from specverify.protocol import Request
    from specverify.stats import battery

    scenario = checkpoint_matrix(SCENARIOS)["min-tokens"]
    pair = scenario.pair.build()
    exact = exact_law(pair.target, scenario.prompt, scenario.params)
    for method in methods:
        options = {} if method == "plain" else {"workaround": "expand-kernel"}
        decoder = getattr(va, method)(pair.target, pair.draft, **options)
        for gamma in (1,) if method == "plain" else (1, 3):
            for on in (False, True):
                PATCH["on"] = on
                out = decoder([Request(scenario.prompt, scenario.params, gamma) for _ in range(n)])
                vec, impossible = exact.align(collections.Counter((c.tokens, c.finish_reason) for c in out))
                r = battery(vec, exact.probs, alpha=1e-6, seed=0)
                print(f"{method} γ{gamma} patch {'on ' if on else 'off'}: passed={r.passed} min p={r.pvalue_min:.3g} "
                      f"TV={r.tv.estimate:.3f} impossible={impossible}", flush=True)  # fmt: skip
        decoder.close()


def main(argv: list) -> None:
    if not argv or argv[0] not in ("greedy", "law"):
        raise SystemExit(__doc__)
    install_bonus_row_patch()
    if argv[0] == "greedy":
        greedy((argv[1] if len(argv) > 1 else "ngram,draft_model_greedy,plain").split(","))
    else:
        law(
            (argv[1] if len(argv) > 1 else "draft_model,ngram,plain").split(","),
            int(argv[2]) if len(argv) > 2 else 3000,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
