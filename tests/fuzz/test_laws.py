"""Statistical properties: a draft switched mid-round, preemption with recompute, and a batch of other requests each
leave a request's law exact; and a seeded request's output does not depend on its batch. Each check is shown to
catch its mutant."""

from functools import partial

import pytest
from hypothesis import find
from hypothesis import strategies as st

from specverify.fuzz import PropertyFailure, batch_outcomes, check_batch_independence, check_law, requests
from specverify.fuzz.whitebox import (
    ReferenceWhiteBox,
    mutants,
    preempt_every_round,
    sample_outcomes,
    switch_every_round,
)
from specverify.oracles import draft_copy, draft_near, exact_law, make_vocab, random_target
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference import VectorizedDecoder
from specverify.reference.transactional import TransactionalDecoder
from tests.fuzz._budget import fast_and_full, search

VOCAB = make_vocab(5)
TARGET = random_target(VOCAB, seed=3, eos_bias=-1.0)
# version 0 drafts from the target's own law, version 1 from a peaked unrelated one: q(x) of the wrong version
# moves the acceptance of x a lot, so a few hundred runs separate a stale q from the right one
DRAFTS = (draft_copy(TARGET), draft_near(TARGET, distance=1.0, seed=8, scale=8.0))
DRAFT = draft_near(TARGET, distance=0.5, seed=7)
ALPHA = 1e-6  # per check; the mutants fail at p < 1e-15


def outcome_of(white_box, request, n, plan, drafts=DRAFTS):
    return sample_outcomes(partial(white_box, TARGET, drafts, block_size=2), request, n, plan=plan)


@pytest.mark.parametrize("white_box", [ReferenceWhiteBox, mutants.StaleDraftQ])
def test_draft_version_switched_mid_round_keeps_the_exact_law(white_box):
    request = Request((0, 1), SamplingParams(max_tokens=3), 1)
    counts = outcome_of(white_box, request, 300, switch_every_round(2, after=1))
    law = exact_law(TARGET, request.prompt, request.params)
    if white_box is ReferenceWhiteBox:
        check_law(counts, law, alpha=ALPHA)
    else:  # acceptance divided by the q of the version current at verification, not the one that drafted
        with pytest.raises(PropertyFailure, match=r"\[law\] p=.* < alpha"):
            check_law(counts, law, alpha=ALPHA)


@pytest.mark.parametrize("white_box", [ReferenceWhiteBox, mutants.ResumeDropsPenalties])
def test_preempt_and_recompute_after_every_round_keeps_the_exact_law(white_box):
    request = Request((0, 1), SamplingParams(max_tokens=3, frequency_penalty=2.0, presence_penalty=0.5), 1)
    counts = outcome_of(white_box, request, 120, preempt_every_round(num_draft_tokens=1), drafts=DRAFTS[1:])
    law = exact_law(TARGET, request.prompt, request.params)
    if white_box is ReferenceWhiteBox:
        check_law(counts, law, alpha=ALPHA)
    else:
        with pytest.raises(PropertyFailure, match=r"\[law\]"):
            check_law(counts, law, alpha=ALPHA)


COMPANIONS = [
    Request((2, 0, 1), SamplingParams(temperature=0.5, max_tokens=4, stop=("ab",)), 3, seed=5),
    Request((0, 1), SamplingParams(max_tokens=3, top_k=2), 1),
    Request((0, 1), SamplingParams(max_tokens=3), 4),
]


@pytest.mark.parametrize(
    "make",
    [VectorizedDecoder, TransactionalDecoder, lambda t, d: mutants.SharedUnseededStream(VectorizedDecoder(t, d))],
    ids=["vectorized", "transactional", "SharedUnseededStream"],
)
def test_unseeded_request_keeps_the_exact_law_among_other_requests(make):
    request = Request((0, 1), SamplingParams(max_tokens=3), 2)
    counts = batch_outcomes(make(TARGET, DRAFT), request, COMPANIONS, 250)
    law = exact_law(TARGET, request.prompt, request.params)
    if make in (VectorizedDecoder, TransactionalDecoder):
        check_law(counts, law, alpha=ALPHA)
    else:  # every unseeded copy in the call drew the same stream: one outcome 250 times
        with pytest.raises(PropertyFailure, match=r"\[law\]"):
            check_law(counts, law, alpha=ALPHA)


BATCHES = st.tuples(requests(VOCAB, seeded=True), st.lists(requests(VOCAB), max_size=3), st.integers(0, 3))


@fast_and_full(40, BATCHES)
def test_seeded_output_does_not_depend_on_the_batch(batch):
    request, companions, position = batch
    check_batch_independence(
        VectorizedDecoder(TARGET, DRAFT), request, companions, position=min(position, len(companions))
    )


def test_batch_independence_catches_seed_by_batch_index():
    def fails(batch):
        request, companions, position = batch
        decoder = mutants.SeedByBatchIndex(VectorizedDecoder(TARGET, DRAFT))
        try:
            check_batch_independence(decoder, request, companions, position=min(position, len(companions)))
        except PropertyFailure as failure:
            return failure.prop == "batch"
        return False

    crowded = st.tuples(
        requests(VOCAB, seeded=True), st.lists(requests(VOCAB), min_size=1, max_size=3), st.integers(1, 3)
    )
    find(crowded, fails, settings=search(100))
