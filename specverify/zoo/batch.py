"""Zoo entries whose bug depends on the batch: the call's size or a request's place in it (docs/bugs.md).

``decoder.sample`` (one request shape) stays exact in each: the bugs live on the ``__call__`` path engines take for
real batches, which the certifier reaches through the mixed-batch, batch-composition and greedy scenarios.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from specverify.enums import Verdict
from specverify.keyed import draw_seeds
from specverify.oracles.models import draft_near
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo._registry import zoo_entry

__all__ = [
    "batch_path_numerics",
    "rng_keyed_by_batch_position",
    "corrupts_beyond_two_sequences",
    "first_request_params_for_batch",
    "any_greedy_request_greedy_call",
    "sampled_call_samples_greedy_rows",
    "first_seeded_seed_for_call",
]


class _BatchPathNumerics(VectorizedDecoder):
    def __init__(self, target, draft, *, entropy=None):
        super().__init__(target, draft, entropy=entropy)
        self.exact_target = target
        self.batched_target = draft_near(target, distance=0.5, seed=991)  # "another kernel": a nearby law

    def __call__(self, requests):
        requests = list(requests)
        self.target = self.batched_target if len(requests) > 1 else self.exact_target
        try:
            return super().__call__(requests)
        finally:
            self.target = self.exact_target


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="batch-size-numerics", showcases=("plain",))
def batch_path_numerics(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Calls of more than one request verify through another numeric path (a nearby target law).

    Verdict: approximate. The same greedy prompt gives the target's greedy output alone and another one in a batch
    (the greedy scenarios send each prompt both ways); ``sample()`` and single calls are exact. Stands for
    llama.cpp #25618 and vLLM #41758 (verify with k+1 rows and decode with one row on different kernel paths).
    """
    return _BatchPathNumerics(target, draft, entropy=entropy)


class _RngByPosition(VectorizedDecoder):
    def __call__(self, requests):
        return super().__call__([replace(r, seed=i) for i, r in enumerate(requests)])  # the batch index, not the seed


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="rng-keyed-by-batch", showcases=("plain",))
def rng_keyed_by_batch_position(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Each request's draws are keyed by its index in the call instead of its own seed.

    Verdict: greedy-only. Greedy is unaffected; with temperature, the k-th request of every call replays the same
    draws, so requests alone (every one index 0) all give one outcome and batches repeat across calls: the
    batch-composition and mixed-batch laws are rejected. ``sample()`` keys by seed and stays exact. Stands for
    vLLM #9441 and vLLM PR #35398 (per-token instead of per-request index for RNG seeds).
    """
    return _RngByPosition(target, draft, entropy=entropy)


class _BeyondTwo(VectorizedDecoder):
    corrupt = False

    def __call__(self, requests):
        requests = list(requests)
        self.corrupt = len(requests) > 2
        try:
            return super().__call__(requests)
        finally:
            self.corrupt = False

    def draft_laws(self, st, logits, prov, num_generated):
        sample_from, draft_probs = super().draft_laws(st, logits, prov, num_generated)
        if self.corrupt and st.params.temperature > 0 and draft_probs.shape[0] > 1:
            draft_probs = torch.roll(draft_probs, 1, dims=0)  # the ratio reads the neighbour's row
        return sample_from, draft_probs


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="draft-probs-misaligned-beyond-two-sequences", showcases=("plain",))
def corrupts_beyond_two_sequences(target, draft, *, entropy=None) -> VectorizedDecoder:
    """With more than two requests in a call and temperature > 0, the ratio uses another row's draft probabilities.

    Verdict: greedy-only. Alone and in pairs the law is exact and greedy never reads the ratio; calls of many
    requests (mixed-batch, batch-composition/large) sample a wrong law. Stands for 1Cat-vLLM #656 (probabilistic
    MTP drafting corrupted output only with max_num_seqs > 2 and T > 0, while acceptance looked normal).
    """
    return _BeyondTwo(target, draft, entropy=entropy)


_SAMPLER_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                   "presence_penalty")  # fmt: skip


class _FirstRequestParams(VectorizedDecoder):
    def __call__(self, requests):
        requests = list(requests)
        if not requests:
            return super().__call__(requests)
        first = requests[0].params
        shared = {name: getattr(first, name) for name in _SAMPLER_FIELDS}
        return super().__call__([replace(r, params=replace(r.params, **shared)) for r in requests])


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="batch-params-from-first-request", showcases=("plain",))
def first_request_params_for_batch(target, draft, *, entropy=None) -> VectorizedDecoder:
    """Every request of a call is sampled with the first request's temperature, truncation and penalties (vmlx #234).

    The batched sampler reads one request's sampling parameters for the whole batch; lengths, stops and masks stay
    per request. A call of one request, or of requests with equal parameters, is exact.

    Verdict: greedy-only. The greedy scenarios send calls of one parameter set (temperature 0 throughout), so greedy
    output is kept; the mixed-parameter scenario (``mixed-batch``: temperature 1 beside penalties and stops) samples
    its members with the wrong parameters, and its law is rejected.
    """
    return _FirstRequestParams(target, draft, entropy=entropy)


class _AnyGreedy(VectorizedDecoder):
    def __call__(self, requests):
        requests = list(requests)
        if any(r.params.temperature == 0 for r in requests):  # the batch's all_greedy flag computed with any()
            requests = [replace(r, params=replace(r.params, temperature=0.0)) for r in requests]
        return super().__call__(requests)


@zoo_entry(verdict=Verdict.GREEDY_ONLY, mechanism="greedy-request-makes-call-greedy", showcases=("plain",))
def any_greedy_request_greedy_call(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A call holding any greedy request decodes every request of it greedily (the batch's greedy flag is an any()).

    Calls of sampled requests alone, and of greedy requests alone, are exact; only a call that mixes the two kinds
    shows it. A matrix whose calls never mix greedy and sampled requests passes it as exact (the blind spot that
    ``mixed-kinds`` closes).

    Verdict: greedy-only. Greedy requests keep their output; the sampled requests of a mixed call are decoded at
    temperature 0, so their law (one outcome per prompt) is rejected.
    """
    return _AnyGreedy(target, draft, entropy=entropy)


