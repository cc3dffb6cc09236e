"""Statistical properties: a decoder's output law under interruptions equals the exact law of plain sampling.

Seeded identity (``harness``) proves law equality only for decoders whose RNG is keyed like the reference's. These
checks sample instead, so they hold any decoder to DESIGN.md's definition: a draft version switched mid-round, a
preemption with recompute, or a batch of other requests must leave each request's law exact. A check fails when
the pooled Cressie-Read statistic's p-value is below ``alpha`` or an outcome of exact probability 0 appears.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import numpy as np

from specverify.errors import check
from specverify.fuzz.harness import PropertyFailure
from specverify.fuzz.protocol import Fault
from specverify.protocol import Request
from specverify.stats import goodness_of_fit

__all__ = ["RoundPlan", "sample_outcomes", "batch_outcomes", "check_law", "check_batch_independence",
           "switch_every_round", "preempt_every_round"]


@dataclass(frozen=True)
class RoundPlan:
    """What happens in one round: ``gamma`` drafts, an optional ``fault`` armed, and ``preempt`` after it (the
    request is closed and reopened from its committed tokens)."""

    gamma: int = 2
    fault: Optional[Fault] = None
    preempt: bool = False


def switch_every_round(versions: int, *, gamma: int = 2, after: int = 1) -> Callable[[int], RoundPlan]:
    """A plan switching the draft version mid-round (after ``after`` draft calls) in every round, cycling over
    ``versions``: drafts of one round come from two laws."""
    check(isinstance(versions, int) and versions >= 2, f"versions={versions!r} must be an int >= 2.")
    return lambda i: RoundPlan(gamma, Fault("draft_switch", after=after, version=(i + 1) % versions))


def preempt_every_round(*, gamma: int = 2) -> Callable[[int], RoundPlan]:
    """A plan preempting (and resuming from the committed tokens) after every round."""
    return lambda i: RoundPlan(gamma, preempt=True)


def _run_once(decoder, request: Request, seed: int, plan) -> tuple:
    handle, i = decoder.open(request, seed), 0
    try:
        while True:
            step = plan(i)
            decoder.step(handle, gamma=step.gamma, fault=step.fault)
            state = decoder.state(handle)
            if state["finish_reason"] is not None:
                return tuple(state["tokens"]), state["finish_reason"]
            if step.preempt:
                decoder.close(handle)
                handle = decoder.open(request, seed, committed=tuple(state["tokens"]))
            i += 1
            check(i <= request.params.max_tokens, "the request did not finish within max_tokens rounds.")
    finally:
        decoder.close(handle)


def sample_outcomes(make, request: Request, n: int, *, plan: Callable[[int], RoundPlan] = lambda i: RoundPlan(),
                    entropy: int = 0) -> Counter:
    """Counts of (tokens, finish_reason) over ``n`` runs of ``request`` on one decoder from ``make()``, each with a
    fresh seed drawn from ``entropy``, round ``i`` following ``plan(i)``."""
    check(callable(make), f"make={make!r} must be a callable returning a WhiteBoxDecoder.")
    check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    decoder = make()
    seeds = np.random.default_rng(entropy).integers(0, 2**63, size=n, dtype=np.int64).tolist()
    return Counter(_run_once(decoder, request, int(s), plan) for s in seeds)


def batch_outcomes(decoder, request: Request, companions, n: int) -> Counter:
    """Counts of ``request``'s outcome over ``n`` unseeded copies sent in one call, interleaved with
    ``companions`` (other requests, other γ and params): black-box, any ``Decoder``."""
    check(isinstance(request, Request) and request.seed is None,
          f"request={request!r} must be an unseeded Request (seed=None): the check is about independent draws.")
    check(isinstance(n, int) and n >= 1, f"n={n!r} must be an int >= 1.")
    companions = list(companions)
    batch, mine = [], []
    for i in range(n):
        mine.append(len(batch))
        batch.append(request)
        if companions:
            batch.append(companions[i % len(companions)])
    completions = decoder(batch)
    check(len(completions) == len(batch), f"the decoder returned {len(completions)} completions for "
          f"{len(batch)} requests.")
    return Counter((tuple(completions[i].tokens), completions[i].finish_reason) for i in mine)


def check_law(counts, law, *, alpha: float = 1e-6, name: str = "law"):
    """Raise ``PropertyFailure(name)`` unless ``counts`` fit the exact ``law`` (an ``ExactLaw``); return the
    ``GofResult``. An outcome of exact probability 0 fails at once, outside ``alpha``."""
    check(0 < alpha < 1, f"alpha={alpha!r} must lie in (0, 1).")
    check(hasattr(law, "index") and hasattr(law, "probs"), f"law={law!r} must be an ExactLaw (oracles.exact_law).")
    check(isinstance(counts, Mapping) and len(counts) > 0, f"counts={counts!r} must be a non-empty mapping "
          "outcome -> count (sample_outcomes, batch_outcomes).")
    impossible = [o for o in counts if law.index(o) < 0]
    if impossible:
        raise PropertyFailure(name, f"outcomes of exact probability 0: {impossible[:3]!r}")
    observed = np.zeros(len(law), dtype=np.int64)
    for outcome, count in counts.items():
        observed[law.index(outcome)] += count
    result = goodness_of_fit(observed, law.probs)
    if result.pvalue < alpha:
        worst = np.argsort(-np.abs(observed - law.probs * observed.sum()))[:3]
        detail = ", ".join(f"{law.outcomes[i]!r}: {observed[i]} vs {law.probs[i] * observed.sum():.1f} expected"
                           for i in worst)
        raise PropertyFailure(name, f"p={result.pvalue:.3g} < alpha={alpha} over n={observed.sum()} "
                              f"(df={result.df}); worst: {detail}")
    return result


def check_batch_independence(decoder, request: Request, companions, *, position: int = 0) -> None:
    """Raise ``PropertyFailure("batch")`` unless seeded ``request`` gives the same completion (tokens and finish
    reason) alone and at ``position`` among ``companions`` (black-box, any ``Decoder``; DESIGN.md: draws are keyed
    by request seed and position, never by batch index)."""
    check(isinstance(request, Request) and request.seed is not None,
          f"request={request!r} must be a seeded Request: only a seeded request promises identical output.")
    companions = list(companions)
    check(isinstance(position, int) and 0 <= position <= len(companions),
          f"position={position!r} must lie in [0, {len(companions)}] (where the request sits in the batch).")
    batch = companions[:position] + [request] + companions[position:]
    together, alone = decoder(batch)[position], decoder([request])[0]
    if (together.tokens, together.finish_reason) != (alone.tokens, alone.finish_reason):
        raise PropertyFailure("batch", f"seeded request at {position} of a batch of {len(batch)} gave "
                              f"{(together.tokens, together.finish_reason)!r}, alone "
                              f"{(alone.tokens, alone.finish_reason)!r}")
