"""The adapters' one finish rule (specverify/adapters/boundary/finish.py), engine-free: what is cut, what is passed
through to the certifier, and the one exception for an engine that stops early."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify.adapters.boundary.finish import ENDS, EngineStoppedEarly, Finished, Finisher, clip_accepted, finish
from specverify.errors import InvalidArgument, ProtocolViolation
from specverify.oracles.law import first_finish
from specverify.oracles.models import make_vocab
from specverify.params import SamplingParams

VOCAB = make_vocab(6)  # a b ab " " ba EOS
EOS = 5


def test_tokens_after_eos_are_passed_through_uncut():
    done = finish((0, EOS, 1, 1), VOCAB, SamplingParams(max_tokens=6), engine="e")
    assert done == Finished((0, EOS, 1, 1), "eos", 1) and done.passed_through == 2
    # the oracle's rule, which protocol validation uses, sees the same violation: a finish before the last token
    assert first_finish(VOCAB, done.tokens, SamplingParams(max_tokens=6)) == (1, "eos")


def test_max_tokens_overshoot_is_passed_through():
    done = finish((0, 0, 0, 0), VOCAB, SamplingParams(max_tokens=3), engine="e")
    assert done == Finished((0, 0, 0, 0), "length", 2)


def test_a_stop_string_is_cut_only_when_the_adapter_implements_it():
    params = SamplingParams(max_tokens=6, stop=("ba",))  # "b" "a": completed by the second token
    assert finish((1, 0, 3, 3), VOCAB, params, engine="e", cuts={"stop"}) == Finished((1, 0), "stop", 1)
    # the engine was asked to honour it: the tokens after it are the engine's to answer for
    assert finish((1, 0, 3, 3), VOCAB, params, engine="e") == Finished((1, 0, 3, 3), "stop", 1)


def test_an_engine_end_after_the_adapters_cut_is_still_reported():
    """Cutting at the adapter's stop string would hide that the engine went on past its own EOS."""
    params = SamplingParams(max_tokens=6, stop=("ba",))
    assert finish((1, 0, EOS), VOCAB, params, engine="e", cuts={"stop"}) == Finished((1, 0), "stop", 1)
    done = finish((1, 0, EOS, 2), VOCAB, params, engine="e", cuts={"stop"})
    assert done == Finished((1, 0, EOS, 2), "stop", 1)


def test_an_adapter_that_implements_every_end_cuts_at_the_first():
    assert finish((0, EOS, 1), VOCAB, SamplingParams(max_tokens=6), engine="e", cuts=ENDS) == Finished(
        (0, EOS), "eos", 1
    )
    assert finish((0, 0, 0, 0), VOCAB, SamplingParams(max_tokens=2), engine="e", cuts=ENDS).tokens == (0, 0)


def test_a_completion_that_ends_on_its_finishing_token_is_unchanged():
    params = SamplingParams(max_tokens=3, stop=("ab",))
    for tokens, reason in [((0, EOS), "eos"), ((0, 1), "stop"), ((2,), "stop"), ((0, 0, 0), "length")]:
        for cuts in (frozenset(), {"stop"}, ENDS):
            assert finish(tokens, VOCAB, params, engine="e", cuts=cuts) == Finished(tokens, reason, len(tokens) - 1)


def test_an_early_stop_raises_the_one_exception():
    with pytest.raises(EngineStoppedEarly) as info:
        finish((0, 1), VOCAB, SamplingParams(max_tokens=5), engine="myengine", detail="its finish_reason 'abort'")
    assert str(info.value) == (
        "myengine stopped after 2 tokens (0, 1) without EOS, a stop string or max_tokens=5 (its finish_reason 'abort')"
    )
    assert isinstance(info.value, ProtocolViolation) and isinstance(info.value, RuntimeError)
    with pytest.raises(EngineStoppedEarly, match="after 0 tokens"):
        finish((), VOCAB, SamplingParams(max_tokens=5), engine="e", cuts=ENDS)


def test_ignore_eos_and_stops_held_back_until_min_tokens():
    assert (
        finish((EOS, EOS), VOCAB, SamplingParams(max_tokens=2, ignore_eos=True), engine="e").finish_reason == "length"
    )
    held = SamplingParams(max_tokens=4, min_tokens=3, stop=("a",), stop_after_min_tokens=True)
    assert finish((0, 0, 0), VOCAB, held, engine="e") == Finished((0, 0, 0), "stop", 2)
    assert finish((0, 0, 0), VOCAB, SamplingParams(max_tokens=4, stop=("a",)), engine="e").end == 0


def test_unknown_ends_are_refused():
    with pytest.raises(InvalidArgument, match="cuts="):
        finish((0,), VOCAB, SamplingParams(max_tokens=1), engine="e", cuts={"grammar"})


def test_finisher_stops_where_plain_sampling_would():
    f = Finisher(VOCAB, SamplingParams(stop=("ab",), max_tokens=4))
    assert [f.push(t) for t in (1, 0, 1)] == ["", "", "stop"]  # "b" "a" "b": "ab" completed by the third token
    f = Finisher(VOCAB, SamplingParams(max_tokens=2))
    assert [f.push(t) for t in (0, 0)] == ["", "length"]


def test_clip_accepted_keeps_the_counts_consistent_with_the_tokens_returned():
    assert clip_accepted((3, 3), 4, prefill_tokens=1) == (3,)  # the prefill's token + one round of 3: 4 tokens
    assert clip_accepted((3,), 2, prefill_tokens=1) == (1,)  # the first accepted draft finished the request
    assert clip_accepted((0, 2, 1), 7, prefill_tokens=1) == (0, 2, 1)
    assert clip_accepted((0, 2, 1), 5, prefill_tokens=1) == (0, 2)
    assert clip_accepted((3, 1), 4, prefill_tokens=2) == (2,)
    assert clip_accepted((0, 0, 0, 0), 5, prefill_tokens=1) == (0, 0, 0, 0)
    assert clip_accepted((2,), 3) == (2,) and clip_accepted((), 1, prefill_tokens=1) == ()


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.lists(st.integers(0, EOS), max_size=8),
    max_tokens=st.integers(1, 6),
    stop=st.sampled_from([(), ("ab",), ("a", "b b"), ("ba", "aa")]),
    cuts=st.sampled_from([frozenset(), frozenset({"stop"}), ENDS]),
)
def test_agrees_with_the_oracles_independent_rule(tokens, max_tokens, stop, cuts):
    """The decoders' rule (what boundary.finish builds on) and the oracle's naive one find the same first finish; what
    is returned is the engine's tokens, or a cut exactly there."""
    params = SamplingParams(max_tokens=max_tokens, stop=stop)
    oracle = first_finish(VOCAB, tokens, params)
    if oracle is None:
        with pytest.raises(EngineStoppedEarly):
            finish(tokens, VOCAB, params, engine="e", cuts=cuts)
        return
    done = finish(tokens, VOCAB, params, engine="e", cuts=cuts)
    assert (done.end, done.finish_reason) == oracle
    assert done.tokens in (tuple(tokens), tuple(tokens[: oracle[0] + 1]))
    if not cuts:
        assert done.tokens == tuple(tokens)
    if cuts == ENDS:
        assert done.tokens == tuple(tokens[: oracle[0] + 1])
