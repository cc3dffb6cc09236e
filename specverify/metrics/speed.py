"""The speed model of speculative decoding (the seed's cost model), as a function and ``specverify speedup``.

With acceptance a_j of the j-th draft in a round (given the ones before it were accepted), a round emits
E[K] = 1 + Σ_{j=1..γ} Π_{i≤j} a_i tokens per target call — (1 − a^{γ+1}) / (1 − a) when every a_j = a. Plain
decoding emits one token per target call of cost ``t_target``; a speculative round costs
γ·``t_draft`` + ``t_verify``(γ) + ``t_state``, so the speed-up is S ≈ E[K]·t_target / (γ·t_draft + t_verify(γ) +
t_state). (The product form assumes acceptance does not depend on the prefix; a certificate's measured
per-position rates carry that dependence into a_j.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from specverify.errors import check

__all__ = ["SpeedModel", "SpeedWarning", "expected_tokens_per_call", "speed_model", "THRESHOLDS"]

#: The thresholds of the warnings (documented in docs/design.md): below / above them speculation rarely pays.
THRESHOLDS = {
    "low_acceptance": 0.5,  # mean per-position acceptance below this: most drafts are wasted
    "short_output": 4.0,  # output length below this many × E[K]: few rounds to amortise the draft's prefill
    "saturated_batch": 64,  # a target already busy with this many sequences has no idle compute for verification
    "draft_memory_share": 0.25,  # draft parameters above this share of the target's: a second model's memory hurts
}


@dataclass(frozen=True)
class SpeedWarning:
    """One "when not to use" condition that holds: ``name``, the value seen, the threshold and what it means."""

    name: str
    value: float
    threshold: float
    message: str


@dataclass(frozen=True)
class SpeedModel:
    """Result of :func:`speed_model`: E[K] and S at γ, and the γ in 1..16 with the best S for the same costs."""

    num_draft_tokens: int
    expected_tokens: float
    speedup: float
    best_num_draft_tokens: int
    best_speedup: float
    speedup_by_num_draft_tokens: dict = field(repr=False)
    warnings: tuple = ()

    def to_dict(self) -> dict:
        return {
            "num_draft_tokens": self.num_draft_tokens,
            "expected_tokens_per_target_call": self.expected_tokens,
            "speedup": self.speedup,
            "best_num_draft_tokens": self.best_num_draft_tokens,
            "best_speedup": self.best_speedup,
            "speedup_by_num_draft_tokens": {str(k): v for k, v in self.speedup_by_num_draft_tokens.items()},
            "warnings": [w.__dict__ for w in self.warnings],
        }


def _rates(acceptance: float | Sequence[float], num_draft_tokens: int) -> list:
    if isinstance(acceptance, (int, float)):
        check(0 <= acceptance <= 1, f"--acceptance={acceptance!r} must lie in [0, 1].")
        return [float(acceptance)] * num_draft_tokens
    rates = [float(a) for a in acceptance]
    check(rates and all(0 <= a <= 1 for a in rates), f"--acceptance-per-position={rates!r}: each must lie in [0, 1].")
    return (rates + [rates[-1]] * num_draft_tokens)[:num_draft_tokens]  # the last rate carries on past the list


def expected_tokens_per_call(acceptance: float | Sequence[float], num_draft_tokens: int) -> float:
    """E[K]: tokens emitted per target call, 1 + Σ_j Π_{i≤j} a_i.

    Examples
    --------
    >>> round(expected_tokens_per_call(0.8, 4), 4)
    3.3616
    >>> round(expected_tokens_per_call([0.9, 0.5], 2), 4)
    2.35
    """
    check(
        isinstance(num_draft_tokens, int) and num_draft_tokens >= 1,
        f"--gamma={num_draft_tokens!r} must be an int >= 1.",
    )
    total, survive = 1.0, 1.0
    for rate in _rates(acceptance, num_draft_tokens):
        survive *= rate
        total += survive
    return total


def _speedup(acceptance, gamma, t_target, t_draft, t_verify, t_state) -> float:
    verify = t_verify[min(gamma, len(t_verify)) - 1] if isinstance(t_verify, (list, tuple)) else t_verify
    return expected_tokens_per_call(acceptance, gamma) * t_target / (gamma * t_draft + verify + t_state)


def speed_model(
    acceptance: float | Sequence[float],
    num_draft_tokens: int,
    *,
    t_target: float,
    t_draft: float,
    t_verify: float | Sequence[float] | None = None,
    t_state: float = 0.0,
    batch: int = 1,
    output_len: int | None = None,
    draft_params: float | None = None,
    target_params: float | None = None,
) -> SpeedModel:
    """E[K], the speed-up at ``num_draft_tokens`` and the best γ in 1..16, with the warnings that apply.

    Times are per call in any one unit; ``t_verify`` defaults to ``t_target`` (verifying γ+1 tokens costs about one
    target call while the target is memory-bound), and may be given per γ (a list, index γ−1; the last value carries
    on).

    Examples
    --------
    >>> model = speed_model(0.8, 4, t_target=10.0, t_draft=1.0)
    >>> round(model.expected_tokens, 4), round(model.speedup, 3)
    (3.3616, 2.401)
    """
    for name, value in (("--t-target", t_target), ("--t-draft", t_draft), ("--t-state", t_state)):
        check(isinstance(value, (int, float)) and math.isfinite(value) and value >= 0, f"{name}={value!r} must be ≥ 0.")
    check(t_target > 0, f"--t-target={t_target!r} must be > 0 (the plain decoder's cost per token).")
    t_verify = t_target if t_verify is None else t_verify
    verify_values = list(t_verify) if isinstance(t_verify, (list, tuple)) else [t_verify]
    check(verify_values and all(v > 0 for v in verify_values), f"--t-verify={t_verify!r} must be > 0.")
    check(isinstance(batch, int) and batch >= 1, f"--batch={batch!r} must be an int >= 1.")
    by_gamma = {g: _speedup(acceptance, g, t_target, t_draft, t_verify, t_state) for g in range(1, 17)}
    best = max(by_gamma, key=lambda g: (by_gamma[g], -g))
    expected = expected_tokens_per_call(acceptance, num_draft_tokens)
    speedup = _speedup(acceptance, num_draft_tokens, t_target, t_draft, t_verify, t_state)
    rates = _rates(acceptance, num_draft_tokens)
    warnings = _warnings(sum(rates) / len(rates), expected, speedup, batch, output_len, draft_params, target_params)
    return SpeedModel(num_draft_tokens, expected, speedup, best, by_gamma[best], by_gamma, tuple(warnings))


def _warnings(mean_rate, expected, speedup, batch, output_len, draft_params, target_params) -> list:
    out = []
    if mean_rate < THRESHOLDS["low_acceptance"]:
        out.append(
            SpeedWarning(
                "low_acceptance",
                mean_rate,
                THRESHOLDS["low_acceptance"],
                "most drafts are rejected: the draft's cost is mostly wasted",
            )
        )
    if output_len is not None and output_len < THRESHOLDS["short_output"] * expected:
        out.append(
            SpeedWarning(
                "short_output",
                float(output_len),
                THRESHOLDS["short_output"] * expected,
                "outputs this short leave few rounds to amortise the draft's prefill",
            )
        )
    if batch >= THRESHOLDS["saturated_batch"]:
        out.append(
            SpeedWarning(
                "saturated_batch",
                float(batch),
                THRESHOLDS["saturated_batch"],
                "a large batch already saturates the target: verification is no longer free",
            )
        )
    if draft_params is not None and target_params:
        share = draft_params / target_params
        if share > THRESHOLDS["draft_memory_share"]:
            out.append(
                SpeedWarning(
                    "draft_memory",
                    share,
                    THRESHOLDS["draft_memory_share"],
                    "the draft and its KV cache take memory the target's batch could use",
                )
            )
    if speedup < 1.0:
        out.append(SpeedWarning("no_speedup", speedup, 1.0, "at these costs speculation is slower than plain decoding"))
    return out
