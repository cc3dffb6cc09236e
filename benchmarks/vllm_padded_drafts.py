"""vLLM 0.32 (CPU) "accepts" the scheduler's -1 padding drafts (docs/findings/vllm.md, finding 13): the law of a
turn served from the prefix cache, as shipped, with ``workaround=padded-drafts``, and the two controls.

    .venv-vllm/bin/python benchmarks/vllm_padded_drafts.py [METHOD] [N] [VARIANT,...]

The checkpoint ``multi-turn`` scenario (33-token prompt, temperature 1, ``max_tokens`` 3, γ 3) on one engine: one
request first, so that its first 32-token block is cached, then N seeded requests (seeds 0..N-1, 2 000 per call),
every one a 32-token prefix hit whose step computes one token, which the scheduler pads with γ ``-1`` drafts.
Findings 1 and 8 and the stop-metrics evidence are worked around in every variant (``expand-kernel``,
``min-tokens-bonus``, ``stop-metrics``), so that only finding 13 is left:

- ``shipped``: prefix caching on (vLLM's default), nothing else changed;
- ``patched``: the same with ``padded-drafts`` (``specverify.adapters.vllm.patches.reject_padded_drafts``);
- ``no-cache``: ``enable_prefix_caching=false`` (control: no hit, so no padding);
- ``no-padding``: prefix caching on, the scheduler's padding of one-token requests switched off in this process
  (control: a copy of ``Scheduler.schedule`` whose padding condition never holds; diagnostic only, not a workaround).

Each variant runs in its own process (the workarounds are process-global) and prints one line: the battery at
α 1e-6 over the whole outcome law, the first token's counts against the law's, and the padding the rejection
sampler saw. METHOD defaults to draft_model, N to 30 000, the variants to all four.
"""

from __future__ import annotations

import collections
import inspect
import os
import subprocess
import sys
import textwrap

os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
VARIANTS = ("shipped", "patched", "no-cache", "no-padding")
WORKAROUNDS = ["expand-kernel", "stop-metrics", "min-tokens-bonus"]


def _padding_off() -> None:
    from vllm.v1.core.sched import scheduler

    source = textwrap.dedent(inspect.getsource(scheduler.Scheduler.schedule))
    condition = "and num_new_tokens == 1\n"
    if source.count(condition) != 1:
        raise SystemExit("no-padding: Scheduler.schedule is not vLLM 0.32.0's (its padding condition was not found)")
    namespace: dict = {}
    exec(compile(source.replace(condition, "and num_new_tokens == -1\n"), scheduler.__file__, "exec"),  # noqa: S102
         scheduler.__dict__, namespace)  # fmt: skip
    scheduler.Scheduler.schedule = namespace["schedule"]


def _count_padding(seen: collections.Counter) -> None:
    from vllm.v1.sample import rejection_sampler

    forward = rejection_sampler.RejectionSampler.forward

    def counting(self, metadata, draft_probs, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - vLLM's
        padded = int((metadata.draft_token_ids < 0).sum())
        seen["draft slots"] += int(metadata.draft_token_ids.numel())
        seen["padded slots"] += padded
        seen["padded steps without draft probabilities"] += int(bool(padded) and draft_probs is None)
        return forward(self, metadata, draft_probs, *args, **kwargs)

    rejection_sampler.RejectionSampler.forward = counting


def one(method: str, n: int, variant: str) -> None:
    from specverify.adapters import vllm as va
    from specverify.certification.matrix.checkpoint import configuration_scenarios
    from specverify.certification.matrix.laws import law_of
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.protocol import Request
    from specverify.stats import battery

    if variant == "no-padding":
        _padding_off()
    scenario = configuration_scenarios(SCENARIOS)["multi-turn"]
    pair = scenario.models()
    options = {"workaround": WORKAROUNDS + (["padded-drafts"] if variant == "patched" else [])}
    if variant == "no-cache":
        options["enable_prefix_caching"] = False
    decoder = getattr(va, method)(pair.target, pair.draft, **options)
    decoder([Request(scenario.prompt, scenario.params, 3, seed=10**6)])  # its first block is cached from here on
    seen: collections.Counter = collections.Counter()
    _count_padding(seen)
    out = []
    for start in range(0, n, 2000):
        size = min(2000, n - start)
        out += decoder([Request(scenario.prompt, scenario.params, 3, seed=start + i) for i in range(size)])
    law = law_of(scenario)
    counts = collections.Counter((c.tokens, c.finish_reason) for c in out)
    vec, impossible = law.align(counts)
    result = battery(vec, law.probs, alpha=1e-6, seed=0)
    first: collections.Counter = collections.Counter()
    expected: collections.Counter = collections.Counter()
    for (tokens, _), k in counts.items():
        first[tokens[0]] += k
    for (tokens, _), p in zip(law.outcomes, law.probs):
        expected[tokens[0]] += p * n
    firsts = " ".join(f"{t}:{first[t]}/{expected[t]:.0f}" for t in sorted(expected))
    state = decoder.engine_info["state"]
    print(f"{method} {variant:10s} N={n} passed={result.passed} min p={result.pvalue_min:.3g} "
          f"TV={result.tv.estimate:.4f} impossible={impossible} | first token obs/exp {firsts} | "
          f"prefix hits {state['prefix_hits']} of {state['requests']} requests | {dict(seen)}", flush=True)  # fmt: skip
    decoder.close()


def main(argv: list) -> None:
    method = argv[0] if argv else "draft_model"
    n = int(argv[1]) if len(argv) > 1 else 30000
    variants = argv[2].split(",") if len(argv) > 2 else list(VARIANTS)
    if any(v not in VARIANTS for v in variants) or n < 1:
        raise SystemExit(__doc__)
    if len(variants) == 1:
        one(method, n, variants[0])
        return
    for variant in variants:  # one process each: the workarounds and the no-padding copy are process-global
        subprocess.run([sys.executable, __file__, method, str(n), variant], check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
