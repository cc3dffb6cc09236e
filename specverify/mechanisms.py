"""The catalogue of bug mechanisms that the zoo's decoders and the fuzzer's mutants stand for (docs/bugs.md).

A *mechanism* is one way a speculative decoder goes wrong, named by what it does, not by the engine that shipped it:
several engines' issues can share one mechanism, and one issue can involve two. ``MECHANISMS`` maps a stable
kebab-case id to a :class:`Mechanism`; every ``specverify.zoo`` entry names one (``ZooEntry.mechanism``) and every
mutant of ``specverify.fuzz.whitebox.mutants`` names one (its ``mechanism`` class attribute; so do the broken
components the fuzz tests hunt, e.g. ``tests/fuzz/test_recurrent.py``), so a zoo decoder and a fuzz mutant
implementing the same bug point at the same id.

This is a data module: it imports nothing from specverify but ``errors`` (through ``specverify._mechanism``, where
the ``Mechanism`` type lives) and its section on the target law's processors (``specverify._mechanisms_processors``,
data too, apart only for the module size).
"""

from __future__ import annotations

from specverify._mechanism import SEED, Mechanism
from specverify._mechanisms_processors import PROCESSOR_MECHANISMS
from specverify.errors import check

__all__ = ["Mechanism", "MECHANISMS", "SEED"]


#: Reported-acceptance mechanisms (the law is exact, the counters are not): id suffix, title, bugs.
_REPORTED = (
    ("counts-emitted-token", "Each round's emitted token counted as one more accepted draft", ("SGLang PR #11572",)),
    (
        "counts-drafts-after-eos",
        "Drafts after the finishing token counted as accepted",
        ("vLLM #56101", "vLLM PR #56137"),
    ),
    ("rate-mean-of-ratios", "A rate as a mean of per-request ratios, not a ratio of sums", ("Relax PR #345",)),
    ("over-reported-in-rejected-rounds", "A round that rejected a draft reports every draft accepted", ()),
    (
        "per-position-from-one-dp-engine",
        "Per-position accepted counts from one data-parallel engine's series, not their sum",
        ("speculators #1095", "speculators PR #1096"),
    ),
    (
        "rate-denominator-steps-plus-one",
        "Drafted tokens (the acceptance rate's denominator) counted as γ + 1 per round",
        ("SGLang PR #13212",),
    ),
    ("counted-past-stop", "Aggregate counters count the drafts after the finishing token", ("vLLM #56101",)),
    (
        "partial-accept-restore-replay",
        "A partial accept restored from a checkpoint counts 0 accepted and its replay a full accept",
        ("llama.cpp PR #25682", "llama.cpp PR #26320"),
    ),
)


