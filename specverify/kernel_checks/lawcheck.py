"""Per-round law checks for a chain sampler: a deterministic uniform grid, and a statistical test.

A *sampler* is any callable with the signature of ``chain_rejection_sample`` (the twin, the kernel, an adapter
around an engine's kernel, a deliberately broken twin) returning a ``ChainResult``.

``check_grid_law`` needs a sampler that consumes the explicit uniforms. It enumerates the draft tokens weighted by
their draft probabilities and runs a stratified grid of uniforms over the n acceptance uniforms and the one recovery
uniform: ``j/M`` for j = 0..M-1 (u = 0 included), each of weight 1/M, plus the largest float below 1 with weight 0,
which can only reveal outcomes, never add mass. For a fixed draft sequence every outcome of the exact rule is a box
in uniform space (an interval per consumed uniform), and the grid fraction of an interval is within 1/M of its
length, so each outcome's grid mass is within (n+1)/M of its exact probability, deterministically: the check cannot
flake. Any outcome of exact probability 0 reached at any grid point fails outright; that is where measure-zero bugs
(inclusive acceptance at u = 0, a zero-probability token at u -> 1, NaN rows) live. Should a grid point lie within
1e-6 of an acceptance ratio or residual CDF boundary, float rounding may move it across, and the bound doubles.

``round_law_test`` is for samplers that draw their own randomness: N independent rounds of the case, a pooled
power-divergence test (``specverify.stats.goodness_of_fit``) against the exact law, and any outcome of exact
probability 0 rejects at once (p-value 0).

The grid needs a sampler that is a function of the uniforms it is fed; ``check_grid_law`` and ``grid_round_law``
refuse (``InvalidArgument`` naming ``round_law_test``) one that declares ``consumes_uniforms = False`` or that a
64-request probe shows to draw its own randomness or to ignore the uniforms (``randomness.uniform_use``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from specverify.errors import check
from specverify.kernel_checks.law import (
    RoundCase,
    RoundLaw,
    case_inputs,
    exact_round_law,
    format_outcome,
    outcome_of,
    outcome_rows,
)
from specverify.kernel_checks.randomness import probe_inputs, refuse_own_randomness, uniform_use
from specverify.kernels.layout import ChainResult
from specverify.sampling import residual_probs

__all__ = [
    "GridLawResult",
    "RoundLawTestResult",
    "grid_round_law",
    "check_grid_law",
    "round_law_test",
    "sampled_round_law",
]

_CHUNK = 1 << 18
Sampler = Callable[..., ChainResult]
"""A chain sampler: the signature of ``specverify.kernels.chain_rejection_sample``, returning a ``ChainResult``."""


def _check_common(sampler, case, chunk) -> None:
    check(
        callable(sampler),
        f"sampler={sampler!r} is not callable; pass a function with the signature of "
        "specverify.kernels.chain_rejection_sample (wrap an engine's kernel with an adapter).",
    )
    check(
        isinstance(case, RoundCase),
        f"case={case!r} must be a RoundCase; build one with RoundCase(target_probs, draft_probs).",
    )
    check(isinstance(chunk, int) and chunk >= 1, f"chunk={chunk!r} must be an int >= 1 (requests per sampler call).")


def _grid_points(grid_size: int, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:  # values [M+1], weights [M+1]
    below_one = torch.nextafter(torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype)).item()
    values = np.append(np.arange(grid_size) / grid_size, below_one)
    return values, np.append(np.full(grid_size, 1.0 / grid_size), 0.0)


def _run(sampler, case, ids, u_accept, u_recover, pad_to, device, chunk) -> np.ndarray:  # -> outcome rows [B, G+3]
    parts = []
    for start in range(0, ids.shape[0], chunk):
        stop = start + chunk
        inputs = case_inputs(
            case, ids[start:stop], u_accept[start:stop], u_recover[start:stop], pad_to=pad_to, device=device
        )
        parts.append(outcome_rows(sampler(*inputs)))
    return np.concatenate(parts)


def _tally(rows: np.ndarray, weights: np.ndarray) -> tuple[dict, tuple]:  # -> {outcome: mass}, every reached outcome
    # rows hold small non-negative integers after +1 (tokens >= -1): a mixed-radix key makes np.unique 1-D and fast
    shifted = rows - rows.min(0)
    radix = shifted.max(0) + 1
    if float(np.prod(radix.astype(np.float64))) < 2.0**62:
        keys = np.zeros(rows.shape[0], dtype=np.int64)
        for column, base in zip(shifted.T, radix):
            keys = keys * base + column
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        unique = rows[first]
    else:
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    mass = np.bincount(inverse.reshape(-1), weights=weights, minlength=unique.shape[0])
    outcomes = [outcome_of(row) for row in unique]
    return dict(zip(outcomes, mass.tolist())), tuple(outcomes)


def _refuse(sampler, case, check_name, pad_to, device) -> None:
    inputs = probe_inputs(case, pad_to=pad_to, device=device)
    refuse_own_randomness(sampler, check_name, lambda: uniform_use(sampler, inputs))


def grid_round_law(
    sampler: Sampler,
    case: RoundCase,
    *,
    grid_size: int = 64,
    pad_to: int | None = None,
    device: str | torch.device = "cpu",
    chunk: int = _CHUNK,
) -> tuple[dict, tuple]:
    """Run ``sampler`` on every (draft sequence, grid point) of ``case``; return ({outcome: grid mass}, reached).

    ``reached`` lists every outcome seen at any grid point, the zero-weight points just below 1 included. A sampler
    that does not consume the uniforms is refused (module docstring).
    """
    _check_common(sampler, case, chunk)
    _check_grid_size(grid_size)
    _refuse(sampler, case, "grid_round_law", pad_to, device)
    return _grid_round_law(sampler, case, grid_size, pad_to, device, chunk)


def _check_grid_size(grid_size) -> None:
    check(
        isinstance(grid_size, int) and grid_size >= 2,
        f"grid_size={grid_size!r} must be an int >= 2 (the grid has M = grid_size points per uniform; 64 is the "
        "default).",
    )


def _grid_round_law(sampler, case, grid_size, pad_to, device, chunk) -> tuple[dict, tuple]:
    n = case.num_draft_tokens
    seq_ids, seq_weights = case.draft_sequences()  # [S, n], [S]
    values, weights = _grid_points(grid_size, case.dtype)
    mesh = np.stack(np.meshgrid(*[np.arange(values.size)] * (n + 1), indexing="ij"), -1).reshape(-1, n + 1)
    point_u, point_w = values[mesh], weights[mesh].prod(-1)  # [P, n+1], [P]
    ids = np.repeat(seq_ids, point_u.shape[0], axis=0)
    u = np.tile(point_u, (seq_ids.shape[0], 1))
    w = np.outer(seq_weights, point_w).reshape(-1)
    rows = _run(sampler, case, ids, u[:, :n], u[:, n], pad_to, device, chunk)
    return _tally(rows, w)


def _boundaries(case: RoundCase) -> np.ndarray:
    """Acceptance ratios and normalised CDF boundaries of every residual and bonus row, strictly inside (0, 1)."""
    if not case.valid:
        return np.zeros(0)
    target, draft = torch.as_tensor(case.target_probs), torch.as_tensor(case.draft_probs)
    found = []
    for k in range(case.num_draft_tokens):
        support = draft[k] > 0
        found.append((target[k][support] / draft[k][support]).numpy())
        found.append(_cdf(residual_probs(target[k], draft[k])))
    found.append(_cdf(target[-1]))
    edges = np.concatenate(found)
    return edges[(edges > 0) & (edges < 1)]


def _cdf(row: torch.Tensor) -> np.ndarray:
    mass = float(row.sum())
    return np.cumsum(row.numpy()) / mass if mass > 0 else np.zeros(0)


@dataclass(frozen=True)
class GridLawResult:
    """Outcome of :func:`check_grid_law`.

    ``max_error`` is the largest |grid mass - exact probability| over all outcomes and ``bound`` the deterministic
    limit (n+1)/M (doubled near float ties); ``impossible`` lists reached outcomes of exact probability 0.
    """

    passed: bool
    max_error: float
    bound: float
    worst: tuple | None
    impossible: tuple
    grid_size: int
    num_points: int
    exact: RoundLaw
    observed: dict

    def summary(self) -> str:
        verdict = "matches" if self.passed else "DOES NOT match"
        lines = [
            f"grid law {verdict} the exact law: max error {self.max_error:.4g} (bound {self.bound:.4g}, "
            f"M={self.grid_size}, {self.num_points} points)"
        ]
        lines += [f"  impossible outcome reached: {format_outcome(o)}" for o in self.impossible[:5]]
        if self.worst is not None and not self.impossible:
            exact = self.exact.as_dict().get(self.worst, 0.0)
            lines.append(
                f"  worst: {format_outcome(self.worst)} grid {self.observed.get(self.worst, 0.0):.4g} vs "
                f"exact {exact:.4g}"
            )
        return "\n".join(lines)


def check_grid_law(
    sampler: Sampler,
    case: RoundCase,
    *,
    grid_size: int = 64,
    pad_to: int | None = None,
    device: str | torch.device = "cpu",
    chunk: int = _CHUNK,
) -> GridLawResult:
    """Compare ``sampler``'s law on the uniform grid with :func:`exact_round_law` (module docstring); a sampler that
    draws its own randomness or ignores the uniforms is refused with ``InvalidArgument`` (use :func:`round_law_test`).

    Examples
    --------
    >>> from specverify.kernels import chain_rejection_sample_torch
    >>> case = RoundCase([[0.6, 0.4], [0.3, 0.7]], [[0.5, 0.5]])
    >>> check_grid_law(chain_rejection_sample_torch, case, grid_size=32).passed
    True
    """
    _check_common(sampler, case, chunk)
    _check_grid_size(grid_size)
    _refuse(sampler, case, "check_grid_law", pad_to, device)
    exact = exact_round_law(case)
    observed, reached = _grid_round_law(sampler, case, grid_size, pad_to, device, chunk)
    support = exact.as_dict()
    impossible = tuple(o for o in reached if o not in support)
    errors = {o: abs(observed.get(o, 0.0) - support.get(o, 0.0)) for o in set(support) | set(observed)}
    worst = max(errors, key=errors.get) if errors else None
    edges = _boundaries(case)
    tied = bool(np.any(np.abs(edges * grid_size - np.round(edges * grid_size)) <= 1e-6 * grid_size))
    bound = (case.num_draft_tokens + 1) / grid_size * (2 if tied else 1) + 1e-9
    max_error = errors[worst] if worst is not None else 0.0
    num_points = case.draft_sequences()[0].shape[0] * (grid_size + 1) ** (case.num_draft_tokens + 1)
    return GridLawResult(
        not impossible and max_error <= bound,
        max_error,
        bound,
        worst,
        impossible,
        grid_size,
        num_points,
        exact,
        observed,
    )


def sampled_round_law(
    sampler: Sampler,
    case: RoundCase,
    *,
    num_samples: int,
    seed: int,
    pad_to: int | None = None,
    device: str | torch.device = "cpu",
    chunk: int = _CHUNK,
) -> dict:
    """{outcome: count} over ``num_samples`` independent rounds: drafts drawn from the draft rows and uniforms from
    ``numpy.random.default_rng(seed)`` (a sampler with its own randomness ignores the uniforms)."""
    _check_common(sampler, case, chunk)
    check(
        isinstance(num_samples, int) and num_samples >= 1,
        f"num_samples={num_samples!r} must be an int >= 1 (the number of independent rounds to run).",
    )
    rng = np.random.default_rng(seed)
    n = case.num_draft_tokens
    seq_ids, seq_weights = case.draft_sequences()
    ids = seq_ids[rng.choice(seq_ids.shape[0], size=num_samples, p=seq_weights / seq_weights.sum())]
    below_one = _grid_points(2, case.dtype)[0][-1]
    uniforms = np.minimum(rng.random((num_samples, n + 1)), below_one)  # float32 rounding must not reach 1
    rows = _run(sampler, case, ids, uniforms[:, :n], uniforms[:, n], pad_to, device, chunk)
    counts, _ = _tally(rows, np.ones(num_samples))
    return {o: int(round(c)) for o, c in counts.items()}


@dataclass(frozen=True)
class RoundLawTestResult:
    """Outcome of :func:`round_law_test`, with scipy's field names.

    ``passed`` is ``pvalue > alpha`` with no impossible outcome; ``reproduce`` is the call that repeats the test.

    Notes
    -----
    The p-value is the pooled power-divergence test's (valid when pooled expected counts are >= 5, which the
    pooling ensures); it is 0 when an outcome of exact probability 0 was observed (``impossible``).
    """

    statistic: float
    pvalue: float
    df: int
    num_samples: int
    impossible: tuple
    counts: dict
    exact: RoundLaw
    alpha: float = 1e-6
    reproduce: str = ""

    @property
    def passed(self) -> bool:
        return not self.impossible and self.pvalue > self.alpha

    def worst(self) -> tuple | None:
        """The in-support outcome with the largest standardised residual |observed - expected| / sqrt(expected)."""
        expected = self.exact.probs * self.num_samples
        observed = np.array([self.counts.get(o, 0) for o in self.exact.outcomes])
        residuals = np.abs(observed - expected) / np.sqrt(expected)
        return self.exact.outcomes[int(residuals.argmax())] if residuals.size else None

    def summary(self) -> str:
        lines = [
            f"per-round law test: N={self.num_samples}, statistic={self.statistic:.4g}, df={self.df}, "
            f"p={self.pvalue:.3g}"
        ]
        lines += [f"  impossible outcome observed {self.counts[o]}x: {format_outcome(o)}" for o in self.impossible[:5]]
        worst = self.worst()
        if not self.passed and worst is not None:
            prob = dict(zip(self.exact.outcomes, self.exact.probs.tolist()))[worst]
            lines.append(
                f"  worst: {format_outcome(worst)} observed {self.counts.get(worst, 0)}x, expected "
                f"{prob * self.num_samples:.1f}x"
            )
        lines += [f"  {self.reproduce}"] if self.reproduce and not self.passed else []
        return "\n".join(lines)


def _reproduce_line(sampler, num_samples, seed, alpha) -> str:
    name = getattr(sampler, "__qualname__", type(sampler).__name__)
    own = getattr(sampler, "seed", None)
    built = f" (sampler built with seed={own!r}, fresh)" if own is not None else ""
    return f"Reproduce: round_law_test({name}, case, num_samples={num_samples}, seed={seed}, alpha={alpha}){built}"


def round_law_test(
    sampler: Sampler,
    case: RoundCase,
    *,
    num_samples: int = 20_000,
    seed: int = 0,
    alpha: float = 1e-6,
    pad_to: int | None = None,
    device: str | torch.device = "cpu",
    chunk: int = _CHUNK,
) -> RoundLawTestResult:
    """Statistical per-round law test for samplers that draw their own randomness (module docstring), at level
    ``alpha``: ``passed`` is False when ``pvalue <= alpha`` or an impossible outcome was observed.

    Reproduce a failure with the same ``seed`` (and the sampler's own seed, if it has one: the ``reproduce`` line).

    Examples
    --------
    >>> from specverify.kernels import chain_rejection_sample_torch
    >>> from specverify.kernel_checks.randomness import drawing_own_uniforms
    >>> own = drawing_own_uniforms(chain_rejection_sample_torch, generator=torch.Generator().manual_seed(0))
    >>> round_law_test(own, RoundCase([[0.6, 0.4], [0.3, 0.7]], [[0.5, 0.5]]), num_samples=5000, seed=1).passed
    True
    """
    from specverify.stats import goodness_of_fit

    _check_common(sampler, case, chunk)
    check(
        isinstance(alpha, float) and 0 < alpha < 1,
        f"alpha={alpha!r} must be a float in (0, 1), the test's false-alarm rate; 1e-6 is the default.",
    )
    exact = exact_round_law(case)
    counts = sampled_round_law(
        sampler, case, num_samples=num_samples, seed=seed, pad_to=pad_to, device=device, chunk=chunk
    )
    support = exact.as_dict()
    impossible = tuple(o for o in counts if o not in support)
    in_support = [counts.get(o, 0) for o in exact.outcomes]
    gof = goodness_of_fit(in_support, exact.probs) if sum(in_support) else None  # None: every sample impossible
    statistic = float(gof.statistic) if gof is not None else float("inf")
    pvalue = 0.0 if impossible or gof is None else float(gof.pvalue)
    df = int(gof.df) if gof is not None else 0
    reproduce = _reproduce_line(sampler, num_samples, seed, alpha)
    return RoundLawTestResult(statistic, pvalue, df, num_samples, impossible, counts, exact, alpha, reproduce)
