"""Standalone reproducers of the findings on transformers' newer candidate generators (docs/findings/transformers.md,
"The newer candidate generators"), each shipped behaviour beside its opt-in workaround.

    OMP_NUM_THREADS=1 python benchmarks/transformers_generator_findings.py [--draws 600]

Only the models come from specverify (the checkpoint family's target and draft directories, built from seeded specs;
the universal draft and its tokenizers, ``specverify.adapters.transformers.generators``); every call below is
transformers' own ``generate()`` or candidate-generator code, so each block can be pasted into a bug report with the
model directories attached. Prints one line per finding: what transformers did as shipped, and with the workaround.
"""

from __future__ import annotations

import argparse
import collections
import copy
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")


def models():
    import torch
    from transformers import AutoModelForCausalLM

    from specverify.adapters.transformers import generators as g
    from specverify.oracles.checkpoint_spec import CheckpointPairSpec, CheckpointSpec

    pair = CheckpointPairSpec(CheckpointSpec(), draft_sigma=0.005).build()
    vocab = pair.target.vocab

    def load(path):
        return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager").eval()

    target = load(pair.target.path)
    draft = load(g.universal_draft_dir(pair.draft.path, vocab))
    target_tok = g._unigram_tokenizer(g.target_table(vocab), g._eos_text())
    draft_tok = g._unigram_tokenizer(g.draft_table(vocab), g._eos_text())
    return pair, target, draft, target_tok, draft_tok


def usd_law(pair, target, draft, target_tok, draft_tok, draws: int) -> None:
    """USD at temperature 1: the first token's frequencies against the target's exact next-token law, shipped and
    with the translator's ``get_target_logits`` scattering in the pruned head's order."""
    import numpy as np
    import torch
    from transformers import GenerationConfig
    from transformers.generation.candidate_generator import AssistantVocabTranslatorCache

    prompt = torch.tensor([[0, 1]])
    with torch.no_grad():
        p = torch.softmax(target(prompt).logits[0, -1].double(), -1).numpy()
    for patched in (False, True):
        assistant = copy.deepcopy(draft)
        t_tok, a_tok = copy.deepcopy(target_tok), copy.deepcopy(draft_tok)  # a fresh translator cache entry
        if patched:
            tr = AssistantVocabTranslatorCache.get_translator(
                t_tok, a_tok, 6, assistant_model=assistant, assistant_prune_lm_head=True
            )

            def scatter(logits, tr=tr):
                out = torch.full((*logits.shape[:-1], tr.target_vocab_size), tr.FILTER_VALUE)
                out[..., tr._assistant_to_target_input_ids[tr.assistant_overlap_token_ids]] = logits
                return out

            tr.get_target_logits = scatter
        assistant.generation_config.num_assistant_tokens = 3
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        assistant.generation_config.assistant_confidence_threshold = 0.0
        config = GenerationConfig(do_sample=True, max_new_tokens=4, eos_token_id=5, pad_token_id=5)  # room for 3 drafts
        counts = collections.Counter()
        for seed in range(draws):
            torch.manual_seed(seed)
            out = target.generate(
                prompt, generation_config=config, assistant_model=assistant, tokenizer=t_tok, assistant_tokenizer=a_tok
            )
            counts[int(out[0, 2])] += 1
        freq = np.array([counts[i] / draws for i in range(6)])
        tv = 0.5 * np.abs(freq - p).sum()
        label = "patched (id order)" if patched else "shipped"
        print(
            f"USD first-token law, {label}: TV(observed, target) = {tv:.3f} over {draws} draws "
            f"(sampling noise ~ {np.sqrt(6 / draws) / 2:.3f}); observed {np.round(freq, 3)}, target {np.round(p, 3)}"
        )


def adt_cache(pair, target, draft, target_tok, draft_tok) -> None:
    """Greedy with different tokenizers, prompt (0, 1): the assistant's cache outgrows its input, then raises."""
    import torch

    for fresh in (False, True):
        model = copy.deepcopy(target)
        if fresh:
            inner = model._get_candidate_generator

            def patched(*a, inner=inner, **k):
                gen = inner(*a, **k)
                original = gen.get_candidates

                def get_candidates(input_ids, *aa, **kk):
                    gen.assistant_kwargs["cache"] = None
                    return original(input_ids, *aa, **kk)

                gen.get_candidates = get_candidates
                return gen

            model._get_candidate_generator = patched
        try:
            out = model.generate(
                torch.tensor([[0, 1]]),
                do_sample=False,
                max_new_tokens=8,
                eos_token_id=5,
                pad_token_id=5,
                assistant_model=copy.deepcopy(draft),
                tokenizer=target_tok,
                assistant_tokenizer=draft_tok,
            )
            plain = target.generate(
                torch.tensor([[0, 1]]), do_sample=False, max_new_tokens=8, eos_token_id=5, pad_token_id=5
            )
            result = f"tokens {out[0, 2:].tolist()}, plain greedy {plain[0, 2:].tolist()}"
        except Exception as exc:  # the finding
            result = f"{type(exc).__name__}: {str(exc)[:90]}"
        print(f"greedy different tokenizers, {'fresh assistant cache' if fresh else 'shipped'}: {result}")


