"""Standalone reproducers of OpenVINO GenAI's findings 2, 3 and 5 and of note 4 (docs/findings/openvino.md), with the
controls that tell the mechanisms apart. Run in the engine's venv (.ci/openvino makes it):

    SPECVERIFY_OPTIMUM_CLI=.venv-ovconvert/bin/optimum-cli .venv-openvino/bin/python benchmarks/openvino_findings.py \
        [--only 2 3 4 5 repro]

Only the models come from specverify (the main checkpoint pair, and the far-eos pair for finding 5, converted to IR
by ``adapters.openvino.export``); every call below is openvino_genai's own API with token ids in and out, so each
block can go into a bug report with the two IR folders attached. Prints one line per case.
"""

from __future__ import annotations

import argparse
import collections
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

F32 = {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "f32"}
CHUNK = 512  # requests per ContinuousBatchingPipeline.generate(), as the adapter sends them


def models(name="main"):
    from specverify.adapters.openvino.export import model_dir
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    pair = CHECKPOINT_PAIRS[name].build()
    return str(model_dir(pair.target)), str(model_dir(pair.draft)), int(pair.target.vocab.eos_token_id)


def scheduler(og, caching, budget=None):
    config = og.SchedulerConfig()
    config.enable_prefix_caching, config.cache_size = caching, 1
    if budget is not None:
        config.max_num_batched_tokens = budget
    return config


def generation(og, eos, max_new, sample, seed, gamma=3, threshold=None):
    config = og.GenerationConfig()
    config.max_new_tokens, config.do_sample, config.rng_seed, config.eos_token_id = max_new, sample, seed, eos
    if threshold is None:
        config.num_assistant_tokens = gamma
    else:
        config.assistant_confidence_threshold = threshold
    return config


def ids(prompt):
    import numpy as np
    import openvino as ov

    return ov.Tensor(np.array([list(prompt)], dtype=np.int64))


def finding_2(og, target, draft, eos):
    """The assertion under sampling with prefix caching, and the controls that never take the rejection branch."""
    cases = [
        ("greedy, gamma 3, max_new_tokens 4", 4, False, 3, draft),
        ("sampling, max_new_tokens 2 (the draft never proposes)", 2, True, 3, draft),
        ("sampling, gamma 1, max_new_tokens 4", 4, True, 1, draft),
        ("sampling, gamma 3, max_new_tokens 4", 4, True, 3, draft),
        ("sampling, gamma 3, max_new_tokens 3 (one candidate a round)", 3, True, 3, draft),
        ("sampling, draft = target, gamma 3, max_new_tokens 4", 4, True, 3, target),
    ]
    for label, max_new, sample, gamma, model in cases:
        pipe = og.LLMPipeline(
            target, "CPU", draft_model=og.draft_model(model, "CPU", **F32), scheduler_config=scheduler(og, True), **F32
        )
        failed = None
        for seed in range(200):
            try:
                pipe.generate(ids((0, 1, 2)), generation(og, eos, max_new, sample, seed, gamma))
            except RuntimeError as exc:
                failed = (seed + 1, "content_length <= prompt_ids.size()" in str(exc))
                break
        shown = "200 requests, no error" if failed is None else f"RuntimeError at request {failed[0]} ({failed[1]})"
        print(f"finding 2, prefix caching on, prompt (0, 1, 2), {label}: {shown}")


def cb_pipe(og, target, draft, budget=None):
    props = dict(F32)
    if draft is not None:
        props["draft_model"] = og.draft_model(draft, "CPU", **F32)
    return og.ContinuousBatchingPipeline(target, scheduler(og, False, budget), "CPU", props)


def cb_run(og, pipe, eos, prompt, n, sample, seed0=11):
    out = []
    for start in range(0, n, CHUNK):
        k = min(CHUNK, n - start)
        configs = [generation(og, eos, 3, sample, seed0 + start + i) for i in range(k)]
        out += [tuple(int(t) for t in r.m_generation_ids[0]) for r in pipe.generate([ids(prompt)] * k, configs)]
    return out


def past_eos(outs, eos):
    return [o for o in outs if eos in o[:-1]]


