"""Each zoo entry changes exactly what docs/design.md's rules look at for its tag (no certifier involved).

- exact: its law is not rejected (pooled χ², α = 1e-8) on its showcases and the core ones; no protocol violation.
- greedy-only: greedy output equals ``greedy_outcome`` on 100 prompts with disagreeing drafts, no protocol
  violation, and the sampling law is rejected (χ² p < 1e-8, or an outcome of exact probability 0).
- approximate: some greedy output differs; no protocol violation.
- invalid: a protocol violation appears.
An entry of another draft family than AR runs on its family's models and scenarios (``matrix("toy", family)``: the
scenarios' data only): greedy on the family's greedy scenario, the law on the scenario that decides its tag
(``test_zoo_certify.DECIDED_BY``). Every request is seeded and every decoder gets ``entropy=0``: the tests are
deterministic.
"""

from dataclasses import replace

import numpy as np
import pytest
import scipy.stats
import torch

from specverify.certification.matrix.scenarios import matrix
from specverify.oracles import draft_near, exact_law
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.sampling import next_token_probs
from specverify.zoo import SHOWCASES, ZOO

from ._checks import first_violation, greedy_mismatches, law_check, law_check_behind, law_check_calls, prompts
from .test_zoo_certify import DECIDED_BY

ALPHA = 1e-8
N = 20_000
PROMPTS = prompts(100, seed=0)
# entries whose bug lives on the batch path: their law is checked through calls of this size (sample() is exact)
THROUGH_CALLS = {"rng_keyed_by_batch_position": (1, 300), "corrupts_beyond_two_sequences": (512, N)}
# entries whose bug needs requests of other parameters in the same call, with the leading request's parameters: the
# law (greedy-only entries) or the greedy output (approximate ones) of a request behind one
BEHIND = {
    "first_request_params_for_batch": SamplingParams(temperature=0.5, max_tokens=4),
    "any_greedy_request_greedy_call": SamplingParams(temperature=0.0, max_tokens=4),  # a greedy request leads
    "sampled_call_samples_greedy_rows": SamplingParams(temperature=1.0, max_tokens=4),  # a sampled request leads
}
# entries whose greedy defect needs a shape the default greedy requests lack (γ 1 to 4, prompts of 1 to 5 tokens):
# the matrix's scenario that shows it (its γ, prompt lengths, output length and draft distance)
GREEDY_SHAPE = {
    "verify_rows_capped_at_four": "greedy-gamma-sweep",
    "decode_before_chunked_prefill": "greedy-long-prompts",
    "window_ring_not_restored": "greedy-sliding-window",
    "recurrent_state_not_rolled_back": "greedy-recurrent",
}


def named(verdict):
    """Entries of ``verdict`` that run on the AR showcases (draft-family entries: test_zoo_certify.py certifies each
    on its family in the fast suite)."""
    return [name for name, e in ZOO.items() if e.verdict == verdict and e.drafts == "ar"]


def off_ar(verdict):
    """Entries of ``verdict`` on another draft family than AR."""
    return [name for name, e in ZOO.items() if e.verdict == verdict and e.drafts != "ar"]


#: each direct test here and the entries it checks: test_zoo_certify.py counts these as the fast check of an entry
#: whose certification runs only under ``-m slow``
DIRECT = {
    "test_exact_entry_law_is_not_rejected": named("exact"),
    "test_greedy_only_entry_keeps_greedy_output_but_breaks_the_law": named("greedy-only"),
    "test_approximate_entry_changes_some_greedy_output": named("approximate"),
    "test_invalid_entry_breaks_the_protocol": named("invalid"),
    "test_draft_family_entry_keeps_greedy_output_but_breaks_the_law": off_ar("greedy-only"),
    "test_draft_family_entry_changes_some_greedy_output": off_ar("approximate"),
}


def showcase_of(name):
    showcase = SHOWCASES[ZOO[name].showcases[0]]
    return showcase, *showcase.models()


def greedy_setup(name, *, max_tokens=4):
    """(target, draft disagreeing with its argmax, greedy requests over PROMPTS) for the entry's showcase (or the
    greedy scenario of ``GREEDY_SHAPE``)."""
    if name in GREEDY_SHAPE:
        return shaped_greedy_setup(matrix("toy")[GREEDY_SHAPE[name]])
    showcase, target, _ = showcase_of(name)
    far = draft_near(target, distance=1.0, seed=21)
    params = replace(showcase.params, temperature=0.0, max_tokens=max_tokens)
    return target, far, [Request(p, params, 1 + i % 4, seed=i) for i, p in enumerate(PROMPTS)]


