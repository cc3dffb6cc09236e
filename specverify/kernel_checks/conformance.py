"""Exact, deterministic conformance: given the same uniforms, a kernel's output equals the rule's, token for token.

The rule is ``sampling.residual_probs`` + ``sampling.sample_from_uniforms`` with the uniform layout of
``specverify.kernels.layout``; :func:`chain_rule_reference` applies it one request at a time (plain loops, no
batching tricks) and the torch twin applies it batched. Acceptance decisions (``u * draft_prob < target_prob`` in the
compute dtype) and zero tests of masses are exact in every implementation, so they must agree everywhere. Only the
inverse-CDF draw depends on summation order: a uniform within a relative ``tol`` of a CDF boundary (in float64) may
legitimately flip to the neighbouring token, so those draws alone are exempt (``chain_near_boundary``). A prefix sum
of non-negatives errs relative to its own value, so the test is relative: ``|u - cdf_i| <= tol * u``, and u = 0 is
never exempt.
Both need a kernel that is a function of the uniforms it is given: one that declares ``consumes_uniforms = False`` is
refused (``InvalidArgument`` naming ``round_law_test``), and so is one whose mismatches turn out to come from its own
randomness or from ignoring the uniforms (``randomness.uniform_use``, run only when there are mismatches).
Default ``tol`` is ``max(1e-6, 4 * sqrt(V) * eps)`` of the compute dtype: rounding errors of a length-V sum grow like
sqrt(V) * eps (the measured worst kernel-vs-twin gap at V = 5000, float32, was 12 eps; 4 * sqrt(V) is 283 eps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specverify.errors import check
from specverify.kernel_checks.randomness import categorical_uniform_use, refuse_own_randomness, uniform_use
from specverify.kernels.layout import (
    PAD_TOKEN_ID,
    STATUS_BAD_DRAFT_TOKEN,
    STATUS_BAD_LENGTH,
    STATUS_INVALID_PROBS,
    STATUS_NO_TOKEN,
    CategoricalResult,
    ChainInputs,
    ChainResult,
    check_categorical_args,
    check_chain_args,
    compute_dtype,
    describe_status,
)
from specverify.kernels.twins import categorical_sample_torch, chain_rejection_sample_torch, invalid_rows
from specverify.sampling import residual_probs, sample_from_uniforms

__all__ = [
    "ConformanceReport",
    "chain_rule_reference",
    "default_tol",
    "chain_near_boundary",
    "categorical_near_boundary",
    "check_chain_conformance",
    "check_categorical_conformance",
    "assert_chain_conformance",
    "assert_categorical_conformance",
]


def default_tol(vocab_size: int, dtype: torch.dtype) -> float:
    """Relative width of the exempt band around CDF boundaries (module docstring).

    Examples
    --------
    >>> round(default_tol(10_000, torch.float32), 8), default_tol(4, torch.float64)
    (4.768e-05, 1e-06)
    """
    return max(1e-6, 4 * vocab_size**0.5 * torch.finfo(compute_dtype(dtype)).eps)


def _rule_request(ids, n, target, draft, u_accept, u_recover, acc):  # one request -> (tokens, accepted, status)
    gamma, vocab = draft.shape[0], target.shape[1]
    if not 0 <= n <= gamma:
        return [], 0, STATUS_BAD_LENGTH
    status = STATUS_INVALID_PROBS if bool(invalid_rows(target[: n + 1]).any() | invalid_rows(draft[:n]).any()) else 0
    status |= STATUS_BAD_DRAFT_TOKEN if any(not 0 <= int(x) < vocab for x in ids[:n]) else 0
    if status:
        return [], 0, status
    final = n
    for k in range(n):
        x = int(ids[k])
        target_prob, draft_prob = target[k, x].to(acc), draft[k, x].to(acc)
        if not (bool(draft_prob > 0) and bool(u_accept[k].to(acc) * draft_prob < target_prob)):
            final = k
            break
    row = target[final].to(acc)
    probs = residual_probs(row, draft[final].to(acc)) if final < n else row
    token = int(sample_from_uniforms(probs[None], u_recover[final].to(acc)[None])[0])
    tokens = [int(x) for x in ids[:final]] + ([token] if token >= 0 else [])
    return tokens, final, 0 if token >= 0 else STATUS_NO_TOKEN


def chain_rule_reference(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    u_accept: torch.Tensor,
    u_recover: torch.Tensor,
) -> ChainResult:
    """The rule applied one request at a time with ``sampling``'s functions: slow, plain, the spec in code.

    Examples
    --------
    >>> out = chain_rule_reference(torch.tensor([[0]]), torch.tensor([1]), torch.tensor([[[1.0, 0.0]]]),
    ...                            torch.tensor([[[0.5, 0.5], [0.0, 1.0]]]), torch.tensor([[0.25]]),
    ...                            torch.tensor([[0.0, 0.0]]))
    >>> out.tokens.tolist(), out.num_accepted.tolist(), out.status.tolist()
    ([[0, 1]], [1], [0])
    """
    batch, gamma, _ = check_chain_args(
        draft_token_ids, num_draft_tokens, draft_probs, target_probs, u_accept, u_recover
    )
    acc = compute_dtype(target_probs.dtype)
    tokens = torch.full((batch, gamma + 1), PAD_TOKEN_ID, dtype=torch.int64)
    accepted = torch.zeros(batch, dtype=torch.int32)
    status = torch.zeros(batch, dtype=torch.int32)
    for r in range(batch):
        row, accepted[r], status[r] = _rule_request(
            draft_token_ids[r].cpu(),
            int(num_draft_tokens[r]),
            target_probs[r].cpu(),
            draft_probs[r].cpu(),
            u_accept[r].cpu(),
            u_recover[r].cpu(),
            acc,
        )
        tokens[r, : len(row)] = torch.tensor(row, dtype=torch.int64)
    return ChainResult(tokens, accepted, status)


def _flips(probs64, u64, tol):  # [B, V] float64, [B] float64 -> bool [B]: u within relative tol of a boundary
    return sample_from_uniforms(probs64, u64 * (1 - tol)) != sample_from_uniforms(probs64, u64 * (1 + tol))


def chain_near_boundary(inputs: ChainInputs, reference: ChainResult, *, tol: float | None = None) -> torch.Tensor:
    """bool [B]: requests whose recovered/bonus draw lies within ``tol`` of a CDF boundary of its row (float64).

    ``reference`` supplies the final position (``num_accepted``); error and no-token requests are never exempt.
    """
    ids, num_draft, draft_probs, target_probs, _, u_recover = inputs
    tol = default_tol(target_probs.shape[2], target_probs.dtype) if tol is None else tol
    acc = compute_dtype(target_probs.dtype)
    final = reference.num_accepted.long().cpu()
    n = num_draft.long().cpu().clamp(0, ids.shape[1])
    rows = torch.arange(final.shape[0])
    target_row = target_probs.cpu()[rows, final].double()
    draft_row = draft_probs.cpu()[rows, final.clamp_max(ids.shape[1] - 1)].double()
    probs = torch.where((final < n)[:, None], residual_probs(target_row, draft_row), target_row)
    u = u_recover.cpu().to(acc).gather(-1, final[:, None]).squeeze(-1).double()
    drew = (
        reference.status.cpu() & (STATUS_INVALID_PROBS | STATUS_BAD_DRAFT_TOKEN | STATUS_BAD_LENGTH | STATUS_NO_TOKEN)
    ) == 0
    return drew & _flips(probs.nan_to_num(0.0), u, tol)


def categorical_near_boundary(probs: torch.Tensor, uniforms: torch.Tensor, *, tol: float | None = None) -> torch.Tensor:
    """bool [B]: rows whose uniform lies within ``tol`` (relative) of a CDF boundary of the row (float64)."""
    tol = default_tol(probs.shape[1], probs.dtype) if tol is None else tol
    u = uniforms.cpu().to(compute_dtype(probs.dtype)).double()
    return _flips(probs.cpu().double().nan_to_num(0.0), u, tol) & ~invalid_rows(probs.cpu())


@dataclass(frozen=True)
class ConformanceReport:
    """``mismatches``: request indices that differ outside the exempt draws; ``details``: the first few, readable."""

    num_requests: int
    num_exempt: int
    mismatches: tuple
    details: tuple

    @property
    def passed(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        head = (
            f"{self.num_requests} requests, {self.num_exempt} exempt (near a CDF boundary), "
            f"{len(self.mismatches)} mismatching"
        )
        return "\n".join((head,) + self.details)


def _describe(r, actual, expected, names) -> str:
    def one(result):
        return (
            f"tokens={result.tokens[r].tolist()} accepted={int(result.num_accepted[r])} "
            f"status={describe_status(int(result.status[r]))}"
        )

    return f"  request {r}: {names[0]} {one(actual)} != {names[1]} {one(expected)}"


def compare_chain_results(
    actual: ChainResult,
    expected: ChainResult,
    exempt: torch.Tensor,
    *,
    names: tuple[str, str] = ("kernel", "reference"),
) -> ConformanceReport:
    """Equal tokens, counts and status, except the final token of exempt requests."""
    actual = ChainResult(*(t.cpu() for t in actual))
    expected = ChainResult(*(t.cpu() for t in expected))
    final = expected.num_accepted.long()[:, None]
    positions = torch.arange(expected.tokens.shape[1])[None]
    skip = exempt.cpu()[:, None] & (positions == final)
    same = ((actual.tokens.long() == expected.tokens) | skip).all(-1)
    same &= (actual.num_accepted.long() == expected.num_accepted.long()) & (actual.status == expected.status)
    bad = tuple(int(r) for r in torch.nonzero(~same).flatten())
    return ConformanceReport(
        expected.tokens.shape[0], int(exempt.sum()), bad, tuple(_describe(r, actual, expected, names) for r in bad[:5])
    )


def _chain_inputs(kernel, inputs, reference) -> ChainInputs:
    check(
        callable(kernel),
        f"kernel={kernel!r} is not callable; pass a function with the signature of "
        "specverify.kernels.chain_rejection_sample (wrap an engine's kernel with an adapter).",
    )
    check(
        callable(reference),
        f"reference={reference!r} is not callable; pass a chain sampler, e.g. "
        "chain_rejection_sample_torch (the default).",
    )
    check(
        isinstance(inputs, tuple) and len(inputs) == 6,
        f"inputs of type {type(inputs).__name__} must be a ChainInputs (six tensors in call order).",
    )
    return ChainInputs(*inputs)


def check_chain_conformance(
    kernel: Callable[..., ChainResult],
    inputs: ChainInputs,
    *,
    reference: Callable[..., ChainResult] = chain_rejection_sample_torch,
    tol: float | None = None,
) -> ConformanceReport:
    """Run ``kernel(*inputs)`` and ``reference(*inputs)`` and compare them token for token (module docstring).

    Examples
    --------
    >>> inputs = ChainInputs(torch.tensor([[0]]), torch.tensor([1]), torch.tensor([[[0.5, 0.5]]]),
    ...                      torch.tensor([[[0.5, 0.5], [0.2, 0.8]]]), torch.tensor([[0.3]]),
    ...                      torch.tensor([[0.1, 0.6]]))
    >>> report = check_chain_conformance(chain_rule_reference, inputs)
    >>> report.passed, report.num_requests, report.num_exempt
    (True, 1, 0)
    """
    inputs = _chain_inputs(kernel, inputs, reference)
    refuse_own_randomness(kernel, "check_chain_conformance")
    expected = reference(*inputs)
    actual = kernel(*inputs)
    report = compare_chain_results(actual, expected, chain_near_boundary(inputs, expected, tol=tol))
    if not report.passed:
        probe = lambda: uniform_use(kernel, inputs, reference=reference)  # noqa: E731
        refuse_own_randomness(kernel, "check_chain_conformance", probe)
    return report


def assert_chain_conformance(
    kernel: Callable[..., ChainResult],
    inputs: ChainInputs,
    *,
    reference: Callable[..., ChainResult] = chain_rejection_sample_torch,
    tol: float | None = None,
) -> ConformanceReport:
    """:func:`check_chain_conformance`, raising ``AssertionError`` with the first mismatches."""
    report = check_chain_conformance(kernel, inputs, reference=reference, tol=tol)
    if not report.passed:
        raise AssertionError(report.summary())
    return report


def check_categorical_conformance(
    kernel: Callable[..., CategoricalResult],
    probs: torch.Tensor,
    uniforms: torch.Tensor,
    *,
    reference: Callable[..., CategoricalResult] = categorical_sample_torch,
    tol: float | None = None,
) -> ConformanceReport:
    """Run ``kernel(probs, uniforms)`` and ``reference`` and compare them token for token."""
    check(
        callable(kernel) and callable(reference),
        f"kernel={kernel!r}, reference={reference!r}: both must be callable with the signature of "
        "specverify.kernels.categorical_sample.",
    )
    check_categorical_args(probs, uniforms)
    refuse_own_randomness(kernel, "check_categorical_conformance")
    expected = CategoricalResult(*(t.cpu() for t in reference(probs, uniforms)))
    actual = CategoricalResult(*(t.cpu() for t in kernel(probs, uniforms)))
    exempt = categorical_near_boundary(probs, uniforms, tol=tol)
    same = ((actual.tokens == expected.tokens) | exempt) & (actual.status == expected.status)
    bad = tuple(int(r) for r in torch.nonzero(~same).flatten())
    details = tuple(
        f"  row {r}: kernel token {int(actual.tokens[r])} status {int(actual.status[r])} != reference "
        f"token {int(expected.tokens[r])} status {int(expected.status[r])}"
        for r in bad[:5]
    )
    if bad:
        refuse_own_randomness(
            kernel,
            "check_categorical_conformance",
            lambda: categorical_uniform_use(kernel, probs, uniforms, reference=reference),
        )
    return ConformanceReport(probs.shape[0], int(exempt.sum()), bad, details)


def assert_categorical_conformance(
    kernel: Callable[..., CategoricalResult],
    probs: torch.Tensor,
    uniforms: torch.Tensor,
    *,
    reference: Callable[..., CategoricalResult] = categorical_sample_torch,
    tol: float | None = None,
) -> ConformanceReport:
    """:func:`check_categorical_conformance`, raising ``AssertionError`` with the first mismatches."""
    report = check_categorical_conformance(kernel, probs, uniforms, reference=reference, tol=tol)
    if not report.passed:
        raise AssertionError(report.summary())
    return report
