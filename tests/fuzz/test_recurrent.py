"""Recurrent state replay: committed state == recompute from scratch after any accept / reject history; rejected
inputs never advance it; each broken replay is caught; the recurrent decoder's law is exact."""

import numpy as np
import pytest
from hypothesis import find
from hypothesis import strategies as st

from specverify.fuzz import PropertyFailure, check_law, prompts
from specverify.fuzz.whitebox.recurrent import check_recurrent_rounds, recurrent_rounds
from specverify.oracles import exact_law, make_vocab
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference.recurrent import RecurrentCache, RecurrentDecoder, ToySSM
from tests.fuzz._budget import fast_and_full, search

VOCAB = make_vocab(5)
CASES = st.tuples(
    st.integers(1, 4), st.integers(0, 50), prompts(VOCAB.size, VOCAB.eos_token_id), recurrent_rounds(VOCAB.size)
)


def run_case(cache_class, case):
    dim, seed, prompt, rounds = case
    check_recurrent_rounds(cache_class, ToySSM(VOCAB, dim=dim, seed=seed), prompt, rounds)


@fast_and_full(800, CASES)
def test_replaying_accepted_inputs_equals_recompute_from_scratch(case):
    run_case(RecurrentCache, case)


class ReplaysRejected(RecurrentCache):
    """Replays the whole branch, rejected drafts included (llama.cpp #20075)."""

    mechanism = "recurrent-state-not-rolled-back"

    def commit(self, accepted, extra=()):
        self.state = self.model.replay(self.state, self._gates[accepted:], self._updates[accepted:])
        super().commit(accepted, extra)


class ReplaysReversed(RecurrentCache):
    """Replays the accepted inputs in reverse order."""

    def commit(self, accepted, extra=()):
        self._gates[:accepted], self._updates[:accepted] = self._gates[:accepted][::-1], self._updates[:accepted][::-1]
        super().commit(accepted, extra)


class ReplaysInFloat32(RecurrentCache):
    """Caches the projected inputs in float32 (another numeric format than recompute)."""

    def extend(self, tokens):
        logits = super().extend(tokens)
        self._gates = self._gates.astype(np.float32).astype(np.float64)
        return logits


class ScansInPlace(RecurrentCache):
    """The verification scan advances the committed state itself (no copy)."""

    def extend(self, tokens):
        logits = super().extend(tokens)
        self.state = self.model.replay(self.state, *self.model.project(tokens))
        return logits


@pytest.mark.parametrize("cache_class", [ReplaysRejected, ReplaysReversed, ReplaysInFloat32, ScansInPlace])
def test_replay_property_catches_broken_replay(cache_class):
    def fails(case):
        try:
            run_case(cache_class, case)
        except PropertyFailure:
            return True
        return False

    find(CASES, fails, settings=search(200))


# a draft far from the target: rejections in most rounds, so a replayed rejected input shows in the law
TARGET, DRAFT = ToySSM(VOCAB, dim=3, seed=1), ToySSM(VOCAB, dim=3, seed=2, scale=3.0)


@pytest.mark.parametrize("cache_class", [RecurrentCache, ReplaysRejected])
def test_recurrent_decoder_law_is_exact_only_with_replay_of_accepted_inputs(cache_class):
    decoder = RecurrentDecoder(TARGET, DRAFT, entropy=0)
    decoder.cache_class = cache_class
    request = Request((0, 1), SamplingParams(max_tokens=4), 2)
    counts = {}
    for completion in decoder([request] * 300):
        key = (completion.tokens, completion.finish_reason)
        counts[key] = counts.get(key, 0) + 1
        assert sum(completion.stream, ()) == completion.tokens
    law = exact_law(TARGET, request.prompt, request.params)
    if cache_class is RecurrentCache:
        check_law(counts, law, alpha=1e-6)
    else:
        with pytest.raises(PropertyFailure, match=r"\[law\]"):
            check_law(counts, law, alpha=1e-6)


def test_seeded_recurrent_decoder_reproduces_and_its_rounds_leave_the_from_scratch_state():
    request = Request((0, 1, 2), SamplingParams(max_tokens=6), 2, seed=11)
    decoder = RecurrentDecoder(TARGET, DRAFT)
    assert decoder([request]) == decoder([request])
    caches = []

    class Recording(RecurrentCache):
        def commit(self, accepted, extra=()):
            super().commit(accepted, extra)
            caches.append(self)
            assert np.array_equal(self.state, self.model.state_after(self.tokens))

    decoder.cache_class = Recording
    decoder([request])
    assert len(caches) >= 2