def shaped_greedy_setup(scenario):
    """(target, draft, requests) of a greedy scenario of the matrix: 100 prompts of its lengths at its γ in turn."""
    pair = scenario.models()
    low, high = scenario.prompt_lengths
    rng = np.random.default_rng(0)
    tokens = range(pair.target.vocab.size - 1)
    shaped = [tuple(int(t) for t in rng.choice(tokens, size=int(rng.integers(low, high + 1)))) for _ in PROMPTS]
    gammas = scenario.gammas or (1, 2, 3, 4)
    requests = [Request(p, scenario.params, gammas[i % len(gammas)], seed=i) for i, p in enumerate(shaped)]
    return pair.target, pair.draft, requests


def test_greedy_drafts_disagree_with_the_target_argmax_often():
    target, far, _ = greedy_setup("reference")
    disagree = np.mean([int(torch.argmax(target.logits([p])[0]) != torch.argmax(far.logits([p])[0])) for p in PROMPTS])
    assert disagree >= 0.3


@pytest.mark.parametrize("name", DIRECT["test_exact_entry_law_is_not_rejected"])
def test_exact_entry_law_is_not_rejected(name):
    for showcase_name in dict.fromkeys(ZOO[name].showcases + ("eos_in_block", "stop")):
        showcase = SHOWCASES[showcase_name]
        target, draft = showcase.models()
        decoder = ZOO[name].factory(target, draft, entropy=0)
        assert first_violation(decoder, target.vocab, [showcase.request(seed=s) for s in range(300)]) is None
        pvalue, df, impossible = law_check(decoder, target, showcase.request(seed=1234), N)
        assert impossible == 0 and pvalue > ALPHA, f"{name} on {showcase_name}: p={pvalue:.3g}, {impossible} p=0"


@pytest.mark.parametrize("name", DIRECT["test_greedy_only_entry_keeps_greedy_output_but_breaks_the_law"])
def test_greedy_only_entry_keeps_greedy_output_but_breaks_the_law(name):
    target, far, requests = greedy_setup(name)
    decoder = ZOO[name].factory(target, far, entropy=0)
    assert not greedy_mismatches(decoder, target, requests)
    showcase, target, draft = showcase_of(name)
    decoder = ZOO[name].factory(target, draft, entropy=0)
    assert first_violation(decoder, target.vocab, [showcase.request(seed=s) for s in range(300)]) is None
    if name == "unseeded_shared_stream":
        return  # its per-request law is exact: the collision test below is the sampling check that fails
    if name in BEHIND:
        n = 2_000 if name == "any_greedy_request_greedy_call" else N  # TV 0.92 behind a greedy request: few draws
        pvalue, df, impossible = law_check_behind(decoder, target, showcase.request(seed=1234), n, BEHIND[name])
    elif name in THROUGH_CALLS:
        per_call, n = THROUGH_CALLS[name]
        pvalue, df, impossible = law_check_calls(decoder, target, showcase.request(seed=1234), n, per_call)
    else:
        pvalue, df, impossible = law_check(decoder, target, showcase.request(seed=1234), N)
    assert impossible > 0 or pvalue < ALPHA, f"{name}: p={pvalue:.3g} (df={df}), no outcome of probability 0"


def test_padding_drafts_first_token_is_the_mixture_over_placeholder_rows():
    """``padding_drafts_accepted`` on a one-token prompt: the first token comes from row j (the prompt and j
    placeholders V - 1) with probability a_0 ... a_{j-1} (1 - a_j), a_i = p_i(V - 1), from row γ when all γ are kept;
    the reference's from row 0. Each law is checked on the first token alone (χ², N draws) and told from the other."""
    showcase = SHOWCASES["one_token_prompt"]
    target, draft = showcase.models()
    placeholder, gamma = target.vocab.size - 1, showcase.num_draft_tokens
    histories = [showcase.prompt + (placeholder,) * j for j in range(gamma + 1)]
    rows = [next_token_probs(target.logits([h])[0], showcase.params, prompt=h, generated=()) for h in histories]
    mixture, reach = torch.zeros_like(rows[0]), 1.0
    for row in rows[:gamma]:
        mixture, reach = mixture + reach * (1 - row[placeholder]) * row, reach * row[placeholder]
    laws = {"padding_drafts_accepted": mixture + reach * rows[gamma], "reference": rows[0]}
    for name, law in laws.items():
        outcomes = ZOO[name].factory(target, draft, entropy=0).sample(showcase.request(seed=1234), N).outcomes
        first = np.zeros(target.vocab.size)
        for (tokens, _), count in outcomes.items():
            first[tokens[0]] += count
        (other,) = [other for other in laws.values() if other is not law]
        assert scipy.stats.chisquare(first, law.numpy() * N).pvalue > ALPHA, name
        assert scipy.stats.chisquare(first, other.numpy() * N).pvalue < ALPHA, name


