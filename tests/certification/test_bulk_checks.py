"""The slow path's bulk steps give what their one-at-a-time versions give: the protocol check of a call's
completions (each distinct one checked once), the tally counted in bulk, requests copied with new seeds, and the
conversion that passes clean completions with streams through."""

import gc

import numpy as np
import pytest

from specverify.certification.run.bulk import gc_paused, reseeded
from specverify.certification.run.collect import Tally
from specverify.certification.run.runner import _as_completions
from specverify.certification.run.validate import completion_violation, completions_violation
from specverify.errors import InvalidArgument
from specverify.oracles.models import make_vocab
from specverify.params import SamplingParams
from specverify.protocol import Completion, Request

VOCAB = make_vocab(6)  # EOS = 5


def _random_completions(rng, count, *, bad_rate):
    """Completions (max_tokens 8, γ 2) whose rounds, stream chunks and tokens agree, some of them broken."""
    out = []
    for _ in range(count):
        accepted = tuple(int(a) for a in rng.integers(0, 3, size=int(rng.integers(1, 3))))
        tokens = tuple(int(t) for t in rng.integers(0, 5, size=sum(a + 1 for a in accepted)))
        chunks, start = [], 0
        for a in accepted:
            chunks.append(tokens[start : start + a + 1])
            start += a + 1
        stream, reason = tuple(chunks), "no_token"  # unfinished: the model ran out of tokens
        if rng.random() < bad_rate:  # one of four breaches
            kind = int(rng.integers(0, 4))
            if kind == 0:
                tokens = tokens + (9,)  # outside the vocabulary
            elif kind == 1:
                stream = (tokens, (1,))  # does not concatenate
            elif kind == 2:
                accepted = (7,)  # outside [0, γ]
            else:
                reason = "eos"  # does not match the tokens
        out.append(Completion(tokens, reason, stream=stream, accepted=accepted))
    return out


def _one_by_one(completions, requests):
    known = set()
    for comp, req in zip(completions, requests):
        problem = completion_violation(comp, req, VOCAB, known_ok=known)
        if problem:
            return problem
    return None


@pytest.mark.parametrize("seed", range(6))
def test_the_bulk_check_reports_the_first_violation_the_loop_reports(seed):
    rng = np.random.default_rng(seed)
    params = (SamplingParams(max_tokens=8), SamplingParams(max_tokens=8, temperature=0.5))
    completions = _random_completions(rng, 400, bad_rate=0.01 * seed)
    requests = [Request((0,), params[i % 2], 2, seed=i) for i in range(len(completions))]
    want = _one_by_one(completions, requests)
    assert (want is None) == (seed == 0)
    assert completions_violation(completions, requests, VOCAB, known_ok=set()) == want


def test_the_bulk_check_checks_an_equal_completion_under_other_params_again():
    """A completion valid for one request shape is checked again for another (max_tokens 2 here)."""
    comp = Completion((1, 2, 3), "length")
    requests = [Request((0,), SamplingParams(max_tokens=3)), Request((0,), SamplingParams(max_tokens=2))]
    assert "3 tokens > max_tokens=2" in completions_violation([comp, comp], requests, VOCAB, known_ok=set())


@pytest.mark.parametrize("seed", range(3))
def test_shared_completion_objects_are_checked_under_each_request_shape(seed):
    """A decoder may hand out one object for equal completions (the reference does): the first violation is still
    the loop's, whichever request shape each copy answers."""
    rng = np.random.default_rng(seed)
    params = (SamplingParams(max_tokens=8), SamplingParams(max_tokens=8, temperature=0.5), SamplingParams(max_tokens=2))
    pool = _random_completions(rng, 20, bad_rate=0.05 * seed)
    completions = [pool[i] for i in rng.integers(0, len(pool), 400)]
    requests = [Request((0,), params[int(i)], 2, seed=j) for j, i in enumerate(rng.integers(0, 3, 400))]
    want = _one_by_one(completions, requests)
    assert want is not None  # max_tokens 2 makes longer completions violations
    assert completions_violation(completions, requests, VOCAB, known_ok=set()) == want


