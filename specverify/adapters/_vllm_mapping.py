"""How the vLLM adapter maps a specverify request onto vLLM and vLLM's output back (private to
``specverify.adapters.vllm``, whose module docstring states the mapping): request checks, vLLM ``SamplingParams``, the
``Completion`` of a ``CompletionOutput``, vLLM's spec-decode counters and an engine's effective configuration."""

from __future__ import annotations

import sys
from typing import Mapping

from specverify.adapters import _vllm_engine_patches, vllm_patches
from specverify.adapters.boundary.finish import clip_accepted, finish
from specverify.adapters.vllm_methods import METHODS
from specverify.errors import InvalidArgument
from specverify.grammar import text_form
from specverify.protocol import Completion, Request

__all__ = ["completion"]


def _spec_counters(llm, metrics=None) -> dict:
    """vLLM's cumulative spec-decode counters: name -> float, or list of floats (per position); ``metrics``: a
    snapshot of ``llm.get_metrics()`` already read (None: read one)."""
    out = {}
    for metric in llm.get_metrics() if metrics is None else metrics:
        if "spec_decode" not in metric.name:
            continue
        key = metric.name.removeprefix("vllm:spec_decode_")
        value = list(getattr(metric, "values", None) or []) if hasattr(metric, "values") else metric.value
        out[key] = value
    return out


def _diff(before: dict, after: dict) -> dict:
    out = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, list):
            old = old or [0] * len(value)
            out[key] = [a - b for a, b in zip(value, old + [0] * (len(value) - len(old)))]
        else:
            out[key] = value - (old or 0)
    return out


def _add(total: dict, delta: dict) -> None:
    for key, value in delta.items():
        if isinstance(value, list):
            old = total.get(key, [])
            width = max(len(old), len(value))
            total[key] = [(old[i] if i < len(old) else 0) + (value[i] if i < len(value) else 0) for i in range(width)]
        else:
            total[key] = total.get(key, 0) + value


def _threads() -> int:
    import torch

    return int(torch.get_num_threads())


def set_threads(threads: int) -> None:
    """torch's intra-op threads, which vLLM's CPU kernels and matmuls use (OpenMP), for the engines of this process,
    called before and after each engine start. vLLM's CPU worker replaces ``torch.set_num_threads`` with a no-op at its
    first start (v1/worker/cpu_worker.py:139-145, for a thread binding the adapter turns off:
    ``VLLM_CPU_OMP_THREADS_BIND=nobind``), so the builtin is called; the n-gram proposer sets numba's threads to 1 and
    back to numba's count around each proposal (v1/spec_decode/ngram_proposer.py:100-126), which resets OpenMP's, so
    numba's count is set too once vLLM imported it. Threads change no law: the kernels compute the same rows."""
    import torch

    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    torch._C.set_num_threads(threads)


def _effective_config(llm, options: Mapping) -> dict:
    """What one engine runs, read back from its ``vllm_config`` and vLLM's kernel registry (engine_info)."""
    config = llm.llm_engine.vllm_config
    sched, spec = config.scheduler_config, config.speculative_config
    out = {
        "model_runner": "v2" if config.use_v2_model_runner else "v1",  # v1 without Triton (config/vllm.py:724)
        "async_scheduling": bool(sched.async_scheduling),  # forced off on CPU (platforms/cpu.py:331)
        "max_num_seqs": int(sched.max_num_seqs),
        "max_num_batched_tokens": int(sched.max_num_batched_tokens),
        "chunked_prefill": bool(getattr(sched, "enable_chunked_prefill", False)),
        "prefix_caching": bool(getattr(config.cache_config, "enable_prefix_caching", False)),
        "num_gpu_blocks": int(getattr(config.cache_config, "num_gpu_blocks", None) or 0),  # KV blocks (preempt)
        "parallel_n": bool(options["parallel_n"]),  # the adapter's packing (vllm_configs), not vLLM's
        "dtype": str(config.model_config.dtype).removeprefix("torch."),
        "workaround": list(vllm_patches.workarounds_of(options["workaround"])),
        "expand_kernel": vllm_patches.bound_expand_kernel(),
        "min_tokens_bonus": vllm_patches.bound_min_tokens_bonus(),
        "random_sample_kernel": vllm_patches.bound_padded_drafts(),  # padded-drafts (finding 13)
        "padded_draft_probs": vllm_patches.bound_padded_draft_probs(),  # padded-draft-probs (finding 14)
        "missed_draft_probs": vllm_patches.bound_missed_draft_probs(),  # missed-draft-probs (finding 15)
        "threads": _threads(),
    }
    if spec is not None:
        out.update(
            method=str(spec.method),
            num_speculative_tokens=int(spec.num_speculative_tokens),
            draft_sample_method=str(spec.draft_sample_method),
            rejection_sample_method=str(spec.rejection_sample_method),
            # the drafter keeps its probabilities for the ratio test only then (v1/spec_decode/llm_base_proposer.py:258)
            draft_probs_used=spec.method not in ("ngram", "suffix")
            and spec.rejection_sample_method == "standard"
            and spec.draft_sample_method == "probabilistic",
            stop_metrics=_vllm_engine_patches.running_metrics_attached(llm),
            grammar_cut_drafts=_vllm_engine_patches.cut_drafts_kept(llm),  # grammar-cut-drafts (finding 12)
        )
        drafter = getattr(spec, "draft_model_config", None)  # None for ngram; mtp: the target's MTP layers
        if drafter is not None:
            out["draft_architectures"] = list(getattr(drafter.hf_config, "architectures", None) or [])
            out["n_predict"] = getattr(drafter.hf_config, "n_predict", None)
    return out


def _check_request(request: Request, method: str, structured: bool = False) -> None:
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
    if p.grammar is not None:  # checked by _check_request: a RegexGrammar (text form) under structured_outputs
        from vllm.sampling_params import StructuredOutputsParams

        kwargs["structured_outputs"] = StructuredOutputsParams(regex=text_form(p.grammar))
    if p.is_set("bad_token_ids"):
        allowed = [t for t in range(vocab_size) if t not in set(p.bad_token_ids)]
        if not allowed:
            raise InvalidArgument(f"bad_token_ids={p.bad_token_ids!r} bans every id; vLLM needs one allowed id.")
        kwargs["allowed_token_ids"] = allowed if p.bad_token_ids else None
    return kwargs | dict(max_tokens=int(p.max_tokens), seed=request.seed, skip_special_tokens=True)


def _vllm_params(request: Request, vocab_size: int, n: int = 1) -> object:
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
    gave the request only ``-1`` drafts in its first step (``vllm_configs.record_scheduled_drafts``); that step's round
    verified no drafter's tokens and emitted one target sample, the prefill's token, so it is left out.
    ``preempted``: vLLM preempted the request (``vllm_configs.record_preempted``); each resume samples a token
    outside any round, so its rounds cannot be placed among its tokens: ``accepted`` is None (not reported).
    ``short``: a step's token budget gave the request fewer drafts than proposed (``vllm_configs``, short rounds), so
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
        # else: vLLM lost this request's rounds (a stop string ended it: vllm_patches, "stop-metrics"); not reported
    return Completion(tokens=done.tokens, finish_reason=done.finish_reason, accepted=accepted)