def finding_3(og, target, draft, eos):
    """Greedy and T 1 in batches: the draft's token kept unchecked where a step's budget cuts a prompt at its end."""
    plain = cb_pipe(og, target, None)
    for prompt, budget, n in [((0, 2), None, 512), ((0, 2), 5, 64), ((0, 2), 9, 64), ((0, 1), None, 512)]:
        want = cb_run(og, plain, eos, prompt, 1, False)[0]
        outs = cb_run(og, cb_pipe(og, target, draft, budget), eos, prompt, n, False)
        wrong = collections.Counter(o for o in outs if o != want)
        print(
            f"finding 3, greedy {prompt}, budget {budget or 256}: target {want}; {sum(wrong.values())} of {n} "
            f"wrong, {len(past_eos(outs, eos))} after an EOS: {wrong.most_common(3)}"
        )
    for prompt, budget in [((1, 4, 0), None), ((1, 4, 0), 9), ((0, 1), None), ((0, 1), 9), ((1, 4, 0), 2**20)]:
        bad = past_eos(cb_run(og, cb_pipe(og, target, draft, budget), eos, prompt, 4000, True), eos)
        control = past_eos(cb_run(og, plain, eos, prompt, 4000, True), eos)
        print(
            f"finding 3, T 1 {prompt}, budget {budget or 256}, 4000 requests: {len(bad)} after an EOS "
            f"{collections.Counter(bad).most_common(3)}; without the draft {len(control)}"
        )


def note_4(og, target, draft, eos):
    """γ and the confidence threshold change nothing at max_new_tokens 3 and the drafts at 8."""
    pipe = og.LLMPipeline(
        target, "CPU", draft_model=og.draft_model(draft, "CPU", **F32), scheduler_config=scheduler(og, False), **F32
    )
    settings = {"gamma 3": (3, None), "gamma 1": (1, None), "thr 0.4": (0, 0.4), "thr 0.999": (0, 0.999)}
    for max_new in (3, 8):
        outs, accepted = {}, {}
        for name, (gamma, threshold) in settings.items():
            results = [
                pipe.generate(ids((0, 1)), generation(og, eos, max_new, True, seed, gamma, threshold))
                for seed in range(300)
            ]
            outs[name] = [tuple(r.tokens[0]) for r in results]
            accepted[name] = sum(r.extended_perf_metrics.get_num_accepted_tokens() for r in results)
        same = {name: sum(a == b for a, b in zip(o, outs["gamma 3"])) for name, o in outs.items()}
        print(f"note 4, max_new_tokens {max_new}, 300 seeds: equal to gamma 3 {same}; accepted {accepted}")


def reproducibility(og, target, draft, eos):
    """Run-to-run differences of seeded batches: the default budget versus one no call reaches."""
    for label, budget in [("default budget", None), ("budget 2048", 2048)]:
        pipe = cb_pipe(og, target, draft, budget)
        runs = [cb_run(og, pipe, eos, (1, 4, 0), 2048, True) for _ in range(3)]
        differ = [sum(a != b for a, b in zip(runs[0], r)) for r in runs[1:]]
        print(f"reproducibility, cb + draft, {label}, 2048 seeded requests at T 1: repeats differ by {differ}")


def _min_tokens_pipes(og, target, draft, caching=True):
    sched = scheduler(og, caching)
    return {
        "plain": og.LLMPipeline(target, "CPU", **F32),
        "prompt_lookup": og.LLMPipeline(target, "CPU", prompt_lookup=True, scheduler_config=sched, **F32),
        "draft_model": og.LLMPipeline(
            target, "CPU", draft_model=og.draft_model(draft, "CPU", **F32), scheduler_config=scheduler(og, False), **F32
        ),
    }


def _min_tokens_run(og, pipe, kind, eos, prompt, min_new, max_new, gamma=2, seed=None):
    config = og.GenerationConfig()
    config.max_new_tokens, config.eos_token_id, config.do_sample = max_new, eos, seed is not None
    if seed is not None:
        config.rng_seed = seed
    if min_new:
        config.min_new_tokens = min_new
    if kind != "plain":
        config.num_assistant_tokens = gamma
    if kind == "prompt_lookup":
        config.max_ngram_size = 2
    return tuple(int(t) for t in pipe.generate(ids(prompt), config).tokens[0])