def test_an_unhashable_field_is_named_not_a_crash():
    odd = Completion((1, 2, 3), "length", accepted=([1], 0))
    request = Request((0,), SamplingParams(max_tokens=3), 2)
    assert "outside [0, γ=2]" in completions_violation([odd], [request], VOCAB, known_ok=set())


def test_the_bulk_check_wants_one_completion_per_request():
    with pytest.raises(InvalidArgument, match="len\\(completions\\)=1"):
        completions_violation([Completion((1,), "length")], [], VOCAB)


def test_the_bulk_tally_counts_what_add_counts_breach_included():
    rng = np.random.default_rng(3)
    completions = _random_completions(rng, 600, bad_rate=0.0)
    completions[250] = Completion((1,), "length", accepted=(2, 2))  # claims at least 5 tokens
    completions[420] = Completion((2,), "length", accepted=None)  # not reported: the shape reports nothing
    one, bulk = Tally(2), Tally(2)
    for comp in completions:
        one.add(comp)
    bulk.add_all(completions[:300])
    bulk.add_all(iter(completions[300:]))
    a, b = one.draws(600), bulk.draws(600)
    assert (a.outcomes, a.accepted, a.rounds, a.prefill) == (b.outcomes, b.accepted, b.rounds, b.prefill)
    assert b.violation == a.violation and "(tokens [1])" in b.violation
    assert (bulk.shapes, bulk.slack, bulk.unreported) == (one.shapes, one.slack, one.unreported)


def test_reseeded_requests_equal_constructed_ones():
    params = SamplingParams(max_tokens=3, temperature=0.7)
    templates = [Request((0, 1), params, 2), Request((2,), params, 3, tree=(2, 1, 1))]
    seeds = [5, None, 2**63 - 1]
    got = reseeded([templates[0], templates[1], templates[0]], seeds)
    want = [Request(t.prompt, t.params, t.num_draft_tokens, seed=s, tree=t.tree) for t, s in zip(
        [templates[0], templates[1], templates[0]], seeds)]  # fmt: skip
    assert got == want and [hash(r) for r in got] == [hash(r) for r in want]
    assert templates[0].seed is None  # the templates are left as they were


@pytest.mark.parametrize("seeds", [[-1], [2**63], [1.0], [True]])
def test_reseeded_checks_its_seeds(seeds):
    with pytest.raises(InvalidArgument, match="seeds must be None or ints"):
        reseeded([Request((0,), SamplingParams())], seeds)


def test_reseeded_checks_its_templates():
    with pytest.raises(InvalidArgument, match="len\\(seeds\\)=2"):
        reseeded([Request((0,), SamplingParams())], [1, 2])
    with pytest.raises(InvalidArgument, match="expected specverify Requests"):
        reseeded([((0,), SamplingParams())], [1])


def test_gc_paused_restores_the_collector_state():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: left off
    finally:
        gc.enable()


def test_clean_completions_with_streams_pass_through_as_they_are():
    clean = [Completion((1, 2, 3), "length", stream=((1,), (2, 3)), accepted=(1, 0))]
    out = _as_completions(clean, 1)
    assert out[0] is clean[0]
    odd = [Completion((1, 2), "length", stream=[(1,), (2,)])]  # a list of chunks: converted
    assert _as_completions(odd, 1)[0].stream == ((1,), (2,))
    inner = [Completion((1, 2), "length", stream=((1,), (np.int64(2),)))]
    assert type(_as_completions(inner, 1)[0].stream[1][0]) is int


def test_set_up_is_frozen_until_release_and_a_foreign_freeze_is_left_alone():
    from specverify.certification.run.bulk import GcFreeze

    assert gc.get_freeze_count() == 0
    freeze, a, b = GcFreeze(), object(), object()
    try:
        freeze.hold(a)
        kept = gc.get_freeze_count()
        assert kept > 0  # what set-up left is out of every collection
        freeze.hold(b)
        freeze.release(a)
        assert gc.get_freeze_count() >= kept  # b still holds it
        freeze.thaw()  # a decoder is released: what it held must be collectable
        assert gc.get_freeze_count() == 0
        freeze.hold(b)
        freeze.release(b)
        assert gc.get_freeze_count() == 0
        gc.freeze()  # the user's own freeze
        theirs = gc.get_freeze_count()
        fresh = [[] for _ in range(5000)]  # tracked objects made after their freeze: an extension would freeze them
        freeze.hold(a)
        freeze.release(a)
        # neither extended (+5000) nor undone (0); a frozen object freed meanwhile (by refcount, in any thread) lowers
        # the count a little, which made an exact comparison flaky (558 921 against 558 923 in one full run)
        assert theirs - 100 <= gc.get_freeze_count() < theirs + len(fresh)
    finally:
        gc.unfreeze()


