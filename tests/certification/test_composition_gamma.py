"""Batch composition for a decoder that fixes γ per engine (``decoder.fixed_gamma``, issue #24): R's neighbours in
the large calls take R's γ (a neighbour of another γ would run on another engine); the plan does not change."""

from specverify.certification.checks.composition import (
    CompositionCheck,
    _large_calls,
    _neighbours,
    small_call_shape,
)
from specverify.certification.matrix.scenarios import matrix

SCENARIO = matrix("checkpoint")["batch-composition"]


def test_neighbours_keep_other_prompts_and_temperatures_and_take_r_s_gamma_when_fixed():
    mixed, fixed = _neighbours(SCENARIO, 7), _neighbours(SCENARIO, 7, fixed_gamma=True)
    assert {r.num_draft_tokens for r in mixed} == {1, 2, 4}  # other γ than R's 3
    assert {r.num_draft_tokens for r in fixed} == {SCENARIO.num_draft_tokens}
    assert [(r.prompt, r.params, r.seed) for r in mixed] == [(r.prompt, r.params, r.seed) for r in fixed]
    assert len({r.prompt for r in fixed} | {SCENARIO.prompt}) == 4  # still other prompts than R's


def test_the_large_calls_of_a_fixed_gamma_decoder_hold_one_gamma_and_r_at_every_other_position():
    calls = _large_calls(SCENARIO, 300, lambda i: i, _neighbours(SCENARIO, 7, fixed_gamma=True))
    assert sum(len(positions) for _, positions in calls) == 300
    for requests, positions in calls:
        assert {r.num_draft_tokens for r in requests} == {SCENARIO.num_draft_tokens}
        assert all(requests[p].prompt == SCENARIO.prompt and requests[p].params == SCENARIO.params for p in positions)


def test_gamma_span_is_the_small_shape_s_then_r_s():
    assert CompositionCheck().gamma_span(SCENARIO) == (small_call_shape(SCENARIO).num_draft_tokens, 3)