def prune_in_place(pair, target, draft, target_tok, draft_tok) -> None:
    import torch

    assistant = copy.deepcopy(draft)
    kwargs = dict(
        eos_token_id=5, pad_token_id=5, assistant_model=assistant, tokenizer=target_tok, assistant_tokenizer=draft_tok
    )
    target.generate(torch.tensor([[3, 2, 4]]), do_sample=False, max_new_tokens=8, **kwargs)
    torch.manual_seed(1)
    target.generate(torch.tensor([[0, 1]]), do_sample=True, max_new_tokens=4, **kwargs)
    head = type(assistant.get_output_embeddings()).__name__
    try:
        target.generate(torch.tensor([[3, 2, 4]]), do_sample=False, max_new_tokens=8, **kwargs)
        result = "ran"
    except Exception as exc:
        result = f"{type(exc).__name__}: {str(exc)[:90]}"
    print(f"greedy after one sampled USD call with the same assistant (its LM head is now {head}): {result}")


def static_overflow(pair, target) -> None:
    import torch

    from specverify.adapters.transformers import generators as g

    for name, kwargs in (
        ("MTP", {"use_mtp": True}),
        ("DFlash", {"speculation_type": "dflash", "assistant_model": g.dflash_draft(target)}),
    ):
        model = target
        if name == "MTP":
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(g.mtp_target_dir(pair.target.path))).eval()
            model._keys_to_ignore_on_load_unexpected = {r"model\.layers\.1\..*"}
        if name == "DFlash":
            kwargs["assistant_model"].config.block_size = 4
        for cache in (None, "static"):
            try:
                out = model.generate(
                    torch.tensor([[0, 1, 3, 2]]),
                    do_sample=False,
                    max_new_tokens=10,
                    eos_token_id=5,
                    pad_token_id=5,
                    cache_implementation=cache,
                    **kwargs,
                )
                result = f"{out.shape[1] - 4} tokens"
            except Exception as exc:
                result = f"{type(exc).__name__}: {str(exc)[:80]}"
            print(f"{name}, cache_implementation={cache!r}, greedy, 10 tokens: {result}")


def single_position(draws: int) -> None:
    """SinglePositionMultiTokenCandidateGenerator on a tiny seeded Gemma 4 pair, temperature 1, 3 tokens: battery
    p-values against the exact law for plain sampling, the generator as shipped, and with no draft logits."""
    import copy

    import torch

    from specverify.adapters.transformers import generators as g
    from specverify.oracles.law import exact_law
    from specverify.params import SamplingParams
    from specverify.stats import battery

    pair = g.GemmaPair(vocab_size=8, seed=0, gamma=3)
    prompt, eos = (0, 1, 2), pair.vocab.eos_token_id
    law = exact_law(pair, prompt, SamplingParams(temperature=1.0, max_tokens=3))
    patched = copy.deepcopy(pair.target)
    g.without_draft_logits(patched)
    for label, model, kwargs in (
        ("plain", pair.target, {}),
        ("shipped", pair.target, {"assistant_model": pair.assistant}),
        ("no draft logits", patched, {"assistant_model": pair.assistant}),
    ):
        counts = collections.Counter()
        for seed in range(draws):
            torch.manual_seed(seed)
            with torch.no_grad():
                out = model.generate(
                    torch.tensor([list(prompt)]),
                    do_sample=True,
                    temperature=1.0,
                    max_new_tokens=3,
                    eos_token_id=eos,
                    pad_token_id=eos,
                    **kwargs,
                )
            tokens = tuple(int(t) for t in out[0, len(prompt) :])
            key = (tokens[: tokens.index(eos) + 1], "eos") if eos in tokens else (tokens, "length")
            counts[key] += 1
        vec, impossible = law.align(counts)
        result = battery(vec, law.probs, alpha=1e-6, seed=0)
        tests = ", ".join(f"{name} p={p:.2g}" for name, p in result.tests)
        print(
            f"single-position (Gemma 4 pair), {label}: {'pass' if result.passed else 'FAIL'} over {draws} draws "
            f"({tests}; impossible outcomes {len(impossible)})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=600)
    args = ap.parse_args()
    import transformers

    print(f"transformers {transformers.__version__}")
    pair, target, draft, target_tok, draft_tok = models()
    usd_law(pair, target, draft, target_tok, draft_tok, args.draws)
    adt_cache(pair, target, draft, target_tok, draft_tok)
    prune_in_place(pair, target, draft, target_tok, draft_tok)
    static_overflow(pair, target)
    single_position(max(args.draws, 1500))


if __name__ == "__main__":
    main()
