"""Finding 15 (docs/findings/vllm.md): under a small step budget (``chunked-prefill``) vLLM verifies about a third of
its rows as if the drafts were point masses. Run from the vLLM venv (one engine per run):

    VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/vllm_budget_fallback.py \
        [SCENARIO] [CONFIGURATION | BUDGET] [missed]   # default: gamma-5 chunked-prefill-unseeded; control:
                                                          # prefix-cache; missed: + the missed-draft-probs workaround

``draft_model`` with the five workarounds of findings 1, 8, 10, 13, 14, 3 000 unseeded requests of the checkpoint
scenario in one call; prints (drafts proposed, drafts scheduled) per scheduled running request, the first round's
accepted drafts (mean and histogram, from vLLM's own ``per_step_accepted``), and the verified rows by how
``GPUModelRunner._get_spec_decode_draft_probs`` answered: with the drafter's cached probabilities, or None (the
whole step judged as point-mass drafts). Counting wrappers only: nothing is scheduled or sampled differently.
"""

from __future__ import annotations

import collections
import sys

N = 3000
FIVE = ["expand-kernel", "stop-metrics", "min-tokens-bonus", "padded-drafts", "padded-draft-probs"]


def main(argv: list) -> None:
    import numpy as np
    from vllm.v1.worker import gpu_model_runner

    from specverify.adapters import vllm as va
    from specverify.certification.matrix.checkpoint import checkpoint_matrix
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.protocol import Request

    name = argv[0] if argv else "gamma-5"
    config = argv[1] if len(argv) > 1 else "chunked-prefill-unseeded"
    if config in va.ENGINE_CONFIGS:
        options = dict(va.ENGINE_CONFIGS[config].options)
    elif config.isdigit():
        options = {"max_num_batched_tokens": int(config), "declare_seed": False}
    else:
        raise SystemExit(f"CONFIGURATION={config!r} must be one of {sorted(va.ENGINE_CONFIGS)} or a step budget")
    scenario = checkpoint_matrix(SCENARIOS)[name]
    pair = scenario.models()
    workaround = FIVE + (["missed-draft-probs"] if argv[2:3] == ["missed"] else [])
    decoder = va.draft_model(pair.target, pair.draft, workaround=workaround, **options)
    llm = decoder.engine(scenario.num_draft_tokens)

    runner, lookups = gpu_model_runner.GPUModelRunner, collections.Counter()
    lookup = runner._get_spec_decode_draft_probs  # the one this engine's start bound

    def counting(self, metadata):  # noqa: ANN001, ANN202 - vLLM's signature
        out = lookup(self, metadata)
        key = "point-mass fallback" if out is None else "drafter's probabilities"
        lookups[key] += int(sum(metadata.num_draft_tokens))
        return out

    runner._get_spec_decode_draft_probs = counting
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    schedule, drafts_seen = scheduler.schedule, collections.Counter()

    def counting_schedule(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - vLLM's signature
        proposed = {r.request_id: len(r.spec_token_ids) for r in scheduler.running}
        out = schedule(*args, **kwargs)
        scheduled = out.scheduled_spec_decode_tokens or {}
        for request_id, n in proposed.items():
            if request_id in out.num_scheduled_tokens:
                drafts_seen[(n, len(scheduled.get(request_id, ())))] += 1
        return out

    scheduler.schedule = counting_schedule
    first: list = []
    generate = llm.generate

    def recording(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        outputs = generate(*args, **kwargs)
        for o in outputs:
            steps = getattr(o.outputs[0].spec_decode_metrics, "per_step_accepted", None) or []
            first.extend(steps[:1])
        return outputs

    llm.generate = recording
    decoder([Request(scenario.prompt, scenario.params, scenario.num_draft_tokens) for _ in range(N)])
    print(f"{name} under {config} ({options}), {N} requests, gamma {scenario.num_draft_tokens}, {workaround}")
    print("  (drafts proposed, drafts scheduled) per scheduled running request:", sorted(drafts_seen.items()))
    hist = np.bincount(first, minlength=scenario.num_draft_tokens + 1)
    print(f"  first round's accepted drafts: mean {np.mean(first):.3f}, histogram {hist.tolist()}")
    print("  verified rows by draft-probability lookup:", dict(lookups))
    print("  state:", decoder.engine_info["state"])
    decoder.close()


if __name__ == "__main__":
    main(sys.argv[1:])
