"""The process side of the vLLM adapter: the engine environment and sizes, the table of live engines (least recently
used first, at most ``SPECVERIFY_VLLM_MAX_ENGINES``), their shutdown (``close_all``, at exit), the start-up guard
against numba's llvmlite module, the checks of what a decoder can load, torch's threads at each engine start, and what
an engine runs, read back from it (``engine_info["effective"]``). Nothing here imports vLLM at module level.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections import OrderedDict
from typing import Mapping

from specverify.adapters.vllm import patches
from specverify.errors import InvalidArgument

__all__ = [
    "MAX_MODEL_LEN",
    "MAX_NUM_SEQS",
    "ENV",
    "LIVE",
    "max_engines",
    "model_path",
    "HideLlvmliteLib",
    "check_draft_family",
    "shutdown",
    "close_all",
    "set_threads",
    "effective_config",
]

MAX_MODEL_LEN = 128  # the checkpoints' max_position_embeddings
MAX_NUM_SEQS = 1024
ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
LIVE: "OrderedDict[tuple, object]" = OrderedDict()  # (id(decoder), γ) -> LLM, least recently used first


def max_engines() -> int:
    value = os.environ.get("SPECVERIFY_VLLM_MAX_ENGINES", "1")
    if not value.isdigit() or int(value) < 1:
        raise InvalidArgument(f"SPECVERIFY_VLLM_MAX_ENGINES={value!r} must be an int >= 1.")
    return int(value)


def model_path(model, role: str) -> str:
    path = getattr(model, "path", None)
    if path is None:
        raise InvalidArgument(
            f"{role}={model!r} has no .path: the vLLM adapter loads checkpoints from disk, so it needs "
            "CheckpointModel s (CheckpointPairSpec(...).build(), or certify(..., models='checkpoint')); "
            "toy models cannot be loaded by vLLM."
        )
    return str(path)


class HideLlvmliteLib:
    """vLLM's CPU kernel registration scans every module's attributes (triton_utils/dispatcher.py:138) and breaks on
    ``llvmlite.binding.ffi.lib`` (its ``__dict__`` is a C function wrapper), so no engine can start in a process that
    has imported numba, as the n-gram proposer does. Hide that one module during start-up (docs/findings/vllm.md)."""

    def __enter__(self):
        self.module = sys.modules.pop("llvmlite.binding.ffi", None)

    def __exit__(self, *exc):
        if self.module is not None:
            sys.modules["llvmlite.binding.ffi"] = self.module


def check_draft_family(draft) -> None:
    family = getattr(draft, "family", "ar")
    if family != "ar":
        raise InvalidArgument(
            f"draft={type(draft).__name__} of family {family!r} (--drafts {family}): the vLLM adapter runs the AR "
            "matrix on the checkpoint pairs only (--models checkpoint, --drafts ar); the other draft families are toy "
            "objects vLLM cannot load. Leave --drafts out."
        )


def shutdown(llm) -> None:
    try:
        llm.llm_engine.engine_core.shutdown()
    finally:
        gc.collect()


def close_all() -> None:
    """Shut down every live engine of this process (registered with atexit)."""
    while LIVE:
        shutdown(LIVE.popitem(last=False)[1])


atexit.register(close_all)


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


def effective_config(llm, options: Mapping) -> dict:
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
        "parallel_n": bool(options["parallel_n"]),  # the adapter's packing (configs), not vLLM's
        "dtype": str(config.model_config.dtype).removeprefix("torch."),
        "workaround": list(patches.workarounds_of(options["workaround"])),
        "expand_kernel": patches.bound_expand_kernel(),
        "min_tokens_bonus": patches.bound_min_tokens_bonus(),
        "random_sample_kernel": patches.bound_padded_drafts(),  # padded-drafts (finding 13)
        "padded_draft_probs": patches.bound_padded_draft_probs(),  # padded-draft-probs (finding 14)
        "missed_draft_probs": patches.bound_missed_draft_probs(),  # missed-draft-probs (finding 15)
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
            stop_metrics=patches.running_metrics_attached(llm),
            grammar_cut_drafts=patches.cut_drafts_kept(llm),  # grammar-cut-drafts (finding 12)
        )
        drafter = getattr(spec, "draft_model_config", None)  # None for ngram; mtp: the target's MTP layers
        if drafter is not None:
            out["draft_architectures"] = list(getattr(drafter.hf_config, "architectures", None) or [])
            out["n_predict"] = getattr(drafter.hf_config, "n_predict", None)
    return out
