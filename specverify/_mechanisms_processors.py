"""The catalogue's section on the target law's processors (``specverify.mechanisms`` includes it in ``MECHANISMS``,
in its place): temperature, truncation, penalties, masks, grammar and a request's own logits processors, as the
verification law applies them. Plain data, like ``specverify.mechanisms``; kept apart only for its size.
"""

from __future__ import annotations

from specverify._mechanism import Mechanism

__all__ = ["PROCESSOR_MECHANISMS"]

PROCESSOR_MECHANISMS: tuple = (
    Mechanism(
        "verify-ignores-temperature",
        "Verification uses the target's argmax whatever the temperature",
        "temperature",
        ("SGLang #31214", "SGLang #39253"),
    ),
    Mechanism(
        "verify-argmax-bonus-sampled",
        "Every verified position takes the target's argmax; only the bonus token is sampled",
        "temperature (verifying rows)",
        ("ATOM PR #2318",),
    ),
    Mechanism(
        "rejection-ignores-sampling-params",
        "Target probs of the rejection step skip temperature and truncation; the bonus keeps them",
        "temperature / top-k / top-p",
        ("vLLM #10198",),
    ),
    Mechanism(
        "min-p-bonus-row-only",
        "min-p reaches the bonus row only, not the rows that verify drafts",
        "processors (min-p)",
        ("vLLM #42744",),
    ),
    Mechanism(
        "penalties-dropped-in-verify",
        "Repetition, frequency and presence penalties are missing from the verification law",
        "penalties",
        ("SGLang #21258", "vLLM #18902", "TensorRT-LLM #17955"),
    ),
    Mechanism(
        "masks-dropped-in-verify",
        "Bad-token and min-length masks are missing from the verification law",
        "processors (masks)",
        ("TensorRT-LLM #17955",),
    ),
    Mechanism(
        "grammar-not-in-verify",
        "The grammar mask is not applied to the target rows of verification",
        "grammar",
        ("SGLang #6441", "SGLang #9187", "SGLang #15373", "TensorRT-LLM #7878", "vLLM #36138", "vLLM #44006"),
    ),
    Mechanism(
        "grammar-cut-drafts-resampled",
        "Drafts the grammar forbids are cut, and the cut position sampled from the target instead of the residual",
        "grammar (draft cut)",
    ),
    Mechanism(
        "penalty-history-last-token-only",
        "Penalty history records only the last token of each round",
        "penalty state",
        ("SGLang #33643",),
    ),
    Mechanism(
        "unset-temperature-normalised-to-greedy",
        "An unset temperature becomes the greedy sentinel on the speculative path when only top-k is given",
        "processors (temperature default)",
        ("TensorRT-LLM PR #19390",),
    ),
    Mechanism(
        "logits-processor-skipped-in-verify",
        "A request's logits processor is not applied to the target rows of verification",
        "processors (user logits processor)",
        ("SGLang #26330", "SGLang #21724"),
    ),
    Mechanism("min-tokens-bonus-row-unmasked", "The bonus row skips the min-tokens EOS mask", "min-tokens (bonus row)"),
    Mechanism(
        "min-tokens-bonus-row-masked-by-committed",
        "The bonus row's min-tokens mask counts committed tokens, not its position: EOS masked too long",
        "min-tokens mask (bonus row)",
        ("vLLM PR #41768",),
    ),
    Mechanism(
        "min-tokens-counts-rounds",
        "min_tokens counts rounds instead of tokens",
        "min_tokens counter",
        ("SGLang #33643",),
    ),
)
