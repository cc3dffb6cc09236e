"""The public strategies: valid values, the corners they promise, and the small properties built on them (the
one-position rule over law pairs, the stop matcher over overlapping stop sets) -- each shown to catch its mutant."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import event, find, given
from hypothesis import strategies as st

import specverify.fuzz as fuzz
import specverify.fuzz.whitebox as whitebox
from specverify.errors import InvalidArgument
from specverify.fuzz import (
    PropertyFailure,
    check_one_position_law,
    check_stop_matcher,
    law_pairs,
    num_draft_tokens_sequences,
    probability_vectors,
    prompts,
    sampling_params,
    stop_sets,
    toy_grammars,
)
from specverify.oracles import make_vocab, random_target
from specverify.sampling import next_token_probs
from tests.fuzz._budget import examples, fast_and_full, search

VOCAB = make_vocab(7)
TARGET = random_target(VOCAB, seed=0)


@fast_and_full(600, law_pairs())
def test_one_position_of_the_rule_commits_the_target_law(pair):
    target, draft = pair
    tv = 0.5 * float(np.abs(target - draft).sum())
    event("equal laws" if tv == 0 else "disjoint support" if tv > 1 - 1e-9 else "overlapping laws")
    if np.any((target > 0) & (draft == 0)):
        event("q(x) = 0 < p(x)")
    check_one_position_law(target, draft)


def softmax_residual(target, draft):  # transformers #28508: softmax instead of normalisation
    return torch.softmax((target - draft).clamp_min(0), -1)


def resample_from_target(target, draft):  # the seed's warning: resample from p instead of the residual
    return target


@pytest.mark.parametrize("residual", [softmax_residual, resample_from_target])
def test_one_position_property_catches_a_wrong_residual(residual):
    def fails(pair):
        try:
            check_one_position_law(*pair, residual=residual)
        except PropertyFailure:
            return True
        return False

    find(law_pairs(), fails, settings=search(100))


@fast_and_full(300, probability_vectors())
def test_probability_vectors_are_laws_with_their_corners(row):
    assert row.dtype == np.float64 and np.all(row >= 0) and abs(row.sum() - 1) < 1e-12
    event("exact zero" if np.any(row == 0) else "no zero")
    if np.any((row > 0) & (row < 1e-9)):
        event("1e-12 mass")
    if row.max() == 1.0:
        event("one-hot")
    if np.sum(row == row.max()) > 1:
        event("tie at the max")


def token_lists(count, seed):
    return np.random.default_rng(seed).integers(0, VOCAB.size - 1, size=count).tolist()


STOP_CASES = st.tuples(stop_sets(VOCAB.strings), st.builds(token_lists, st.integers(0, 12), st.integers(0, 2**32 - 1)))


@fast_and_full(800, STOP_CASES)
def test_incremental_stop_matcher_flags_what_the_text_holds(case):
    stops, tokens = case
    hits = check_stop_matcher(VOCAB.strings, stops, tokens)
    if any(hits):
        event("stop string completed")
    if any(len(s) > 1 and any(s.startswith(t) and s != t for t in VOCAB.strings if t) for s in stops):
        event("stop string spans tokens")


def token_local_hits(strings, stops, tokens):
    """A matcher that searches each token's text alone: misses stop strings that span tokens."""
    return [any(s in strings[t] for s in stops) for t in tokens]


def test_stop_property_catches_a_matcher_without_carry_over():
    def fails(case):
        try:
            check_stop_matcher(VOCAB.strings, case[0], case[1], matcher=token_local_hits)
        except PropertyFailure:
            return True
        return False

    find(STOP_CASES, fails, settings=search(200))


@fast_and_full(200, sampling_params(VOCAB))
def test_sampling_params_are_valid_and_sometimes_mask_everything(params):
    probs = next_token_probs(TARGET.logits([(0,)]), params, prompt=(0,), generated=(), eos_token_id=VOCAB.eos_token_id)
    event("every token masked" if float(probs.sum()) == 0 else "some token allowed")
    for name in sorted(params.active()):
        event(f"processor {name}")


@fast_and_full(150, toy_grammars(VOCAB.size, VOCAB.eos_token_id))
def test_toy_grammars_hold_dead_ends_and_immediate_acceptance(grammar):
    allowed, nxt = grammar.tables(VOCAB.size, VOCAB.eos_token_id)
    for state in range(grammar.num_states):
        assert set(np.flatnonzero(allowed[state])) - {VOCAB.eos_token_id} == set(grammar.allowed(state))
        assert allowed[state, VOCAB.eos_token_id] == grammar.accepting(state)
    if grammar.accepting(0):
        event("accepts at once")
    if any(not grammar.allowed(s) and not grammar.accepting(s) for s in range(grammar.num_states)):
        event("dead end")


@examples(100)
@given(num_draft_tokens_sequences(), prompts(VOCAB.size, VOCAB.eos_token_id))
def test_num_draft_tokens_sequences_and_prompts(draft_counts, prompt):
    assert draft_counts and all(g >= 1 for g in draft_counts)
    assert prompt and VOCAB.eos_token_id not in prompt
    if len(set(draft_counts)) > 1:
        event("num_draft_tokens changes between rounds")


WHITE_BOX_NAMES = (
    "WhiteBoxDecoder",
    "RoundReport",
    "Workload",
    "Step",
    "Add",
    "Cancel",
    "Preempt",
    "Resume",
    "run_schedule",
    "PROPERTIES",
    "ReferenceWhiteBox",
    "FAULT_KINDS",
    "sample_outcomes",
)


def test_public_api_holds_the_black_box_part_and_the_white_box_harness_sits_apart():
    assert all(hasattr(fuzz, name) for name in fuzz.__all__) and len(fuzz.__all__) <= 22
    assert all(hasattr(whitebox, name) for name in whitebox.__all__)
    assert set(WHITE_BOX_NAMES) <= set(whitebox.__all__) and not set(whitebox.__all__) & set(fuzz.__all__)
    assert not [n for n in dir(fuzz) if n in WHITE_BOX_NAMES], "white-box names leak into specverify.fuzz"


def test_import_hygiene():
    code = "import sys, specverify; specverify.SamplingParams; print('hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_strategies_reject_bad_arguments_with_name_value_and_fix():
    with pytest.raises(InvalidArgument, match=r"kinds=\('nope',\) must be a non-empty subset"):
        probability_vectors(kinds=("nope",))
    with pytest.raises(InvalidArgument, match=r"distance=\(0\.5, 0\.2\) must be a \(low, high\) pair"):
        law_pairs(distance=(0.5, 0.2))
    with pytest.raises(InvalidArgument, match=r"max_tokens=\(0, 3\) must be a \(low, high\) pair"):
        sampling_params(VOCAB, max_tokens=(0, 3))
    with pytest.raises(InvalidArgument, match=r"num_slots=0 must be an int >= 1"):
        whitebox.schedules(0)
    with pytest.raises(InvalidArgument, match=r"max_num_draft_tokens=0 must be an int >= 1"):
        num_draft_tokens_sequences(max_num_draft_tokens=0)
    with pytest.raises(InvalidArgument, match=r"decoder=3 lacks"):
        whitebox.check_white_box(3)