def test_a_certification_leaves_nothing_frozen():
    import specverify as sv

    cert = sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["greedy"], isolation="none")
    assert [r.name for r in cert.scenarios if r.covered] == ["greedy"]  # a decoder was made, used and released
    assert gc.get_freeze_count() == 0


class _Answers:
    """A runner double answering every ``call`` and ``sample`` with the same outcome: ((4,), "length")."""

    def request(self, op, spec, *args):
        from specverify.protocol import SampleCounts

        if op == "call":
            return [Completion((4,), "length") for _ in args[0]]
        return SampleCounts(outcomes={((4,), "length"): args[1]})


@pytest.mark.parametrize("path", ["call", "sample"])
def test_what_was_valid_on_one_pair_is_checked_again_on_another(path):
    """Token 4 is valid in a vocabulary of 6 and outside one of 4: the cache of valid outcomes is per pair."""
    from types import SimpleNamespace

    from specverify.certification.run.collect import DecoderHandle, Session
    from specverify.errors import ProtocolViolation

    session, params = Session(_Answers()), SamplingParams(max_tokens=1)
    wide, narrow = (
        DecoderHandle(SimpleNamespace(spec=name, vocab=make_vocab(size)), frozenset({"batch"}), path == "sample")
        for name, size in (("wide", 6), ("narrow", 4))
    )
    request = Request((0,), params, 1, seed=1)
    assert session.draw(wide, request, 4).outcomes == {((4,), "length"): 4}
    with pytest.raises(ProtocolViolation, match="outside the vocabulary"):
        session.draw(narrow, request, 4)


@pytest.mark.parametrize(
    "outcomes, same",
    [
        ({((1, 2), "length"): 3, ((), "no_token"): 1}, True),
        ({((1, np.int64(2)), "length"): 3}, False),  # a numpy token: converted
        ({((1, 2), "length"): np.int64(3)}, False),  # a numpy count: converted
        ({((True,), "length"): 3}, False),  # a bool is no token id: left for the protocol check to name
    ],
)
def test_clean_sample_counts_pass_through_and_others_are_converted(outcomes, same):
    from specverify.certification.run.bulk import clean_outcomes
    from specverify.certification.run.runner import _as_counts
    from specverify.protocol import SampleCounts

    assert clean_outcomes(outcomes) == same
    got = _as_counts(SampleCounts(outcomes=outcomes)).outcomes
    assert got == outcomes and all(type(n) is int for n in got.values())
    assert all(type(t) in (int, bool) for tokens, _ in got for t in tokens)


def test_the_few_completions_check_agrees_with_the_bulk_one(monkeypatch):
    """Calls of up to ``_FEW`` completions are checked field by field: the same answer as the bulk sets."""
    from specverify.certification.run import bulk

    ok = Completion((1, 2, 3), "length", stream=((1,), (2, 3)), accepted=(1, 0))
    cases = [
        [ok],
        [ok, Completion((4,), "eos")],
        [ok, Completion((1, np.int64(2)), "length")],
        [Completion((1, 2), "length", stream=[(1,), (2,)])],
        [Completion((1, 2), "length", stream=((1,), [2]))],
        [Completion((1, 2), "length", stream=((1,), (np.int64(2),)))],
        [Completion((1, 2), "length", accepted=[1])],
        [Completion((1, 2), "length", accepted=(True,))],
        [ok, "not a completion"],
    ]
    few = [bulk.clean_completions(items) for items in cases]
    monkeypatch.setattr(bulk, "_FEW", 0)
    assert few == [bulk.clean_completions(items) for items in cases]
    assert few == [True, True, False, False, False, False, False, False, False]
