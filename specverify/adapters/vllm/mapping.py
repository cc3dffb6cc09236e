"""How the vLLM adapter maps a specverify request onto vLLM and vLLM's output back: the request checks, vLLM's
``SamplingParams`` (only the fields a request set), and the ``Completion`` of a ``CompletionOutput``.

**Mapping, and what is declared** (file:line refer to vLLM 0.32.0, docs/findings/vllm.md). The target's rows go
through, in order, penalties, ``allowed_token_ids``, min-tokens (EOS masked), temperature, top-k, top-p
(v1/sample/rejection_sampler.py:307 and :522 with drafts, v1/sample/sampler.py:381 and :259 without). Masks commute
with the penalties (-inf stays -inf), so this is the canonical order:

- ``temperature`` (0 = greedy, argmax), ``max_tokens``, ``min_tokens``, per-request ``seed``.
- ``repetition_penalty`` on prompt and generated tokens, ``frequency_penalty`` / ``presence_penalty`` on generated
  counts, OpenAI style (model_executor/layers/utils.py:43); with drafts, each row sees the drafts before it.
- ``top_k`` and ``top_p`` (v1/sample/ops/topk_topp_sampler.py:473): top-k keeps every token tied with the k-th and
  top-p keeps the tokens after the ascending cumulative mass exceeds 1 - p. Both equal the canonical cuts unless a
  probability sits exactly on the cut, which the checkpoint scenarios exclude (every cut >= 1e-3 away).
- ``bad_token_ids``: ``allowed_token_ids`` = the other ids, an exact id mask (vLLM's ``bad_words`` are strings).
- ``stop``: vLLM's stop strings on the detokenised text (v1/engine/detokenizer.py:133-153 drops the tokens after the one
  that completes a stop string within a step). vLLM holds stop strings back until ``min_tokens`` tokens exist, which is
  ``stop_after_min_tokens=True``; a request with both and the flag off raises ``InvalidArgument``, so the flag itself is
  not declared (only one of its values is honoured).
- ``min_p``, ``plain`` only (vLLM refuses it with speculation); vLLM applies it before top-k/top-p, so it is exact
  alone, and a request combining them raises ``InvalidArgument``.
- ``batch``; ``accepted`` for the speculative factories, from vLLM's per-request ``per_step_accepted`` (one entry per
  verification step with drafts, v1/metrics/stats.py:394), clipped to the tokens returned
  (``boundary.finish.clip_accepted``): vLLM counts drafts accepted past the finishing token before it cuts its output
  (v1/core/sched/scheduler.py:2118).

**Where a completion ends** (``specverify.adapters.boundary.finish``, every adapter's finish rule). vLLM is asked to
honour EOS, ``stop`` and ``max_tokens``; the adapter cuts nothing: the tokens are returned as vLLM emits them, with the
finish reason the rule gives, so tokens past an end reach the certifier, which reports them. Tokens that end before any
end raise ``EngineStoppedEarly`` (naming vLLM's ``finish_reason``).

**Prefill** (``decoder.prefill_tokens``, docs/adapters.md). ``draft_model`` / ``draft_model_greedy``: 1. The prefill
step samples the first token and the drafter proposes from it in the same step (v1/worker/gpu_model_runner.py:4380): the
scheduler keeps those drafts for the next step unless the prefill was a partial chunk
(v1/core/sched/scheduler.py:2559-2568), which the adapter never makes, so the first decode step verifies γ drafts
(finding 7: every count of 3000 requests fits 1; a decode step without drafts is rare, not impossible). ``ngram``: not
declared, not a constant: vLLM records a step only when it carried drafts (scheduler.py:2113-2149), and the n-gram
proposer drafts nothing while the context holds no match, so such steps commit tokens outside the reported rounds.

``max_num_batched_tokens`` covers every running request's whole prompt, so no prefill is ever split: a split prefill of
a seeded request crashes vLLM on CPU (``gen.set_offset``, v1/worker/gpu_model_runner.py:3502, finding 3). ``top_k`` is
declared for ``plain`` only: with speculation vLLM's engine dies on it (finding 2). Not declared: ``grammar`` (vLLM's
structured outputs take a JSON schema / regex / EBNF, not a token automaton; ``structured_outputs=true`` declares
``text-grammar``, a ``RegexGrammar`` sent as its regex, so the token-level grammar scenarios read not covered),
``ignore_eos``, ``stop_after_min_tokens``, ``stream``. Counters: ``reported_metrics()`` (``counters``).
"""

from __future__ import annotations

from specverify.adapters.boundary.finish import clip_accepted, finish
from specverify.adapters.vllm.methods import METHODS
from specverify.errors import InvalidArgument
from specverify.grammar import text_form
from specverify.protocol import Completion, Request

__all__ = ["check_request", "vllm_kwargs", "vllm_params", "completion"]


