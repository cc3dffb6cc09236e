"""The process side of the vLLM adapter (``specverify.adapters.vllm``): the engine environment and sizes, the table of
live engines (least recently used first, at most ``SPECVERIFY_VLLM_MAX_ENGINES``), their shutdown (``close_all``, at
exit), the start-up guard against numba's llvmlite module, and the checks of what a decoder can load. Kept apart from
``VllmDecoder`` so that ``vllm.py`` holds the decoder and its factories; nothing here imports vLLM.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections import OrderedDict

from specverify.errors import InvalidArgument

__all__ = ["MAX_MODEL_LEN", "MAX_NUM_SEQS", "close_all"]

MAX_MODEL_LEN = 128  # the checkpoints' max_position_embeddings
MAX_NUM_SEQS = 1024
_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
_LIVE: "OrderedDict[tuple, object]" = OrderedDict()  # (id(decoder), γ) -> LLM, least recently used first


def _max_engines() -> int:
    value = os.environ.get("SPECVERIFY_VLLM_MAX_ENGINES", "1")
    if not value.isdigit() or int(value) < 1:
        raise InvalidArgument(f"SPECVERIFY_VLLM_MAX_ENGINES={value!r} must be an int >= 1.")
    return int(value)


def _path(model, role: str) -> str:
    path = getattr(model, "path", None)
    if path is None:
        raise InvalidArgument(
            f"{role}={model!r} has no .path: the vLLM adapter loads checkpoints from disk, so it needs "
            "CheckpointModel s (CheckpointPairSpec(...).build(), or certify(..., models='checkpoint')); "
            "toy models cannot be loaded by vLLM."
        )
    return str(path)


class _HideLlvmliteLib:
    """vLLM's CPU kernel registration scans every module's attributes (triton_utils/dispatcher.py:138) and breaks on
    ``llvmlite.binding.ffi.lib`` (its ``__dict__`` is a C function wrapper), so no engine can start in a process that
    has imported numba, as the n-gram proposer does. Hide that one module during start-up (docs/findings/vllm.md)."""

    def __enter__(self):
        self.module = sys.modules.pop("llvmlite.binding.ffi", None)

    def __exit__(self, *exc):
        if self.module is not None:
            sys.modules["llvmlite.binding.ffi"] = self.module


def _check_draft_family(draft) -> None:
    family = getattr(draft, "family", "ar")
    if family != "ar":
        raise InvalidArgument(
            f"draft={type(draft).__name__} of family {family!r} (--drafts {family}): the vLLM adapter runs the AR "
            "matrix on the checkpoint pairs only (--models checkpoint, --drafts ar); the other draft families are toy "
            "objects vLLM cannot load. Leave --drafts out."
        )


def _shutdown(llm) -> None:
    try:
        llm.llm_engine.engine_core.shutdown()
    finally:
        gc.collect()


def close_all() -> None:
    """Shut down every live engine of this process (registered with atexit)."""
    while _LIVE:
        _shutdown(_LIVE.popitem(last=False)[1])


atexit.register(close_all)
