"""The vectorized reference decoder and decode_plain against the exact law (docs/design.md semantics).

Every sampling assertion is a pooled χ² at α = 1e-8 per test (fewer than 100 tests: family α < 1e-6), seeded.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch

from specverify import InvalidArgument, SamplingParams
from specverify.grammar import ToyGrammar
from specverify.oracles import ToyModel, draft_near, exact_law, greedy_outcome, make_vocab, random_target
from specverify.oracles.processors import parity_processor
from specverify.protocol import Request
from specverify.reference import VectorizedDecoder, decode_plain, make_decoder, sample_plain
from tests.helpers import pooled_pvalue

ALPHA = 1e-8
VOCAB = make_vocab(5)
TARGET = random_target(VOCAB, seed=3, eos_bias=-1.0)
DRAFT = draft_near(TARGET, distance=0.6, seed=7)
DEAD_END = ToyGrammar(transitions=({0: 1, 1: 2, 3: 0}, {}, {1: 2, 0: 0}), accepting={2})

SCENARIOS = {
    "plain": (TARGET, DRAFT, SamplingParams(max_tokens=4), 3),
    "gamma1": (TARGET, DRAFT, SamplingParams(max_tokens=4), 1),
    "gamma4": (TARGET, DRAFT, SamplingParams(max_tokens=4), 4),
    "draft_zero": (TARGET, draft_near(TARGET, distance=0.6, seed=7, zero_rate=0.4), SamplingParams(max_tokens=4), 3),
    "target_zero": (
        random_target(VOCAB, seed=4, zero_rate=0.4, eos_bias=-1.0),
        draft_near(TARGET, distance=1.0, seed=8),
        SamplingParams(max_tokens=4),
        3,
    ),
    "eos_in_block": (random_target(VOCAB, seed=5, eos_bias=0.8), DRAFT, SamplingParams(max_tokens=5), 3),
    "stop_spanning": (TARGET, DRAFT, SamplingParams(max_tokens=5, stop=("ab", " b")), 2),
    "max_tokens_5_gamma_3": (TARGET, DRAFT, SamplingParams(max_tokens=5), 3),
    "penalties": (
        TARGET,
        DRAFT,
        SamplingParams(max_tokens=4, repetition_penalty=1.6, frequency_penalty=0.5, presence_penalty=0.3),
        3,
    ),
    "top_k_p_min_p": (TARGET, DRAFT, SamplingParams(max_tokens=4, top_k=3, top_p=0.85, min_p=0.1, temperature=1.3), 2),
    "min_tokens": (random_target(VOCAB, seed=5, eos_bias=0.8), DRAFT, SamplingParams(max_tokens=4, min_tokens=2), 3),
    "grammar_dead_end": (TARGET, DRAFT, SamplingParams(max_tokens=4, grammar=DEAD_END), 3),
    "bad_tokens_temp": (TARGET, DRAFT, SamplingParams(max_tokens=4, bad_token_ids=(1,), temperature=0.5), 3),
    "long_prompt": (TARGET, DRAFT, SamplingParams(max_tokens=4), 2),
    # a processor reading the history (drafts included), after the penalties and before temperature and top-k
    "logits_processor": (
        TARGET,
        DRAFT,
        SamplingParams(max_tokens=4, logits_processors=(parity_processor,), repetition_penalty=1.4, temperature=0.8),
        3,
    ),
}
PROMPTS = {"long_prompt": (0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1)}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_speculative_law_matches_exact_law(name):
    target, draft, params, gamma = SCENARIOS[name]
    prompt = PROMPTS.get(name, (0, 1))
    law = exact_law(target, prompt, params)
    counts = VectorizedDecoder(target, draft).sample(Request(prompt, params, gamma, seed=1234), 60_000)
    pvalue, df, impossible = pooled_pvalue(counts.outcomes, law)
    assert impossible == 0, f"{impossible} outcomes of exact probability 0 (scenario {name}, seed 1234)"
    assert pvalue > ALPHA, f"scenario {name}: p={pvalue:.3g} (df={df}); reproduce with seed 1234"


@pytest.mark.parametrize(
    "name", ["plain", "stop_spanning", "penalties", "grammar_dead_end", "min_tokens", "logits_processor"]
)
def test_plain_law_matches_exact_law(name):
    target, _, params, _ = SCENARIOS[name]
    law = exact_law(target, (0, 1), params)
    counts = sample_plain(target, Request((0, 1), params, 1, seed=99), 30_000)
    pvalue, df, impossible = pooled_pvalue(counts.outcomes, law)
    assert impossible == 0 and pvalue > ALPHA, f"scenario {name}: p={pvalue:.3g}, impossible={impossible}"


def test_rounds_reach_first_rejection_middle_rejection_and_full_acceptance():
    target, draft, params, gamma = SCENARIOS["plain"]
    accepted = VectorizedDecoder(target, draft).sample(Request((0, 1), params, gamma, seed=5), 20_000).accepted
    assert {0, 1, 2, 3} <= set(accepted), accepted
    assert min(accepted[k] for k in range(4)) > 500


def test_eos_and_length_finish_inside_blocks():
    target, draft, params, gamma = SCENARIOS["eos_in_block"]
    completions = VectorizedDecoder(target, draft)([Request((0, 1), params, gamma, seed=s) for s in range(400)])
    eos_ends = {len(c.tokens) for c in completions if c.finish_reason == "eos"}
    assert eos_ends & {2, 3}  # ends that are not round boundaries for every acceptance pattern
    for c in completions:
        assert sum(c.stream, ()) == c.tokens
        assert len(c.tokens) <= params.max_tokens
        assert VOCAB.eos_token_id not in c.tokens[:-1]


def test_greedy_outputs_equal_greedy_outcome_on_many_prompts():
    draft = draft_near(TARGET, distance=1.0, seed=21)  # an independent model: disagrees with the target argmax
    rng = np.random.default_rng(0)
    prompts = [tuple(int(t) for t in rng.integers(0, 4, size=int(rng.integers(1, 6)))) for _ in range(120)]
    disagree = np.mean(
        [int(torch.argmax(TARGET.logits([p])[0]) != torch.argmax(draft.logits([p])[0])) for p in prompts]
    )
    assert disagree >= 0.3
    for params in (
        SamplingParams(temperature=0, max_tokens=5),
        SamplingParams(temperature=0, max_tokens=4, stop=("ab",), repetition_penalty=1.5),
    ):
        requests = [Request(p, params, 1 + i % 4) for i, p in enumerate(prompts)]
        got = VectorizedDecoder(TARGET, draft)(requests)
        for req, c in zip(requests, got):
            assert (c.tokens, c.finish_reason) == greedy_outcome(TARGET, req.prompt, params), req


def test_seeded_requests_do_not_depend_on_their_neighbours():
    params = SamplingParams(max_tokens=5, stop=("ab",))
    dec = make_decoder(TARGET, DRAFT)
    alone = dec([Request((0, 1), params, 3, seed=42)])[0]
    mixed = dec(
        [
            Request((2,), replace(params, temperature=0.5), 2, seed=7),
            Request((0, 1), params, 3, seed=42),
            Request((0, 1), params, 3, seed=43),
        ]
    )[1]
    assert alone == mixed


def test_unseeded_requests_differ_and_plain_path_completes():
    params = SamplingParams(max_tokens=5)
    outs = make_decoder(TARGET, DRAFT)([Request((0, 1), params, 2) for _ in range(50)])
    assert len({c.tokens for c in outs}) > 5
    plain = decode_plain(TARGET, [Request((0, 1), params, 1, seed=3)])[0]
    assert plain.finish_reason in ("eos", "length") and len(plain.tokens) <= 5


class NaNModel(ToyModel):
    def head(self, kv):
        return torch.full((len(kv), self.vocab.size), float("nan"), dtype=torch.float64)


def test_bad_input_is_invalid_argument():
    dec = make_decoder(TARGET, DRAFT)
    with pytest.raises(InvalidArgument, match="prompt"):
        dec([Request((0, 7), SamplingParams(), 2)])
    with pytest.raises(InvalidArgument, match="num_draft_tokens=0"):
        Request((0,), SamplingParams(), 0)
    with pytest.raises(InvalidArgument, match="prompt"):
        Request((), SamplingParams(), 1)
    with pytest.raises(InvalidArgument, match="NaN"):
        make_decoder(NaNModel(vocab=VOCAB, seed=1), DRAFT)([Request((0,), SamplingParams(), 1)])
    with pytest.raises(InvalidArgument, match="vocabulary"):
        make_decoder(TARGET, random_target(make_vocab(6), seed=1))
    with pytest.raises(InvalidArgument, match="n=0"):
        dec.sample(Request((0,), SamplingParams(), 1), 0)
