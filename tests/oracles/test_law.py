"""exact_law against probabilities computed independently in the test, and the finish-reason semantics."""

import math

import numpy as np
import pytest
import torch

from specverify import InvalidArgument, SamplingParams
from specverify.grammar import ToyGrammar
from specverify.oracles import draft_near, exact_law, greedy_outcome, make_vocab, random_target

VOCAB = make_vocab(5)  # "a", "b", "ab", " ", EOS(4)
TARGET = random_target(VOCAB, seed=11, eos_bias=-0.5)


def path_prob(model, prompt, tokens, temperature=1.0):
    """Probability of a token path with processors off, by a softmax written here."""
    prob = 1.0
    for i, tok in enumerate(tokens):
        logits = model.logits([tuple(prompt) + tuple(tokens[:i])])[0].tolist()
        weights = [math.exp(x / temperature) for x in logits]
        prob *= weights[tok] / sum(weights)
    return prob


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(max_tokens=3),
        SamplingParams(max_tokens=4, stop=("ab", " b")),
        SamplingParams(max_tokens=3, top_k=3, top_p=0.9, repetition_penalty=1.3, frequency_penalty=0.4),
        SamplingParams(max_tokens=4, min_tokens=2),
        SamplingParams(max_tokens=3, ignore_eos=True),
    ],
)
def test_law_sums_to_one_and_every_outcome_is_complete(params):
    law = exact_law(TARGET, (0, 1), params)
    assert abs(law.probs.sum() - 1) < 1e-12
    assert np.all(law.probs > 0)
    for tokens, reason in law.outcomes:
        assert len(tokens) <= params.max_tokens
        if reason == "eos":
            assert tokens[-1] == VOCAB.eos_token_id and not params.ignore_eos
            assert len(tokens) > params.min_tokens
        elif reason == "length":
            assert len(tokens) == params.max_tokens
        if not params.ignore_eos:
            assert VOCAB.eos_token_id not in tokens[:-1]


def test_outcome_probabilities_match_a_softmax_chain():
    law = exact_law(TARGET, (0, 1), SamplingParams(max_tokens=3))
    for outcome, prob in zip(law.outcomes, law.probs):
        assert prob == pytest.approx(path_prob(TARGET, (0, 1), outcome[0]), rel=1e-12)
    hot = exact_law(TARGET, (0, 1), SamplingParams(max_tokens=3, temperature=0.5))
    for outcome, prob in zip(hot.outcomes, hot.probs):
        assert prob == pytest.approx(path_prob(TARGET, (0, 1), outcome[0], temperature=0.5), rel=1e-12)


def test_stop_string_spanning_two_tokens_ends_on_the_completing_token():
    law = exact_law(TARGET, (0,), SamplingParams(max_tokens=4, stop=("ab",)))
    assert ((0, 1), "stop") in law._index  # "a" + "b"
    assert ((2,), "stop") in law._index  # "ab" in one token
    for tokens, reason in law.outcomes:
        text = VOCAB.text(tokens)
        assert ("ab" in text) == (reason == "stop")
        if reason == "stop":
            assert "ab" not in VOCAB.text(tokens[:-1])
    assert law.text(((3, 0, 1), "stop")) == " "  # text cut at the stop string's start


def test_stop_strings_held_back_until_min_tokens_when_asked():
    held = exact_law(TARGET, (0,), SamplingParams(max_tokens=3, min_tokens=2, stop=("ab",), stop_after_min_tokens=True))
    assert ((2,), "stop") not in held._index and ((2, 0), "length") not in held._index
    assert any(r == "stop" and len(t) >= 2 for t, r in held.outcomes)
    eager = exact_law(TARGET, (0,), SamplingParams(max_tokens=3, min_tokens=2, stop=("ab",)))
    assert ((2,), "stop") in eager._index


def test_grammar_dead_end_gives_no_token_with_nothing_emitted():
    # state 0 -> token 0 -> state 1 (dead end: no tokens, not accepting); token 1 -> state 2 (accepting, loops on 1)
    g = ToyGrammar(transitions=({0: 1, 1: 2}, {}, {1: 2}), accepting={2})
    law = exact_law(TARGET, (0,), SamplingParams(max_tokens=3, grammar=g))
    assert ((0,), "no_token") in law._index
    for tokens, reason in law.outcomes:
        assert tokens[0] in (0, 1)
        if reason == "eos":
            assert tokens[:-1] and all(t == 1 for t in tokens[:-1])
    assert (
        abs(
            law.prob(((0,), "no_token"))
            - path_prob(TARGET, (0,), (0,)) / (path_prob(TARGET, (0,), (0,)) + path_prob(TARGET, (0,), (1,)))
        )
        < 1e-12
    )


def test_greedy_outcome_follows_the_argmax():
    params = SamplingParams(max_tokens=4)
    tokens, reason = greedy_outcome(TARGET, (0, 1), params)
    for i, tok in enumerate(tokens):
        assert tok == int(torch.argmax(TARGET.logits([(0, 1) + tokens[:i]])[0]))
    assert reason in ("eos", "length")


def test_zero_probability_tokens_are_pruned():
    target = random_target(VOCAB, seed=5, zero_rate=0.4)
    law = exact_law(target, (0,), SamplingParams(max_tokens=3))
    for tokens, _ in law.outcomes:
        for i, tok in enumerate(tokens):
            assert torch.isfinite(target.logits([(0,) + tokens[:i]])[0][tok])


def test_bad_input_is_invalid_argument():
    with pytest.raises(InvalidArgument, match="prompt"):
        exact_law(TARGET, (9,), SamplingParams())
    with pytest.raises(InvalidArgument, match="prompt"):
        exact_law(TARGET, (), SamplingParams())
    with pytest.raises(InvalidArgument, match="params"):
        exact_law(TARGET, (0,), {"max_tokens": 2})


def test_cache_logits_equal_the_pure_function_and_crop_rolls_back():
    cache = TARGET.new_cache()
    rows = cache.forward([0, 1, 2])
    torch.testing.assert_close(rows[-1], TARGET.logits([(0, 1, 2)])[0])
    cache.crop(2)
    torch.testing.assert_close(cache.forward([3])[0], TARGET.logits([(0, 1, 3)])[0])


def test_a_stale_cache_entry_moves_the_law():
    """docs/design.md: a stale entry should move the next-token law by a TV >= 0.1 in the default families."""
    rng = np.random.default_rng(0)
    tvs = []
    for _ in range(200):
        prefix = tuple(int(t) for t in rng.integers(0, 4, size=3))
        stale = prefix + (int(rng.integers(0, 4)),)
        p = torch.softmax(TARGET.logits([prefix])[0], -1)
        q = torch.softmax(TARGET.logits([stale])[0], -1)
        tvs.append(0.5 * float((p - q).abs().sum()))
    assert np.median(tvs) >= 0.1


def test_draft_distance_dial():
    copy = draft_near(TARGET, distance=0.0, seed=3)
    far = draft_near(TARGET, distance=1.0, seed=3)
    prefixes = [(0,), (0, 1), (2, 3, 1)]
    p = torch.softmax(TARGET.logits(prefixes), -1)
    torch.testing.assert_close(torch.softmax(copy.logits(prefixes), -1), p)
    assert float((torch.softmax(far.logits(prefixes), -1) - p).abs().sum(-1).min()) > 0.1