class _SampledCall(VectorizedDecoder):
    def __call__(self, requests):
        requests = list(requests)
        if any(r.params.temperature > 0 for r in requests):  # not all greedy: every row takes the sampled path
            requests = [replace(r, params=replace(r.params, temperature=1.0)) if r.params.temperature == 0 else r
                        for r in requests]  # fmt: skip
        return super().__call__(requests)


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="greedy-rows-sampled-in-mixed-call", showcases=("plain",))
def sampled_call_samples_greedy_rows(target, draft, *, entropy=None) -> VectorizedDecoder:
    """A call holding any sampled request sends its greedy requests through the sampled path too (at temperature 1).

    The mirror of :func:`any_greedy_request_greedy_call`. Calls of greedy requests alone, and of sampled requests
    alone, are exact; only a call that mixes the two kinds shows it. vLLM 0.32 on CPU does this (its finding 1): in a
    step that is not all greedy, ``apply_sampling_constraints`` divides every row's logits, greedy rows included, by a
    temperature the CPU expand kernel never wrote, and takes the greedy rows' argmax after that.

    Verdict: approximate. ``mixed-kinds`` sends greedy requests beside sampled ones, and their outputs differ from
    the target's greedy output (a greedy mismatch, rule 2).
    """
    return _SampledCall(target, draft, entropy=entropy)


class _FirstSeededSeed(VectorizedDecoder):
    def _request_seeds(self, seeds):
        out = super()._request_seeds(seeds)
        given = [s for s in seeds if s is not None]
        if given:
            rank = np.cumsum([s is not None for s in seeds]) - 1
            derived = draw_seeds(given[0], len(given))  # one generator for the call, seeded by its first seed
            for i, s in enumerate(seeds):
                if s is not None:
                    out[i] = derived[rank[i]]
        return out


@zoo_entry(verdict=Verdict.EXACT, mechanism="call-rng-from-first-seed", showcases=("plain",), checks=("reproducible",))
def first_seeded_seed_for_call(target, draft, *, entropy=None) -> VectorizedDecoder:
    """The seeded requests of a call draw from one generator seeded with the first seeded request's seed.

    Request j of the call's seeded requests takes the j-th stream of that generator, so its output depends on which
    seeded requests come before it; alone, or behind unseeded requests only, it is reproducible.

    Verdict: exact: every request gets an independent stream (distinct calls start from distinct first seeds), so
    each law and the joint law are exact; what breaks is reproducibility, which ``--require-reproducible`` makes
    count. A reproducibility check whose neighbours are unseeded passes it; seeded neighbours before the request
    fail it.
    """
    return _FirstSeededSeed(target, draft, entropy=entropy)