def collisions(decoder, request, pairs):
    out = [(c.tokens, c.finish_reason) for c in decoder([request] * (2 * pairs))]
    return sum(out[2 * i] == out[2 * i + 1] for i in range(pairs))


@pytest.mark.parametrize("name", ["reference", "unseeded_shared_stream"])
def test_collision_test_over_identical_unseeded_pairs(name):
    showcase = SHOWCASES["plain"]
    target, draft = showcase.models()
    rate = float((exact_law(target, showcase.prompt, showcase.params).probs ** 2).sum())
    hits = collisions(ZOO[name].factory(target, draft, entropy=0), showcase.request(), 400)
    pvalue = scipy.stats.binomtest(hits, 400, rate, alternative="greater").pvalue
    assert (pvalue < ALPHA) == (name == "unseeded_shared_stream"), f"{hits}/400 collisions, Σp² = {rate:.4f}"


@pytest.mark.parametrize("name", DIRECT["test_approximate_entry_changes_some_greedy_output"])
def test_approximate_entry_changes_some_greedy_output(name):
    target, far, requests = greedy_setup(name, max_tokens=6)
    decoder = ZOO[name].factory(target, far, entropy=0)
    if name in BEHIND:  # its greedy defect shows only behind a request of other parameters in the same call
        alone = [bad for start in range(0, len(requests), 10) for bad in
                 greedy_mismatches(decoder, target, requests[start : start + 10])]  # fmt: skip
        assert not alone, f"{name}: greedy calls of greedy requests alone should be exact: {alone[:2]}"
        changed = greedy_mismatches(decoder, target, requests, BEHIND[name])
        assert changed, f"{name}: no greedy output changed behind a request of {BEHIND[name]}"
        return
    found = next(
        (
            bad
            for start in range(0, len(requests), 10)
            for bad in greedy_mismatches(decoder, target, requests[start : start + 10])
        ),
        None,
    )
    assert found is not None, f"{name}: greedy output equals greedy_outcome on {len(requests)} prompts"
    showcase, target, draft = showcase_of(name)
    decoder = ZOO[name].factory(target, draft, entropy=0)
    assert first_violation(decoder, target.vocab, [showcase.request(seed=s) for s in range(300)]) is None


@pytest.mark.parametrize("name", DIRECT["test_invalid_entry_breaks_the_protocol"])
def test_invalid_entry_breaks_the_protocol(name):
    showcase, target, draft = showcase_of(name)
    decoder = ZOO[name].factory(target, draft, entropy=0)
    assert first_violation(decoder, target.vocab, [showcase.request(seed=s) for s in range(300)]) is not None


def family_setup(name, scenario):
    """(scenario, target, the entry's decoder) on the entry's family's ``scenario``."""
    shown = matrix("toy", ZOO[name].drafts)[scenario]
    pair = shown.models()
    return shown, pair.target, ZOO[name].factory(pair.target, pair.draft, entropy=0)


def family_request(scenario, seed):
    return Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)


# family entries whose greedy defect needs a target the family's ``greedy`` scenario lacks
FAMILY_GREEDY = {"tree_nodes_at_span_index": "greedy-tree-positional"}


def family_greedy_mismatches(name):
    greedy, target, decoder = family_setup(name, FAMILY_GREEDY.get(name, "greedy"))
    requests = [Request(p, greedy.params, greedy.num_draft_tokens, seed=i) for i, p in enumerate(PROMPTS)]
    return greedy_mismatches(decoder, target, requests)


@pytest.mark.parametrize("name", DIRECT["test_draft_family_entry_keeps_greedy_output_but_breaks_the_law"])
def test_draft_family_entry_keeps_greedy_output_but_breaks_the_law(name):
    assert not family_greedy_mismatches(name)
    shown, target, decoder = family_setup(name, DECIDED_BY[name][-1])
    assert first_violation(decoder, target.vocab, [family_request(shown, s) for s in range(300)]) is None
    pvalue, df, impossible = law_check(decoder, target, family_request(shown, 1234), N)
    assert impossible > 0 or pvalue < ALPHA, f"{name} on {shown.name}: p={pvalue:.3g} (df={df}), no outcome p=0"


@pytest.mark.parametrize("name", DIRECT["test_draft_family_entry_changes_some_greedy_output"])
def test_draft_family_entry_changes_some_greedy_output(name):
    assert family_greedy_mismatches(name), f"{name}: greedy output equals greedy_outcome on {len(PROMPTS)} prompts"
    shown, target, decoder = family_setup(name, "temperature-1")
    assert first_violation(decoder, target.vocab, [family_request(shown, s) for s in range(300)]) is None
