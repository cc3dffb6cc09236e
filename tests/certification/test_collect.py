"""The slow path's per-completion steps, which run hundreds of thousands of times a certification: the bulk check
that passes clean completions through, the conversion of the rest, and the tally counted per accepted shape."""

from collections import Counter

import numpy as np
import pytest
import torch

from specverify.certification.run.collect import Tally
from specverify.certification.run.runner import DecoderFailure, _as_completions
from specverify.certification.run.validate import completion_violation
from specverify.oracles.models import make_vocab
from specverify.params import SamplingParams
from specverify.protocol import Completion, Request

CLEAN = [Completion((1, 2), "length", accepted=(1,)), Completion((0, 5), "eos", accepted=None)]


def test_clean_completions_pass_through_as_they_are():
    out = _as_completions(CLEAN, 2)
    assert out == CLEAN and all(a is b for a, b in zip(out, CLEAN))


@pytest.mark.parametrize(
    "odd",
    [
        Completion(tuple(np.int64(t) for t in (1, 2)), "length"),  # numpy ints, as argmax gives them
        Completion((torch.tensor(1), 2), "length", accepted=(np.int64(1),)),  # a 0-d tensor
        Completion([1, 2], "length"),  # a list
        Completion((1, 2), "length", stream=((1,), (np.int64(2),))),
    ],
)
def test_other_completions_are_converted_to_python_int_tuples(odd):
    out = _as_completions([CLEAN[0], odd], 2)
    got = out[1]
    assert got.tokens == (1, 2) and all(type(t) is int for t in got.tokens)
    assert got.accepted is None or all(type(a) is int for a in got.accepted)
    assert got.stream is None or all(type(t) is int for chunk in got.stream for t in chunk)


def test_a_bool_token_is_not_taken_for_an_int():
    out = _as_completions([Completion((True, 2), "length")], 1)
    assert type(out[0].tokens[0]) is bool  # kept as it is: the protocol check names it


def test_a_foreign_object_is_a_decoder_failure():
    with pytest.raises(DecoderFailure, match="without tokens/finish_reason"):
        _as_completions([CLEAN[0], object()], 2)


def _slow_tally(completions, gamma):
    """What the tally counts, computed completion by completion."""
    first = Counter(c.accepted[0] for c in completions if c.accepted)
    rounds = Counter(a for c in completions if c.accepted for a in c.accepted)
    return Counter((c.tokens, c.finish_reason) for c in completions), first, rounds


def test_tally_counts_per_shape_what_a_completion_by_completion_count_gives():
    rng = np.random.default_rng(0)
    completions = []
    for _ in range(500):
        accepted = tuple(int(a) for a in rng.integers(0, 3, size=rng.integers(0, 3)))
        n = sum(a + 1 for a in accepted) - int(rng.integers(0, 2)) if accepted else int(rng.integers(1, 4))
        completions.append(
            Completion(tuple(int(t) for t in rng.integers(0, 5, size=max(n, 1))), "length", None, accepted)
        )
    tally = Tally(2)
    for c in completions:
        tally.add(c)
    draws = tally.draws(len(completions))
    outcomes, first, rounds = _slow_tally(completions, 2)
    assert draws.outcomes == outcomes and draws.accepted == first and draws.rounds == rounds
    assert draws.violation is None


def test_a_shape_reported_by_some_completions_only_is_not_reported():
    """accepted=None is "not reported", () is "no round": a mix of reporting and silent completions reports nothing
    (the reporting ones are chosen by how they ended), but a breach among the reporting ones is kept."""
    tally = Tally(2)
    tally.add(Completion((1, 2), "length", accepted=(1,)))
    tally.add(Completion((3,), "length", accepted=()))
    draws = tally.draws(2)
    assert draws.accepted == Counter({1: 1}) and draws.rounds == Counter({1: 1})
    tally.add(Completion((4, 5), "stop", accepted=None))
    draws = tally.draws(3)
    assert draws.accepted is None and draws.rounds is None and sum(draws.outcomes.values()) == 3
    tally.add(Completion((1,), "length", accepted=(2, 2)))  # claims at least 5 tokens
    assert "claims at least 5 tokens" in tally.draws(4).violation


def test_tally_keeps_the_first_breach_with_its_tokens():
    tally = Tally(2)
    tally.add(Completion((1, 2, 3), "length", accepted=(2,)))
    tally.add(Completion((1,), "length", accepted=(2, 2)))  # claims at least 5 tokens
    tally.add(Completion((4,), "length", accepted=(2, 2)))  # the same shape: the first breach is kept
    assert "claims at least 5 tokens" in tally.draws(3).violation and "(tokens [1])" in tally.draws(3).violation


def test_the_tokens_beyond_the_rounds_follow_what_the_decoder_declares():
    """Up to 2 tokens before the first round when undeclared; exactly decoder.prefill_tokens when declared; any
    number for unmodelled drafts (steps without a draft that an engine does not report: vLLM's n-gram)."""
    long = Completion((1, 2, 3, 4, 5, 6), "length", accepted=(0, 0))  # 2 rounds: 2 tokens, 4 more emitted
    two = Completion((1, 2, 3, 4), "length", accepted=(0, 0))  # 2 more
    for prefill, draft_law, bad in [(None, "model", [long]), (0, "model", [long, two]), (None, "unmodelled", [])]:
        for comp in (long, two):
            tally = Tally(2, prefill, draft_law)
            tally.add(comp)
            breach = tally.draws(1).violation
            assert (breach is not None) == (comp in bad), (prefill, draft_law, comp, breach)
    tally = Tally(2, 1)
    tally.add(two)
    assert tally.draws(1).prefill == 1  # declared, not inferred


def test_a_known_accepted_shape_is_not_rechecked_but_a_new_one_is():
    vocab, params = make_vocab(6), SamplingParams(max_tokens=3)
    request, known = Request((0,), params, 2), set()
    ok = Completion((1, 2, 3), "length", accepted=(1, 0))
    assert completion_violation(ok, request, vocab, known_ok=known) is None
    assert (3, (1, 0), 2) in known
    bad = Completion((1, 2, 3), "length", accepted=(3,))
    assert "outside [0, γ=2]" in completion_violation(bad, request, vocab, known_ok=known)
    assert (3, (3,), 2) not in known
    odd = Completion((1, 2, 3), "length", accepted=([1], 0))  # an unhashable entry is named, not a crash
    assert "outside [0, γ=2]" in completion_violation(odd, request, vocab, known_ok=known)


def test_a_bool_in_accepted_is_a_violation_even_where_its_int_shape_was_valid():
    """``True == 1`` to Python: an ``accepted`` of bools must not pass as the shape (3, (1, 0), 2) found valid."""
    vocab, params = make_vocab(6), SamplingParams(max_tokens=3)
    request, known = Request((0,), params, 2), set()
    assert (
        completion_violation(Completion((1, 2, 3), "length", accepted=(1, 0)), request, vocab, known_ok=known) is None
    )
    bools = Completion((1, 2, 3), "length", accepted=(True, False))
    assert "holds a bool" in completion_violation(bools, request, vocab, known_ok=known)
    assert "holds a bool" in completion_violation(bools, request, vocab)
