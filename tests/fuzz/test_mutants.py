"""Test the tester: every schedule property catches the deliberately broken decoder built for it.

Each test hunts with ``hypothesis.find`` (generate only, derandomized) over the same strategies the reference is
fuzzed with, narrowed only where the bug needs a feature to show (stop strings, a grammar, tiny blocks).
"""

from dataclasses import replace

import pytest
from hypothesis import find
from hypothesis.errors import NoSuchExample

from specverify.fuzz import PropertyFailure, sampling_params
from specverify.fuzz.whitebox import mutants, reference_runs, run_schedule
from specverify.grammar import ToyGrammar
from tests.fuzz._budget import search

# several tokens allowed per state, so drafts get rejected inside the grammar; state 0 accepts
CYCLE = ToyGrammar(transitions=({0: 1, 1: 2, 2: 0}, {0: 0, 3: 2}, {1: 1, 2: 0, 3: 0}), accepting={0})


def with_stops(vocab):
    return sampling_params(vocab, max_tokens=(4, 7)).map(lambda p: replace(p, stop=("ab a", "ba b", "  ")))


def with_grammar(vocab):
    return sampling_params(vocab, max_tokens=(4, 7), grammars=False).map(
        lambda p: replace(p, grammar=CYCLE, ignore_eos=False, bad_token_ids=(), min_tokens=0)
    )


def sampled(vocab):  # no truncation, no early stop: outputs depend on every draw (greedy ones do not)
    return sampling_params(vocab, max_tokens=(4, 7), grammars=False, stops=False, truncation=False).map(
        lambda p: replace(p, temperature=1.0, bad_token_ids=(), ignore_eos=True)
    )


# mutant -> options narrowing reference_runs to where its bug shows
OPTIONS = {
    "StopNotRolledBack": dict(params=with_stops),
    "GrammarNotRolledBack": dict(params=with_grammar),
    "AbortLeaksBlock": dict(block_sizes=(1,), kinds=("step", "fault")),
    "PublishesProvisional": dict(block_sizes=(1, 2)),
    "NoAbort": dict(kinds=("step", "fault")),
    "ResumeReseeds": dict(kinds=("step", "preempt"), params=sampled),
    "ResumeReemits": dict(kinds=("step", "preempt"), params=sampled),
    "ResumeDropsPenalties": dict(kinds=("step", "preempt"), params=sampled),
    "RngAdvancesOnFault": dict(kinds=("step", "fault"), params=sampled),
    "BatchDependentRng": dict(kinds=("step", "add")),
}
SCHEDULE_MUTANTS = sorted(name for name, prop in mutants.MUTANTS.items() if prop != "law")


def caught_by(run):
    try:
        run_schedule(*run)
    except PropertyFailure as failure:
        return failure.prop
    return None


@pytest.mark.parametrize("name", SCHEDULE_MUTANTS)
def test_property_catches_its_mutant(name):
    expected = mutants.MUTANTS[name]
    runs = reference_runs(white_box=getattr(mutants, name), **OPTIONS.get(name, {}))
    seen = []

    def fails(run):
        prop = caught_by(run)
        seen.append(prop)
        return prop == expected

    find(runs, fails, settings=search(300))
    others = {p for p in seen if p not in (None, expected)}
    assert not others, f"{name} was first caught by {others}, expected {expected!r}"


def test_reference_passes_the_hunts_that_catch_the_mutants():
    narrowed = {repr(sorted((k, v) for k, v in o.items() if k != "kinds")): o for o in OPTIONS.values()}
    for options in narrowed.values():  # one hunt per distinct narrowing of the workloads (no false alarm there)
        with pytest.raises(NoSuchExample):
            find(reference_runs(**options), lambda run: caught_by(run) is not None, settings=search(5))
