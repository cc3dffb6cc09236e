"""The per-engine workarounds of ``vllm_patches`` (``stop-metrics``, ``grammar-cut-drafts``; their reasons are in
its module docstring): wrappers of one in-process engine's scheduler methods, instance attributes, so nothing
process-global. ``attach_engine_workarounds`` is called once per speculative engine start."""

from __future__ import annotations

from specverify.adapters.vllm_patches import workarounds_of

__all__ = [
    "attach_engine_workarounds",
    "attach_running_metrics",
    "running_metrics_attached",
    "keep_cut_drafts",
    "cut_drafts_kept",
]


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