#: Mechanisms of issue 45 (field reports of late 2026), each with its zoo entry: id, title, state, bugs.
_FIELD = (
    (
        "constant-acceptance-coin",
        "The acceptance coin is the constant u = 0: every draft with p(x) > 0 is kept",
        "RNG (acceptance coin)",
        ("vllm-ascend PR #13470",),
    ),
    (
        "probs-mutated-in-place",
        "The ratio p / q is formed in place in the target row the recovery step then reads",
        "residual (aliased tensor)",
        ("vllm-ascend PR #2881", "vLLM PR #16952"),
    ),
    (
        "probs-passed-as-logits",
        "Probabilities handed to a sampler that takes logits: softmax applied twice",
        "bonus sampler (interface)",
        ("vllm-ascend PR #6685",),
    ),
    (
        "greedy-tie-highest-index",
        "Greedy argmax keeps the highest of exactly tied indices, not the lowest",
        "greedy (ties)",
        (),
    ),
    (
        "multi-row-verify-reads-first-candidate",
        "A multi-row verify (γ ≥ 3) gives rows after the first row 0's candidate",
        "verify kernel (rows)",
        ("ds4 PR #358",),
    ),
    (
        "verify-state-capped-at-four-rows",
        "The verifier writes the state of at most four drafts; later ones stay stale",
        "target KV (γ > 4)",
        ("SGLang PR #32183",),
    ),
    (
        "stale-row-after-partial-accept",
        "After a partial accept the next round's first row is the rejection's row",
        "verify rows (stale buffer)",
        ("ds4 #750",),
    ),
    (
        "committed-token-duplicated-at-boundary",
        "The accept boundary's token is committed to the target's context twice",
        "target KV (accept boundary)",
        ("imp #667",),
    ),
    (
        "tree-logits-slice-shifted",
        "Tree rejection sampling reads each node's target row one slot early",
        "tree (logits slice)",
        ("TensorRT-LLM PR #15098",),
    ),
    (
        "decode-before-chunked-prefill",
        "The first decode step runs before the prompt's chunked prefill completes",
        "target KV (chunked prefill)",
        ("model-serving-minefield #36",),
    ),
    (
        "confidence-threshold-fallback",
        "Rounds with an unconfident draft fall back to one plain draw (control)",
        "drafts (fallback rounds)",
        (),
    ),
    (
        "stale-seed-after-fallback",
        "After a plain fallback round the resumed round feeds the target a stale seed token",
        "seed token (fallback / resume)",
        ("vmlx PR #150", "vmlx PR #173"),
    ),
    (
        "repetition-penalty-bonus-row-stale",
        "The repetition penalty reaches only the bonus row, from a snapshot one round old",
        "penalties (verify rows)",
        ("SGLang PR #28242",),
    ),
    (
        "verify-processors-see-confirmed-twice",
        "Verify positions' processors see the confirmed token twice and miss a draft",
        "processor history (verify)",
        ("mlx-lm #1175",),
    ),
    (
        "drafter-kv-rewound-one-round-too-far",
        "The drafter's cache is rewound to the round's start: exact, acceptance low",
        "draft KV",
        ("mlxcel #994",),
    ),
    (
        "rejected-placeholder-fed-to-drafter",
        "The rejected slot's placeholder id (-1) reaches the drafter's input",
        "draft input (placeholder)",
        ("TensorRT-LLM PR #15233",),
    ),
    (
        "greedy-request-makes-call-greedy",
        "A call holding any greedy request decodes every request greedily",
        "batch (greedy flag)",
        (),
    ),
    (
        "greedy-rows-sampled-in-mixed-call",
        "A call holding any sampled request sends its greedy requests through the sampled path",
        "batch (greedy flag)",
        (),
    ),
    (
        "window-ring-not-restored-on-rollback",
        "A sliding window's ring of W slots keeps rejected drafts after a rollback",
        "target KV (sliding window)",
        (),
    ),
    (
        "tree-position-from-span-index",
        "Tree nodes verified at their span index as rotary position, not their depth",
        "tree (positions)",
        ("mlxcel PR #1214",),
    ),
    (
        "call-rng-from-first-seed",
        "A call's seeded requests draw from one generator seeded by the first seed",
        "RNG (per-request seed, batch)",
        (),
    ),
)


def _catalogue(*mechanisms: Mechanism) -> dict[str, Mechanism]:
    ids = [m.id for m in mechanisms]
    check(len(set(ids)) == len(ids), f"mechanism ids={ids!r} must be unique.")
    return {m.id: m for m in mechanisms}