def check_request(request: Request, method: str, structured: bool = False) -> None:
    p = request.params
    speculative = METHODS[method].vllm_method is not None
    if p.ignore_eos:
        raise InvalidArgument(f"params={p!r}: the vLLM adapter does not map ignore_eos (not declared); drop it.")
    if p.grammar is not None and not (structured and text_form(p.grammar) is not None):
        raise InvalidArgument(
            f"grammar={p.grammar!r}: vLLM's structured outputs take a grammar as text, so the adapter maps only a "
            "specverify.grammar_regex.RegexGrammar (its .pattern as a regex), and only with --engine-config "
            "structured (structured_outputs=true); a token-level ToyGrammar has no text form (grammar-dead-end, "
            "greedy-grammar: not covered). Run --engine-config structured --scenario structured greedy-structured."
        )
    if p.logits_processors:
        raise InvalidArgument(
            f"logits_processors={p.logits_processors!r}: vLLM V1 takes logits processors only as classes built with "
            "the engine (LLM(logits_processors=[...])), not per request; the adapter does not declare them."
        )
    if p.top_k and speculative and p.temperature > 0:
        raise InvalidArgument(
            f"top_k={p.top_k!r} with speculation: vLLM 0.32 (CPU) calls top-k on an empty row set in the first decode "
            "step and its engine dies (v1/sample/ops/topk_topp_sampler.py:529; docs/findings/vllm.md). Use 'plain'."
        )
    if p.min_p and speculative:
        raise InvalidArgument(f"min_p={p.min_p!r}: vLLM refuses min_p with speculative decoding; use 'plain'.")
    if p.min_p and (p.top_k or p.top_p < 1):
        raise InvalidArgument(
            f"min_p={p.min_p!r} with top_k={p.top_k!r} / top_p={p.top_p!r}: vLLM applies min_p before top-k/top-p, "
            "the canonical order after; send min_p alone."
        )
    if p.stop and p.min_tokens and not p.stop_after_min_tokens:
        raise InvalidArgument(
            f"stop={p.stop!r} with min_tokens={p.min_tokens!r} needs stop_after_min_tokens=True: vLLM holds stop "
            "strings back until min_tokens tokens exist."
        )


# fields passed to vLLM's SamplingParams under the same name, only when the request set them: an unset field is left
# to vLLM's own default (1.0 / 0 / 1.0 / 0.0 / 1.0 / 0.0 / 0.0 / 0 in vLLM 0.32, the canonical ones), so how vLLM
# handles a missing field is what gets certified (docs/adapters.md, unset fields)
_SAME_NAME = {
    "temperature": float,
    "top_k": int,
    "top_p": float,
    "min_p": float,
    "repetition_penalty": float,
    "frequency_penalty": float,
    "presence_penalty": float,
    "min_tokens": int,
}


def vllm_kwargs(request: Request, vocab_size: int) -> dict:
    """The keyword arguments of vLLM's ``SamplingParams`` for one request: the fields it set, plus ``max_tokens``
    (always: vLLM's default of 16 is not the request's), ``seed`` and ``skip_special_tokens``."""
    p = request.params
    kwargs = {name: cast(getattr(p, name)) for name, cast in _SAME_NAME.items() if p.is_set(name)}
    if p.is_set("stop"):
        kwargs["stop"] = list(p.stop) or None
    if p.grammar is not None:  # checked by check_request: a RegexGrammar (text form) under structured_outputs
        from vllm.sampling_params import StructuredOutputsParams

        kwargs["structured_outputs"] = StructuredOutputsParams(regex=text_form(p.grammar))
    if p.is_set("bad_token_ids"):
        allowed = [t for t in range(vocab_size) if t not in set(p.bad_token_ids)]
        if not allowed:
            raise InvalidArgument(f"bad_token_ids={p.bad_token_ids!r} bans every id; vLLM needs one allowed id.")
        kwargs["allowed_token_ids"] = allowed if p.bad_token_ids else None
    return kwargs | dict(max_tokens=int(p.max_tokens), seed=request.seed, skip_special_tokens=True)


def vllm_params(request: Request, vocab_size: int, n: int = 1) -> object:
    """The vLLM ``SamplingParams`` of one request (see the module docstring for the mapping); ``n`` > 1: that many
    independent samples of it in one vLLM request (``parallel_n``, unseeded requests only)."""
    from vllm import SamplingParams as VllmParams

    kwargs = vllm_kwargs(request, vocab_size)
    if n > 1:
        if request.seed is not None:
            raise InvalidArgument(f"n={n!r} with seed={request.seed!r}: only unseeded requests are packed.")
        kwargs["n"] = n
    return VllmParams(**kwargs)


def completion(
    request: Request, output, vocab, method: str, *, padded: bool = False, preempted: bool = False, short: bool = False
) -> Completion:
    """The ``Completion`` of one vLLM ``CompletionOutput`` (``token_ids``, ``finish_reason``, ``spec_decode_metrics``):
    tokens as vLLM emitted them, the finish rule's reason, ``accepted`` clipped to those tokens. ``padded``: vLLM
    gave the request only ``-1`` drafts in its first step (``configs.record_scheduled_drafts``); that step's round
    verified no drafter's tokens and emitted one target sample, the prefill's token, so it is left out.
    ``preempted``: vLLM preempted the request (``configs.record_preempted``); each resume samples a token
    outside any round, so its rounds cannot be placed among its tokens: ``accepted`` is None (not reported).
    ``short``: a step's token budget gave the request fewer drafts than proposed (``configs``, short rounds), so
    not every round verified γ drafts (a plain decode step is no round at all): ``accepted`` is None too."""
    detail = f"vLLM's finish_reason {getattr(output, 'finish_reason', None)!r}"
    done = finish(output.token_ids, vocab, request.params, engine="vLLM", detail=detail)
    accepted = None
    spec = METHODS[method]
    if spec.vllm_method is not None:
        metrics = getattr(output, "spec_decode_metrics", None)
        start = spec.prefill_tokens if spec.prefill_tokens is not None else 1  # ngram: at least the prefill's token
        if preempted or short:
            return Completion(tokens=done.tokens, finish_reason=done.finish_reason, accepted=None)
        if metrics is not None or len(done.tokens) <= start:
            per_step = getattr(metrics, "per_step_accepted", None) or ()
            if padded:
                per_step = per_step[1:]
            accepted = clip_accepted(per_step, len(done.tokens), prefill_tokens=start)
        # else: vLLM lost this request's rounds (a stop string ended it: patches, "stop-metrics"); not reported
    return Completion(tokens=done.tokens, finish_reason=done.finish_reason, accepted=accepted)
