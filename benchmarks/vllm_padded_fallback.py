"""Finding 14 (docs/findings/vllm.md): how many verification rows vLLM judges as one-hot drafts because a padded request
in the same step has no cached draft probabilities. Run from the vLLM venv (one engine per scenario):

    VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/vllm_padded_fallback.py
    ... benchmarks/vllm_padded_fallback.py '{"enable_prefix_caching": false}'      # the control: no hits, no padding
    ... benchmarks/vllm_padded_fallback.py '{"workaround": ["expand-kernel", "stop-metrics", "min-tokens-bonus",
        "padded-drafts", "padded-draft-probs"]}'                                      # finding 14 worked around

For ``long-prompt`` (turn 1) and ``multi-turn`` (turn 2: a 32-token prefix hit, padded with ``-1`` drafts), one
warm-up request and then N seeded requests in one call (``draft_model``, the four workarounds, engine options from
the JSON argument; its ``workaround`` replaces the four); prints the verification steps, the rows verified, the rows
verified under vLLM's "missing cached draft probabilities" fallback (``GPUModelRunner._get_spec_decode_draft_probs``
returning None: the whole batch judged as point-mass drafts), the adapter's padding evidence and the accepted drafts
per real round.
"""

from __future__ import annotations

import collections
import json
import sys

N = 2000
WORKAROUNDS = ["expand-kernel", "stop-metrics", "min-tokens-bonus", "padded-drafts"]


def main(argv: list) -> None:
    from vllm.v1.worker import gpu_model_runner

    from specverify.adapters import vllm as va
    from specverify.certification.matrix.checkpoint import configuration_scenarios
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.protocol import Request

    options = json.loads(argv[0]) if argv else {}
    workaround = options.pop("workaround", WORKAROUNDS)
    tally: collections.Counter = collections.Counter()
    runner = gpu_model_runner.GPUModelRunner

    def counting(lookup):  # the lookup an engine start bound (vLLM's own, or the padded-draft-probs workaround)
        def counted(self, metadata):  # noqa: ANN001, ANN202 - vLLM's signature
            out = lookup(self, metadata)
            rows = sum(1 for k in metadata.num_draft_tokens if k)
            tally["steps"] += 1
            tally["rows"] += rows
            if out is None:
                tally["fallback_steps"] += 1
                tally["fallback_rows"] += rows
            return out

        return counted

    scenarios = configuration_scenarios(SCENARIOS)
    for name in ("long-prompt", "multi-turn"):
        scenario = scenarios[name]
        pair = scenario.models()
        decoder = va.draft_model(pair.target, pair.draft, workaround=workaround, **options)
        bound = None
        try:
            decoder([Request(scenario.prompt, scenario.params, 3, seed=10**6)])  # starts the engine: binds the lookup
            bound = runner._get_spec_decode_draft_probs
            runner._get_spec_decode_draft_probs = counting(bound)
            tally.clear()
            out = decoder([Request(scenario.prompt, scenario.params, 3, seed=i) for i in range(N)])
            state = {k: v for k, v in decoder.engine_info["state"].items() if v}
        finally:
            if bound is not None:
                runner._get_spec_decode_draft_probs = bound
            decoder.close()
        rounds = sum(len(c.accepted) for c in out)
        accepted = sum(sum(c.accepted) for c in out)
        print(f"{name}: {dict(tally)}; state {state}; real rounds {rounds}, accepted per round {accepted / rounds:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