MECHANISMS: dict[str, Mechanism] = _catalogue(
    # ------------------------------------------------------------------ controls (exact by construction)
    Mechanism("reference-unchanged", "No mutation: the reference decoder itself (control)", "none"),
    Mechanism(
        "speculation-off",
        "Drafts are computed and thrown away: every round is one plain target draw (control)",
        "drafts",
    ),
    Mechanism(
        "bonus-dropped",
        "After full acceptance the round ends without a bonus token (slow, still exact)",
        "bonus token",
        (SEED,),
    ),
    Mechanism(
        "draft-kv-missing-bonus-entry",
        "After full acceptance the draft cache never receives the last accepted draft's entry",
        "draft KV",
        ("vLLM #3951",),
    ),
    Mechanism(
        "request-seed-ignored",
        "Per-request seeds are ignored: every request draws fresh entropy",
        "RNG (per-request seed)",
        ("vLLM #6038", "vLLM #6743"),
    ),
    # ------------------------------------------------------------------ the single-position rule
    Mechanism(
        "uniform-reused-for-residual",
        "The acceptance test's uniform is reused for the residual draw",
        "RNG",
        ("FlashInfer #424",),
    ),
    Mechanism(
        "inclusive-acceptance-test",
        "Inclusive u <= p/q accepts a zero-probability draft when u == 0",
        "processor support",
        ("SGLang #35771",),
    ),
    Mechanism(
        "residual-last-index-fallback",
        "A coin past the residual's rounded total falls back to the last index, whatever its probability",
        "residual fallback",
        ("SGLang #22643",),
    ),
    Mechanism(
        "recovered-from-target",
        "After a rejection the token is drawn from the target, not the residual",
        "residual",
        (SEED,),
    ),
    Mechanism(
        "residual-softmax",
        "The residual goes through softmax instead of being normalised",
        "residual",
        ("transformers #28508",),
    ),
    Mechanism(
        "residual-row-offset-missing",
        "Residual and bonus read the position-0 rows (no +pos offset)",
        "residual indexing",
        ("FlashInfer #425",),
    ),
    Mechanism("bonus-from-draft", "The bonus token is sampled from the draft's law", "bonus token", (SEED,)),
    Mechanism(
        "greedy-draft-softmax-q",
        "Drafts are the draft's argmax but the ratio divides by its softmax",
        "draft distribution",
        ("transformers #32867",),
    ),
    Mechanism(
        "residual-from-point-mass",
        "Drafts are sampled from the dense draft law, the residual is built from a point mass at the drafted token",
        "residual / draft distribution",
        ("xLLM PR #2175",),
    ),
    Mechanism(
        "raw-q-processed-draft",
        "Drafts come from the processed draft law, the ratio divides by the raw one",
        "processors (draft)",
        ("transformers #47932",),
    ),
    Mechanism(
        "draft-probs-misaligned",
        "Draft k's ratio divides by the law of another draft position",
        "draft probs",
        ("TensorRT-LLM #12588",),
    ),
    Mechanism(
        "draft-q-from-current-version",
        "The ratio divides by the q of the draft version current at verification, not the one that drafted",
        "draft probs / draft version",
        (SEED,),
    ),
    # ------------------------------------------------------------------ RNG keying
    Mechanism(
        "unseeded-requests-share-rng",
        "Unseeded requests of one call share one RNG stream",
        "RNG (unseeded)",
        ("TensorRT-LLM #19487",),
    ),
    Mechanism(
        "batch-params-from-first-request",
        "One request's sampling parameters are used for every request of the batch",
        "batch (sampling parameters)",
        ("vmlx #234",),
    ),
    Mechanism(
        "rng-keyed-by-batch",
        "A request's draws depend on its batch (index or size), not only on its seed",
        "RNG / batch",
        ("vLLM #9441", "vLLM PR #35398"),
    ),
    Mechanism(
        "batch-size-numerics",
        "A multi-request call (or a k+1-row verify) takes another numeric path than one request: greedy diverges",
        "kernels / greedy",
        ("llama.cpp #25618", "vLLM #41758"),
    ),
    Mechanism(
        "draft-probs-misaligned-beyond-two-sequences",
        "With more than two sequences in a call, sampled rows divide by another row's draft probabilities",
        "draft probs / batch",
        ("1Cat-vLLM #656",),
    ),
    Mechanism(
        "rng-consumed-by-failed-round",
        "A failed round consumes draws: the retry sees other uniforms",
        "RNG counter",
        (SEED,),
    ),
    Mechanism(
        "seed-changed-on-resume", "A preempted request resumes with another seed", "RNG (per-request seed)", (SEED,)
    ),
    # ------------------------------------------------------------------ the target law's processors
    *PROCESSOR_MECHANISMS,
    # ------------------------------------------------------------------ the round's transaction
    Mechanism("target-kv-not-cropped", "A rejected draft's entry stays in the target KV cache", "target KV", (SEED,)),
    Mechanism(
        "penalty-history-not-rolled-back",
        "Rejected drafts stay in the penalty history (seen / counts)",
        "penalty state",
        (SEED,),
    ),
    Mechanism(
        "grammar-state-not-rolled-back",
        "The grammar matcher stays advanced over rejected drafts",
        "grammar state",
        (SEED,),
    ),
    Mechanism(
        "stop-state-not-rolled-back",
        "The stop-string matcher keeps the rejected drafts' text",
        "stop-matcher state",
        (SEED,),
    ),
    Mechanism(
        "recurrent-state-not-rolled-back",
        "Rejected drafts' inputs advance the committed recurrent (SSM) state",
        "recurrent state",
        ("llama.cpp #20075", SEED),
    ),
    Mechanism(
        "failed-round-not-rolled-back",
        "A round that raises leaves its provisional state behind",
        "every state component (abort path)",
        (SEED,),
    ),
    Mechanism(
        "failed-round-leaks-block",
        "The abort path restores the state but never releases one block",
        "paged KV (block refcounts)",
        (SEED,),
    ),
    Mechanism(
        "close-leaks-draft-blocks",
        "Closing a request releases the target cache but not the draft cache",
        "paged KV (draft blocks)",
        (SEED,),
    ),
    Mechanism(
        "provisional-kv-published",
        "Draft entries reach the prefix cache before verification",
        "paged KV (prefix cache)",
        (SEED,),
    ),
    Mechanism(
        "round-commits-nothing", "A round that does not finish the request commits no token", "progress", (SEED,)
    ),
    Mechanism(
        "padding-draft-accepted",
        "A first step padded with placeholder drafts keeps some: they emit nothing but condition the next row",
        "scheduler padding / target KV (first step)",
    ),
    Mechanism(
        "draft-probs-dropped-for-step",
        "Draft probabilities missing for one request, so every draft of the step is verified as a point mass",
        "draft probabilities (verification)",
    ),
    Mechanism(
        "resume-drops-penalty-history",
        "A resumed request starts its penalty history afresh",
        "penalty state (preemption)",
        (SEED,),
    ),
    # ------------------------------------------------------------------ finishing and streaming
    Mechanism(
        "accepted-eos-does-not-end-round",
        "Accepted drafts and the bonus leak out after an accepted EOS",
        "finish (EOS)",
        ("SGLang #31599", "SGLang #31569"),
    ),
    Mechanism(
        "mid-block-eos-ignored",
        "EOS accepted mid-block does not stop generation",
        "finish (EOS)",
        ("transformers #47912",),
    ),
    Mechanism(
        "length-checked-before-stop",
        "The length cap is checked before EOS and stop strings",
        "finish (order)",
        ("SGLang #31569",),
    ),
    Mechanism(
        "drafts-charged-to-max-tokens",
        "Drafted tokens count towards max_tokens: the request ends with length short of the cap",
        "finish (length budget)",
        ("LiteRT-LM #2816", "ik_llama.cpp PR #2358"),
    ),
    Mechanism(
        "stop-window-shorter-than-block",
        "The stop-string check decodes a tail window shorter than the accepted block",
        "stop matcher (window)",
        ("SGLang PR #23802", "SGLang PR #27637"),
    ),
    Mechanism(
        "finishing-token-not-in-history",
        "The next turn's history lacks the token that finished the previous turn",
        "history across turns",
        ("LiteRT-LM #3439",),
    ),
    Mechanism(
        "tokens-kept-past-stop-string",
        "Token ids past a stop string completed mid-block are kept",
        "finish (stop string)",
        ("vLLM #47616",),
    ),
    Mechanism(
        "token-streamed-twice", "Each streamed chunk repeats the previous round's last token", "stream cursor", (SEED,)
    ),
    Mechanism(
        "resume-restreams-committed",
        "A resumed request streams its committed tokens again",
        "stream cursor (preemption)",
        (SEED,),
    ),
    # ------------------------------------------------------------------ draft families, trees, block verification
    Mechanism("tree-padding-accepted-as-token-0", "Padded tree nodes are verified as candidates of token 0", "tree"),
    Mechanism("tree-paths-sampled-independently", "Each candidate gets its own target draw (nucleus paths)", "tree"),
    Mechanism("tree-slot-not-reordered", "Tree nodes reordered, their cache slots not", "tree slots", (SEED,)),
    Mechanism(
        "block-verify-token-wise-rule",
        "Block verification stops on the cumulative ratio and draws from the token-wise residual",
        "block verification",
        ("vllm-ascend #7807", "vllm-ascend PR #7808"),
    ),
    Mechanism(
        "block-verify-draft-probs-none",
        "Block verification without draft probs: the draft token's probability one, the draft rows empty",
        "block verification (n-gram)",
        ("vllm-ascend PR #7603",),
    ),
    Mechanism("block-draws-keyed-by-position", "Block draws keyed by position only: reused next round", "RNG (block)"),
    Mechanism("draft-bf16-ratio-fp32", "Draft from bf16 logits, ratio from the fp32 law", "dtype", ("DeepSpec #31",)),
    Mechanism(
        "draft-sampled-without-temperature",
        "The draft sampler never sees the temperature; the ratio divides by the tempered law",
        "draft probs (temperature)",
        ("z-lab/dflash #74",),
    ),
    Mechanism(
        "sampled-request-decoded-greedily",
        "Sampled requests are silently decoded greedily",
        "mode engaged",
        ("rMLX #519", "pegainfer #512", "tpu-inference #1386"),
    ),
    Mechanism(
        "silent-fallback-to-plain",
        "Speculation silently falls back to plain decoding (exact; nothing accelerated)",
        "mode engaged",
        ("rMLX #519", "pegainfer #512", "tpu-inference #1386"),
    ),
    Mechanism(
        "recurrent-state-from-first-block",
        "After a round the target's recurrent state is the one after block[0], not the last accepted token",
        "recurrent state (hybrid + n-gram)",
        ("vLLM #40831", "vLLM PR #40738"),
    ),
    # ------------------------------------------------------------------ reported acceptance (metrics check)
    *(Mechanism(f"acceptance-{name}", title, "acceptance counters", bugs) for name, title, bugs in _REPORTED),
    # ------------------------------------------------------------------ approximate modes engines ship, labelled
    Mechanism("typical-acceptance", "Medusa typical acceptance: p(x) > min(ε, δ·exp(-H))", "acceptance (approx.)"),
    Mechanism("threshold-acceptance", "SGLang threshold_single/threshold_acc < 1", "acceptance (approximate)"),
    Mechanism("relaxed-top-k-acceptance", "TensorRT-LLM MTP relaxed top-k acceptance", "acceptance (approximate)"),
    Mechanism(
        "synthetic-acceptance", "vLLM synthetic rejection: drafts accepted at a fixed rate", "acceptance (bench)"
    ),
    # ------------------------------------------------------------------ issue 45: field reports of late 2026
    *(Mechanism(*row) for row in _FIELD),
)
