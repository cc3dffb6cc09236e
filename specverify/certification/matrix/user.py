"""The matrix on a user's own checkpoints (``--target DIR --draft DIR --against plain``): no exact law exists.

The speculative decoder and the same engine's plain path (``--against``) run these small scenarios on the user's
pair; each sampling scenario is a homogeneity χ² between the two samples, its N planned from a pilot of the plain
path (``checks/twosample.py``), and greedy output is compared between the two paths on a few prompts. Outcomes stay
few — top-k 3 or min-p 0.3 (at temperature 1 and 0.7: engines declare one or the other), 2–3 new tokens — so the
plan is affordable on a large model. With no exact law the verdict is never ``exact`` (docs/design.md): agreement
with the engine's own plain path is evidence against a speculation bug, not a proof of the canonical law.
"""

from __future__ import annotations

import numpy as np

from specverify.certification.matrix.scenarios import CertificationScenario, Matrix
from specverify.enums import ScenarioKind
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams

__all__ = ["user_matrix", "GREEDY_PROMPTS"]

GREEDY_PROMPTS = 8


def _p(temperature: float | None = None, **kw) -> SamplingParams:
    """Temperature 1 is left unset (the engine's own default handling is part of what runs)."""
    return SamplingParams(**kw) if temperature is None else SamplingParams(temperature=temperature, **kw)


def user_matrix(target_dir: str, draft_dir: str) -> Matrix:
    """The scenarios on the user pair: prompts of two ordinary token ids drawn from its vocabulary."""
    from specverify.oracles.user import UserPairSpec

    spec = UserPairSpec(str(target_dir), str(draft_dir))
    vocab = spec.build().vocab
    ordinary = [i for i, text in enumerate(vocab.strings) if text.strip()]
    if len(ordinary) < 4:
        raise InvalidArgument(
            f"--target={spec.target!r}: its tokenizer decodes fewer than 4 ids to visible text; the prompts need "
            "ordinary tokens"
        )
    rng = np.random.default_rng(20261201)
    prompts = [tuple(int(t) for t in rng.choice(ordinary, size=2)) for _ in range(1 + GREEDY_PROMPTS)]

    def scenario(name, kind, exercises, params, gamma, **kw) -> CertificationScenario:
        return CertificationScenario(name, kind, exercises, params, gamma, prompts[0], spec, **kw)

    sampling = ScenarioKind.SAMPLING
    scenarios = [
        scenario("user-top-k", sampling, "speculation vs plain, top-k 3", _p(top_k=3, max_tokens=3), 3),
        scenario("user-min-p", sampling, "speculation vs plain, min-p 0.3", _p(min_p=0.3, max_tokens=3), 2),
        scenario("user-top-k-t0.7", sampling, "temperature 0.7, top-k 3", _p(0.7, top_k=3, max_tokens=2), 1),
        scenario("user-min-p-t0.7", sampling, "temperature 0.7, min-p 0.3", _p(0.7, min_p=0.3, max_tokens=2), 1),
        scenario(
            "user-greedy",
            ScenarioKind.GREEDY,
            "greedy equality, speculation vs plain",
            _p(0, max_tokens=4),
            3,
            prompts=tuple(prompts[1:]),
        ),
    ]
    return Matrix({s.name: s for s in scenarios}, label="user checkpoint", exact_law=False)