def finding_5(og, *_):
    """min_new_tokens under speculation: EOS unmasked too early after a rejection (the count is set in prompt +
    generated units), and masked too long on the later rows of a step (one count for all its rows)."""
    import itertools

    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
    from specverify.oracles.law import greedy_outcome
    from specverify.params import SamplingParams

    target, draft, eos = models("far-eos")
    pipes, off = _min_tokens_pipes(og, target, draft), _min_tokens_pipes(og, target, draft, caching=False)
    target_model = CHECKPOINT_PAIRS["far-eos"].build().target
    prompt = (1, 1, 1, 2, 3)  # the certificate's greedy-min-tokens case: min_new_tokens 3, max_new_tokens 5
    want = greedy_outcome(target_model, prompt, SamplingParams(temperature=0.0, max_tokens=5, min_tokens=3))[0]
    runs = [("plain", pipes, 0)] + [
        (k, p, g)
        for g in (1, 2, 3)
        for k, p in (("prompt_lookup", pipes), ("prompt_lookup", off), ("draft_model", pipes))
    ]
    for kind, which, gamma in runs:
        got = _min_tokens_run(og, which[kind], kind, eos, prompt, 3, 5, gamma)
        caching = "on" if which is pipes and kind == "prompt_lookup" else "off"
        cache = "" if kind == "plain" else f", γ {gamma}, prefix caching {caching}"
        print(f"finding 5, far-eos greedy {prompt} min 3 max 5, {kind}{cache}: {got} (target {want})")
    got = _min_tokens_run(og, pipes["prompt_lookup"], "prompt_lookup", eos, prompt, 0, 5)
    print(f"finding 5, the same without min_new_tokens, prompt_lookup γ 2: {got}")
    # every prompt of 1-3 tokens: EOS before min_new_tokens (the under-count) or a later difference (the over-mask)
    for n in (1, 2, 3):
        tally = collections.Counter()
        for prompt in itertools.product(range(target_model.vocab.size), repeat=n):
            if eos in prompt:
                continue
            params = SamplingParams(temperature=0.0, max_tokens=5, min_tokens=3)
            want = greedy_outcome(target_model, prompt, params)[0]
            for kind, gamma in [("plain", 0)] + [(k, g) for k in ("prompt_lookup", "draft_model") for g in (1, 2, 3)]:
                got = _min_tokens_run(og, off[kind], kind, eos, prompt, 3, 5, gamma)
                if got != want:
                    k = want.index(eos) if eos in want[3:] else None  # the target ends at k >= min_new_tokens
                    late = k is not None and got[:k] == want[:k] and len(got) > k and got[k] != eos
                    tally[
                        (
                            kind,
                            gamma,
                            "EOS before min" if eos in got[:3] else "EOS masked past min" if late else "other",
                        )
                    ] += 1
        print(f"finding 5, far-eos greedy, all {n}-token prompts, min 3 max 5: mismatches {dict(tally)}")
    # T 1, same seeds as plain: prompt lookup draws the target's tokens from the same stream, so any difference is
    # a masking difference
    for min_new in (2, 0):
        base = [_min_tokens_run(og, off["plain"], "plain", eos, (0, 1), min_new, 3, seed=s) for s in range(2000)]
        outs = [
            _min_tokens_run(og, off["prompt_lookup"], "prompt_lookup", eos, (0, 1), min_new, 3, 3, s)
            for s in range(2000)
        ]
        diff = collections.Counter((b, o) for b, o in zip(base, outs) if b != o)
        print(
            f"finding 5, far-eos T 1 (0, 1) min {min_new} max 3, prompt_lookup γ 3 vs plain, 2000 seeds: "
            f"{sum(diff.values())} differ {diff.most_common(3)}"
        )
    target, draft, eos = models("main")
    pipes = _min_tokens_pipes(og, target, draft)
    for prompt in ((1, 4, 0), (0, 1), (1,)):
        for kind, pipe in pipes.items():
            outs = [_min_tokens_run(og, pipe, kind, eos, prompt, 4, 5, 2, s) for s in range(300)]
            early = collections.Counter(o.index(eos) for o in outs if eos in o[:4])
            print(
                f"finding 5, main T 1 {prompt} min 4 max 5 γ 2, {kind}, 300 seeds: {sum(early.values())} with EOS "
                f"before min_new_tokens, at positions {dict(sorted(early.items()))}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=["2", "3", "4", "5", "repro"], default=["2", "3", "4", "5", "repro"])
    args = ap.parse_args()
    import openvino_genai as og

    target, draft, eos = models()
    run = {"2": finding_2, "3": finding_3, "4": note_4, "5": finding_5, "repro": reproducibility}
    for name in args.only:
        run[name](og, target, draft, eos)


if __name__ == "__main__":
    main()
