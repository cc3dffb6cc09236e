"""Issue 45's entries are latent on the shapes the old matrix sent and show on the new axes.

Every decoder here is the reference with one mutation, and seeded draws are keyed by (seed, position, purpose): on a
shape where the mutation is latent its completions equal the reference's seed for seed, and on the new axis they
differ. Deterministic, no statistics.
"""

from dataclasses import replace

import pytest

from specverify.certification.matrix.scenarios import matrix
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference import make_decoder
from specverify.zoo import SHOWCASES, ZOO

P = SamplingParams


def outputs(name, requests, showcase="plain"):
    target, draft = SHOWCASES[showcase].models()
    return [(c.tokens, c.finish_reason) for c in ZOO[name].factory(target, draft, entropy=0)(requests)]


def differs(name, requests, showcase="plain") -> int:
    """How many of ``requests`` the entry answers otherwise than the reference (same models, same seeds)."""
    mine, ref = outputs(name, requests, showcase), outputs("reference", requests, showcase)
    return sum(a != b for a, b in zip(mine, ref))


def shaped(prompt, params, gammas, n=60):
    return [Request(prompt, params, gammas[i % len(gammas)], seed=i) for i in range(n)]


SAMPLED, GREEDY = P(max_tokens=8), P(temperature=0.0, max_tokens=12)


@pytest.mark.parametrize("params", [SAMPLED, GREEDY], ids=["sampled", "greedy"])
def test_rows_capped_at_four_are_latent_up_to_gamma_4_and_show_past_it(params):
    assert differs("verify_rows_capped_at_four", shaped((0, 1), params, (1, 2, 3, 4)), "gamma_sweep") == 0
    assert differs("verify_rows_capped_at_four", shaped((0, 1), params, (5, 6, 7, 8)), "gamma_sweep") > 0


def test_rows_reading_the_first_candidate_are_latent_at_gamma_2():
    assert differs("later_rows_read_first_candidate", shaped((0, 1), GREEDY, (1, 2))) == 0
    assert differs("later_rows_read_first_candidate", shaped((0, 1), GREEDY, (3, 4))) > 0


def test_early_decode_is_latent_on_prompts_of_a_chunk_and_shows_on_longer_ones():
    short = [Request((0, 1, 2, 3, 0, 1, 2, 3, 0)[: 1 + i % 9], GREEDY, 1 + i % 4, seed=i) for i in range(60)]
    long = [Request(((0, 1, 2, 3) * 8)[: 10 + i % 21], GREEDY, 1 + i % 4, seed=i) for i in range(60)]
    assert differs("decode_before_chunked_prefill", short) == 0
    assert differs("decode_before_chunked_prefill", long) > 0


