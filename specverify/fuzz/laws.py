"""Black-box law properties: a decoder's output law equals the exact law of plain sampling, whatever the batch.

They call any decoder of the public protocol (``decoder(requests) -> completions``) and hold it to
docs/design.md's definition: each unseeded request's outcome law is the exact law (``check_law`` over
``batch_outcomes``), and a seeded request's output does not depend on its neighbours in the batch
(``check_batch_independence``). A law check fails when the pooled Cressie-Read statistic's p-value is below
``alpha`` or an outcome of exact probability 0 appears. (Laws under preemption and draft switches, driven round by
round, are in ``specverify.fuzz.whitebox``.)
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from specverify.errors import check
from specverify.fuzz.properties import PropertyFailure
from specverify.protocol import Request
from specverify.stats import GofResult, goodness_of_fit

__all__ = ["batch_outcomes", "check_law", "check_batch_independence"]


def batch_outcomes(decoder, request: Request, companions: Sequence[Request], n: int) -> Counter:
    """Counts of ``request``'s outcome over ``n`` unseeded copies sent in one call, interleaved with
    ``companions`` (other requests, other draft counts and params): black-box, any ``Decoder``."""
    check(
        isinstance(request, Request) and request.seed is None,
        f"request={request!r} must be an unseeded Request (seed=None): the check is about independent draws.",
    )
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    companions = list(companions)
    batch, mine = [], []
    for i in range(n):
        mine.append(len(batch))
        batch.append(request)
        if companions:
            batch.append(companions[i % len(companions)])
    completions = decoder(batch)
    check(
        len(completions) == len(batch),
        f"the decoder returned {len(completions)} completions for {len(batch)} requests.",
    )
    return Counter((tuple(completions[i].tokens), completions[i].finish_reason) for i in mine)


def check_law(counts: Mapping, law, *, alpha: float = 1e-6, name: str = "law") -> GofResult:
    """Raise ``PropertyFailure(name)`` unless ``counts`` fit the exact ``law`` (an ``ExactLaw``); return the
    ``GofResult``. An outcome of exact probability 0 fails at once, outside ``alpha``."""
    check(0 < alpha < 1, f"alpha={alpha!r} must lie in (0, 1).")
    check(hasattr(law, "index") and hasattr(law, "probs"), f"law={law!r} must be an ExactLaw (oracles.exact_law).")
    check(
        isinstance(counts, Mapping) and len(counts) > 0,
        f"counts={counts!r} must be a non-empty mapping outcome -> count (batch_outcomes, whitebox.sample_outcomes).",
    )
    impossible = [o for o in counts if law.index(o) < 0]
    if impossible:
        raise PropertyFailure(name, f"outcomes of exact probability 0: {impossible[:3]!r}")
    observed = np.zeros(len(law), dtype=np.int64)
    for outcome, count in counts.items():
        observed[law.index(outcome)] += count
    result = goodness_of_fit(observed, law.probs)
    if result.pvalue < alpha:
        worst = np.argsort(-np.abs(observed - law.probs * observed.sum()))[:3]
        detail = ", ".join(
            f"{law.outcomes[i]!r}: {observed[i]} vs {law.probs[i] * observed.sum():.1f} expected" for i in worst
        )
        raise PropertyFailure(
            name, f"p={result.pvalue:.3g} < alpha={alpha} over n={observed.sum()} (df={result.df}); worst: {detail}"
        )
    return result


def check_batch_independence(decoder, request: Request, companions: Sequence[Request], *, position: int = 0) -> None:
    """Raise ``PropertyFailure("batch")`` unless seeded ``request`` gives the same completion (tokens and finish
    reason) alone and at ``position`` among ``companions`` (black-box, any ``Decoder``; docs/design.md: draws are keyed
    by request seed and position, never by batch index)."""
    check(
        isinstance(request, Request) and request.seed is not None,
        f"request={request!r} must be a seeded Request: only a seeded request promises identical output.",
    )
    companions = list(companions)
    check(
        isinstance(position, int) and 0 <= position <= len(companions),
        f"position={position!r} must lie in [0, {len(companions)}] (where the request sits in the batch).",
    )
    batch = companions[:position] + [request] + companions[position:]
    together, alone = decoder(batch)[position], decoder([request])[0]
    if (together.tokens, together.finish_reason) != (alone.tokens, alone.finish_reason):
        raise PropertyFailure(
            "batch",
            f"seeded request at {position} of a batch of {len(batch)} gave "
            f"{(together.tokens, together.finish_reason)!r}, alone "
            f"{(alone.tokens, alone.finish_reason)!r}",
        )
