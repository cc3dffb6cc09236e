"""``assert_kernel_conforms``: a team's verification kernel against the exact per-round law, with a readable failure.

Three signatures: ``style="chain"`` (the signature of ``specverify.kernels.chain_rejection_sample``: explicit
uniforms), ``"vllm"`` and ``"flashinfer"`` (engine signatures, wrapped with ``from_vllm_style`` /
``from_flashinfer_style``). An explicit-uniform kernel is compared token for token with the torch twin on seeded
inputs and its law is checked on the deterministic uniform grid (cannot flake); a kernel that draws its own
randomness gets the statistical per-round law test, each case at ``alpha / len(cases)``.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from specverify.errors import check

__all__ = ["assert_kernel_conforms", "default_cases", "STYLES"]

STYLES = ("chain", "vllm", "flashinfer")


def default_cases() -> list:
    """Round cases where the usual kernel bugs show: residuals of several tokens (a reused uniform), rows that
    differ by position (a row offset), a draft token of target probability 0, γ = 1..3."""
    from specverify.kernel_checks import RoundCase

    return [
        RoundCase([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.1, 0.1, 0.4, 0.4]], name="gamma1"),
        RoundCase(
            [[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]],
            [[0.1, 0.1, 0.4, 0.4], [0.4, 0.4, 0.1, 0.1]],
            name="gamma2",
        ),
        RoundCase([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.3, 0.3, 0.4]], name="zero_target_draft"),
    ]


def _seeded_inputs(case, batch: int, seed: int):
    import numpy as np

    from specverify.kernel_checks.law import case_inputs

    rng = np.random.default_rng(seed)
    ids, weights = case.draft_sequences()
    draft_ids = ids[rng.choice(ids.shape[0], size=batch, p=weights / weights.sum())]
    u_accept = rng.random((batch, case.num_draft_tokens))
    u_recover = rng.random(batch) * (1 - 2**-24)  # float32 rounding must not reach 1
    return case_inputs(case, draft_ids, u_accept, u_recover)


def _chain_failures(kernel, case, grid_size, seed, batch) -> list:
    from specverify.kernel_checks import check_chain_conformance, check_grid_law

    out = []
    report = check_chain_conformance(kernel, _seeded_inputs(case, batch, seed))
    if not report.passed:
        out.append(f"token for token vs the torch twin ({batch} seeded rounds, seed {seed}): {report.summary()}")
    grid = check_grid_law(kernel, case, grid_size=grid_size)
    if not grid.passed:
        out.append(grid.summary())
    return out


def _law_failures(sampler, case, num_samples, seed, alpha) -> list:
    from specverify.kernel_checks import round_law_test

    result = round_law_test(sampler, case, num_samples=num_samples, seed=seed)
    if result.impossible or result.pvalue < alpha:
        head, *rest = result.summary().splitlines()
        return ["\n".join([f"{head} < α = {alpha:.2g}", *rest])]
    return []


def assert_kernel_conforms(
    kernel: Callable,
    *,
    style: str = "chain",
    cases: Optional[Sequence] = None,
    grid_size: int = 32,
    num_samples: int = 20_000,
    batch: int = 256,
    seed: int = 0,
    alpha: float = 1e-6,
) -> int:
    """Fail unless ``kernel`` applies the exact rule on every case (``default_cases()`` when None); returns the
    number of cases checked. ``seed`` seeds the conformance inputs and the statistical test's drafts."""
    check(callable(kernel), f"kernel={kernel!r} must be callable (the kernel, or a function wrapping it).")
    check(style in STYLES, f"style={style!r} must be one of {STYLES!r} (the kernel's signature).")
    check(0 < alpha < 1, f"alpha={alpha!r} must lie in (0, 1).")
    cases = default_cases() if cases is None else list(cases)
    check(len(cases) > 0, "cases=[] must hold at least one specverify.kernel_checks.RoundCase.")
    from specverify.kernel_checks import from_flashinfer_style, from_vllm_style

    sampler = {"chain": kernel, "vllm": from_vllm_style, "flashinfer": from_flashinfer_style}[style]
    sampler = sampler if style == "chain" else sampler(kernel)
    failures = []
    for i, case in enumerate(cases):
        name = case.name or f"case {i}"
        if style == "chain" and getattr(kernel, "consumes_uniforms", True):
            found = _chain_failures(kernel, case, grid_size, seed, batch)
        else:
            found = _law_failures(sampler, case, num_samples, seed, alpha / len(cases))
        failures += [f"✗ {name} (γ = {case.num_draft_tokens}, V = {case.vocab_size}): {f}" for f in found]
    if failures:
        name = getattr(kernel, "__qualname__", repr(kernel))
        raise AssertionError(
            "\n".join(
                [f"specverify: kernel {name} ({style} signature) does not apply the exact rule:"]
                + failures
                + [f"Reproduce: assert_kernel_conforms({name}, style={style!r}, seed={seed}, grid_size={grid_size})"]
            )
        )
    return len(cases)