def test_ties_broken_by_the_highest_index_are_latent_without_exact_ties():
    requests = shaped((0, 1), P(temperature=0.0, max_tokens=6), (1, 2, 3, 4))
    requests += [replace(r, prompt=(i % 4, (i // 4) % 4)) for i, r in enumerate(requests)]
    assert differs("greedy_ties_last_index", requests, "plain") == 0
    assert differs("greedy_ties_last_index", requests, "ties") > 0


@pytest.mark.parametrize(
    "name",
    # a greedy request makes its call greedy; a sampled request sends the greedy ones through the sampled path
    ["any_greedy_request_greedy_call", "sampled_call_samples_greedy_rows"],
)
def test_a_call_mixing_greedy_and_sampled_requests_is_wrong_only_when_mixed(name):
    sampled = shaped((0, 1), P(max_tokens=4), (3,))
    greedy = shaped((0, 1), P(temperature=0.0, max_tokens=4), (1, 2))
    assert differs(name, sampled) == 0
    assert differs(name, greedy) == 0
    mixed = [r for pair in zip(greedy, sampled) for r in pair]
    assert differs(name, mixed) > 0


def test_the_first_seed_s_generator_is_reproducible_behind_unseeded_neighbours_only():
    """The old reproducibility check's call shape (unseeded neighbours) cannot see it; a seeded neighbour ahead can."""
    target, draft = SHOWCASES["plain"].models()
    decoder = ZOO["first_seeded_seed_for_call"].factory(target, draft, entropy=0)
    req = Request((0, 1), P(max_tokens=4), 3, seed=1234)
    hot = replace(req, params=P(temperature=0.7, max_tokens=4), seed=None)
    alone = [decoder([replace(req, seed=s)])[0].tokens for s in range(1234, 1254)]
    behind_unseeded = [decoder([hot, replace(req, seed=s), hot])[1].tokens for s in range(1234, 1254)]
    behind_seeded = [decoder([replace(hot, seed=7), replace(req, seed=s)])[1].tokens for s in range(1234, 1254)]
    assert alone == behind_unseeded
    assert sum(a != b for a, b in zip(alone, behind_seeded)) > 0


def test_the_fallback_control_falls_back_and_resumes():
    """``confidence_fallback`` has rounds that verify no draft (fallback) followed by rounds that do (resumed), and
    its stale-seed twin answers differently only after such a round."""
    target, draft = SHOWCASES["plain"].models()
    decoder = ZOO["confidence_fallback"].factory(target, draft, entropy=0)
    result = decoder.run_group((0, 1), P(temperature=0.0, max_tokens=8), 3, [0] * 1)
    verified = result.verified[0]
    fallback = [i for i in range(len(verified) - 1) if verified[i] == 0 and verified[i + 1] > 0]
    assert fallback, f"no fallback round followed by a speculative one: verified drafts per round {verified}"
    prompts = [(i % 4, (i // 4) % 4, (i // 16) % 4) for i in range(60)]
    requests = [Request(p, P(temperature=0.0, max_tokens=8), 3, seed=i) for i, p in enumerate(prompts)]
    assert differs("stale_seed_after_fallback", requests) > 0
    assert differs("confidence_fallback", requests) == 0  # greedy: the fallback control keeps the output


def test_the_gamma_sweep_scenarios_reach_their_gammas():
    toy = matrix("toy")
    assert toy["greedy-gamma-sweep"].gammas == (5, 6, 7, 8) and toy["gamma-8"].num_draft_tokens == 8
    assert toy["greedy-long-prompts"].prompt_lengths == (10, 30) and toy["greedy-ties"].pair.target_ties > 0


def test_the_ring_of_window_slots_is_latent_without_a_window_and_shows_past_the_wrap():
    """Untouched on a target without a window; on a windowed one, exact while the output stays inside the window
    and wrong once rejected drafts were written past the wrap."""
    toy = matrix("toy")
    requests = shaped((0, 1), P(temperature=0.0, max_tokens=8), (1, 2, 3, 4))
    assert differs("window_ring_not_restored", requests) == 0
    pair = toy["greedy-sliding-window"].models()

    def answers(name, reqs):
        return [(c.tokens, c.finish_reason) for c in ZOO[name].factory(pair.target, pair.draft, entropy=0)(reqs)]

    inside = [replace(r, prompt=(0,), params=P(temperature=0.0, max_tokens=1)) for r in requests]
    assert answers("window_ring_not_restored", inside) == answers("reference", inside)
    wrong = [a != b for a, b in zip(answers("window_ring_not_restored", requests), answers("reference", requests))]
    assert any(wrong)


def test_tree_nodes_at_their_span_index_are_latent_without_positions_and_show_with_them():
    """The same greedy trees: identical to the tree reference on the family's plain target, not on the
    position-aware one."""
    tree = matrix("toy", "tree")
    for name, shows in (("greedy", False), ("greedy-tree-positional", True)):
        scenario = tree[name]
        pair = scenario.models()
        requests = [Request((i % 4, (i // 4) % 4), scenario.params, 3, seed=i) for i in range(40)]
        got = ZOO["tree_nodes_at_span_index"].factory(pair.target, pair.draft, entropy=0)(requests)
        want = make_decoder(pair.target, pair.draft)(requests)
        differ = sum(a.tokens != b.tokens for a, b in zip(got, want))
        assert (differ > 0) == shows, f"{name}: {differ} of 40 differ"


def test_the_unrestored_recurrent_state_is_latent_on_a_kv_target_and_shows_on_a_recurrent_one():
    """The same seeded requests: the reference's answers on the showcase's KV target; on the recurrent showcase (the
    same law behind a recurrent state) other answers than the recurrent reference's once a rejected draft entered
    the state."""
    target, draft = SHOWCASES["recurrent"].models()
    entry = ZOO["recurrent_state_not_rolled_back"].factory(target, draft, entropy=0)
    for params, gammas in ((P(temperature=0.0, max_tokens=8), (2, 3, 4)), (P(max_tokens=6), (3,))):
        requests = shaped((0, 1), params, gammas)
        assert differs("recurrent_state_not_rolled_back", requests) == 0
        got, want = entry(requests), make_decoder(target, draft)(requests)
        assert sum(a.tokens != b.tokens for a, b in zip(got, want)) > 0
