"""The oracle's batched walks give the one-at-a-time answers: ``greedy_outcomes`` over many prompts equals
``greedy_outcome`` prompt by prompt, for every greedy scenario of the toy matrix (issue #24: the greedy outcomes of
a scenario in one batched enumeration)."""

import numpy as np
import pytest

from specverify.certification.matrix.laws import _GREEDY, greedy_many
from specverify.certification.matrix.scenarios import matrix
from specverify.enums import ScenarioKind
from specverify.errors import InvalidArgument
from specverify.oracles.law import exact_law, greedy_outcome, greedy_outcomes

TOY = matrix("toy")
GREEDY = [s for s in TOY.values() if s.kind == ScenarioKind.GREEDY]


def _prompts(target, seed, n=30):
    rng = np.random.default_rng(seed)
    tokens = [t for t in range(target.vocab.size) if t != target.vocab.eos_token_id]
    return [tuple(int(t) for t in rng.choice(tokens, size=int(rng.integers(1, 6)))) for _ in range(n)]


@pytest.mark.parametrize("scenario", GREEDY, ids=[s.name for s in GREEDY])
def test_greedy_outcomes_equal_one_prompt_at_a_time(scenario):
    target = scenario.models().target
    prompts = _prompts(target, len(scenario.name)) + [(0,), (0,)]  # a repeated prompt too
    got = greedy_outcomes(target, prompts, scenario.params)
    assert got == [greedy_outcome(target, p, scenario.params) for p in prompts]


def test_greedy_many_fills_and_reads_the_memo():
    scenario = GREEDY[0]
    target = scenario.models().target
    prompts = _prompts(target, 99, n=12)
    _GREEDY.clear()
    first = greedy_many(scenario, prompts[:5], scenario.params)
    both = greedy_many(scenario, prompts, scenario.params)  # five known, seven new
    assert both[:5] == first and both == [greedy_outcome(target, p, scenario.params) for p in prompts]


def test_exact_law_unchanged_by_the_batched_walk():
    scenario = TOY["penalties"]
    law = exact_law(scenario.models().target, scenario.prompt, scenario.params)
    assert abs(float(law.probs.sum()) - 1.0) < 1e-12 and len(set(law.outcomes)) == len(law.outcomes)


def test_greedy_outcomes_validate_their_arguments():
    target = GREEDY[0].models().target
    with pytest.raises(InvalidArgument, match="at least one prompt"):
        greedy_outcomes(target, [], GREEDY[0].params)
    with pytest.raises(InvalidArgument, match="outside the vocabulary"):
        greedy_outcomes(target, [(0,), (99,)], GREEDY[0].params)
    with pytest.raises(InvalidArgument, match="SamplingParams"):
        greedy_outcomes(target, [(0,)], {"temperature": 0})
