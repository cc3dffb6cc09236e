"""Whether a sampler consumes the uniforms it is given: the precondition of the grid law and of conformance.

``check_grid_law`` and the conformance checks feed explicit uniforms and read the result as a function of them. A
sampler that draws its own randomness (an engine's kernel: vLLM's ``rejection_sample`` calls ``torch.rand`` itself)
or ignores the uniforms breaks that precondition, and what those checks would report is a random sample dressed as a
deterministic answer. They refuse such a sampler instead (``InvalidArgument`` naming ``round_law_test``).

A sampler *declares* that it draws its own randomness with the attribute ``consumes_uniforms = False`` (every engine
adapter in ``specverify.kernel_checks`` sets it). Undeclared ones are *detected* by :func:`uniform_use`: the same
inputs twice must give the same outputs, and shifted uniforms must change the output wherever they change the torch
twin's. :func:`drawing_own_uniforms` turns any sampler into one that draws its own (the calibration control of
``round_law_test``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.kernels.layout import ChainResult, check_chain_args, compute_dtype

__all__ = [
    "declares_own_randomness",
    "uniform_use",
    "categorical_uniform_use",
    "refuse_own_randomness",
    "drawing_own_uniforms",
]

PROBE_ROWS = 64
_MIN_SENSITIVE = 4  # rows whose twin output moves under shifted uniforms before "ignores them" can be concluded
_INSTEAD = (
    "use round_law_test(sampler, case, num_samples=..., seed=...) (or check_kernel_law, which picks it), the "
    "statistical per-round law test for samplers that draw their own randomness"
)


def declares_own_randomness(sampler) -> bool:
    """True when ``sampler`` says it draws its own randomness (``consumes_uniforms = False``)."""
    return getattr(sampler, "consumes_uniforms", True) is False


def _same(a: ChainResult, b: ChainResult) -> torch.Tensor:  # -> bool [B]: rows with equal tokens, counts, status
    a, b = ChainResult(*(t.cpu() for t in a)), ChainResult(*(t.cpu() for t in b))
    same = (a.tokens.long() == b.tokens.long()).all(-1)
    return same & (a.num_accepted.long() == b.num_accepted.long()) & (a.status.long() == b.status.long())


def _shifted(u: torch.Tensor) -> torch.Tensor:  # the uniforms moved by 1/2 (mod 1); NaN stays NaN
    return torch.remainder(u.double() + 0.5, 1.0).to(u.dtype)


def _verdict(repeat_same: torch.Tensor, moved: torch.Tensor, still: torch.Tensor) -> str | None:
    differing = int((~repeat_same).sum())
    if differing:
        return f"two calls on the same inputs differ on {differing} of {repeat_same.shape[0]} requests"
    if int(moved.sum()) >= _MIN_SENSITIVE and bool(still[moved].all()):
        return (
            f"shifting every uniform by 1/2 changed the reference's output on {int(moved.sum())} requests and "
            "the sampler's on none"
        )
    return None


def uniform_use(sampler: Callable, inputs, *, reference: Callable | None = None) -> str | None:
    """None when ``sampler`` behaves as a function of the given uniforms on ``inputs`` (a ``ChainInputs``), else the
    reason: its output changed between two calls on the same inputs (it draws its own randomness), or shifting every
    uniform by 1/2 left its output unchanged on every request where ``reference``'s (the torch twin's) changed, and
    there were at least four such requests (it ignores them).

    Notes
    -----
    Three calls of ``sampler`` and two of ``reference``: cheap on a probe batch (the checks use 64 requests). A
    sampler whose own randomness never shows on the probe (a degenerate case, one outcome per draft sequence) passes,
    and then it cannot matter for that case.
    """
    from specverify.kernels.twins import chain_rejection_sample_torch

    reference = chain_rejection_sample_torch if reference is None else reference
    check_chain_args(*inputs)
    first = sampler(*inputs)
    repeat_same = _same(first, sampler(*inputs))
    shifted = type(inputs)(*inputs[:4], _shifted(inputs[4]), _shifted(inputs[5]))
    moved = ~_same(reference(*inputs), reference(*shifted))
    return _verdict(repeat_same, moved, _same(first, sampler(*shifted)))


def categorical_uniform_use(kernel: Callable, probs, uniforms, *, reference: Callable | None = None) -> str | None:
    """:func:`uniform_use` for a categorical kernel ``kernel(probs, uniforms)``."""
    from specverify.kernels.twins import categorical_sample_torch

    reference = categorical_sample_torch if reference is None else reference

    def same(a, b):
        return (a.tokens.cpu() == b.tokens.cpu()) & (a.status.cpu() == b.status.cpu())

    first = kernel(probs, uniforms)
    repeat_same = same(first, kernel(probs, uniforms))
    shifted = _shifted(uniforms)
    moved = ~same(reference(probs, uniforms), reference(probs, shifted))
    return _verdict(repeat_same, moved, same(first, kernel(probs, shifted)))


def refuse_own_randomness(sampler: Callable, check_name: str, probe=None) -> None:
    """Raise ``InvalidArgument`` when ``sampler`` declares its own randomness, or when ``probe`` (a zero-argument
    callable returning :func:`uniform_use`'s answer, or None to skip detection) finds it does not consume the
    uniforms; ``check_name`` names the refusing check."""
    if declares_own_randomness(sampler):
        raise InvalidArgument(
            f"sampler={sampler!r} declares consumes_uniforms=False (it draws its own randomness), so {check_name} "
            f"cannot apply: it reads the output as a function of the uniforms it feeds. Instead {_INSTEAD}."
        )
    reason = None if probe is None else probe()
    if reason is not None:
        raise InvalidArgument(
            f"sampler={sampler!r} does not consume the uniforms it is given ({reason}), so {check_name} cannot "
            f"apply. If it draws its own randomness, set sampler.consumes_uniforms = False and {_INSTEAD}."
        )


def probe_inputs(case, *, pad_to=None, device="cpu", rows: int = PROBE_ROWS):
    """``ChainInputs`` of ``rows`` copies of ``case`` with drafts and interior uniforms from a fixed seed."""
    from specverify.kernel_checks.law import case_inputs

    rng = np.random.default_rng(20_241_202)
    seq_ids, seq_weights = case.draft_sequences()
    ids = seq_ids[rng.choice(seq_ids.shape[0], size=rows, p=seq_weights / seq_weights.sum())]
    uniforms = rng.uniform(0.01, 0.99, size=(rows, case.num_draft_tokens + 1))
    return case_inputs(case, ids, uniforms[:, :-1], uniforms[:, -1], pad_to=pad_to, device=device)


def drawing_own_uniforms(sampler: Callable, *, generator: torch.Generator) -> Callable:
    """``sampler`` with its uniforms replaced by fresh ``torch.rand`` draws from ``generator`` on every call (u_accept
    first, then u_recover), flagged ``consumes_uniforms = False``: a correct one is the calibration control of
    ``round_law_test``.

    Examples
    --------
    >>> from specverify.kernels import chain_rejection_sample_torch
    >>> own = drawing_own_uniforms(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(0))
    >>> own.consumes_uniforms, declares_own_randomness(own)
    (False, True)
    """
    check(callable(sampler), f"sampler={sampler!r} is not callable; pass a chain sampler.")
    check(
        isinstance(generator, torch.Generator),
        f"generator={generator!r} must be a torch.Generator; pass torch.Generator().manual_seed(seed).",
    )

    def own(draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover) -> ChainResult:
        acc = compute_dtype(target_probs.dtype)
        fresh_accept = torch.rand(u_accept.shape, generator=generator, dtype=acc).to(u_accept.device)
        fresh_recover = torch.rand(u_recover.shape, generator=generator, dtype=acc).to(u_recover.device)
        return sampler(draft_token_ids, num_draft_tokens, draft_probs, target_probs, fresh_accept, fresh_recover)

    own.consumes_uniforms = False
    own.__qualname__ = f"drawing_own_uniforms({getattr(sampler, '__qualname__', repr(sampler))})"
    return own
