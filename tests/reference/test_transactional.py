"""The transactional decoder: token-for-token agreement with the vectorized decoder, state after every round equal to
the state rebuilt from the committed tokens, the exact law, and bad input."""

from dataclasses import replace

import pytest

from specverify.errors import InvalidArgument
from specverify.grammar import ToyGrammar
from specverify.oracles import draft_copy, draft_near, exact_law, make_vocab, random_target
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference.transactional import TransactionalDecoder
from specverify.reference.vectorized import VectorizedDecoder
from tests.helpers import one_torch_thread, pooled_pvalue  # noqa: F401 (one_torch_thread: autouse)

V5, V6 = make_vocab(5), make_vocab(6)
T5 = random_target(V5, seed=3, eos_bias=-1.0)
T6 = random_target(V6, seed=5, eos_bias=-1.5)
# state 3 is a dead end (no_token); state 1 accepts EOS; states 0 and 1 allow one token only
GRAMMAR = ToyGrammar(transitions=({0: 1, 1: 2}, {2: 0}, {3: 1, 0: 3}, {}), accepting={1})
LONG_PROMPT = (0, 1, 2, 3, 1, 2, 0, 1, 3, 2, 1)  # crosses several blocks at every block size used
BLOCK_SIZES = (1, 2, 3, 16)

# name -> (target, draft, params)
CASES = {
    "off": (T5, draft_near(T5, distance=0.6, seed=7), SamplingParams(max_tokens=5)),
    "stops": (T6, draft_near(T6, distance=0.5, seed=8), SamplingParams(max_tokens=7, stop=("b a", "aa"))),
    "stops_after_min": (
        T6,
        draft_near(T6, distance=0.5, seed=8),
        SamplingParams(max_tokens=7, stop=("b a", "aa"), min_tokens=3, stop_after_min_tokens=True),
    ),
    "penalties_top_p": (
        T5,
        draft_near(T5, distance=0.6, seed=7),
        SamplingParams(
            temperature=0.8,
            top_p=0.85,
            repetition_penalty=1.4,
            frequency_penalty=0.3,
            presence_penalty=0.2,
            max_tokens=6,
        ),
    ),
    "min_tokens": (T5, draft_near(T5, distance=0.6, seed=7), SamplingParams(min_tokens=3, max_tokens=6)),
    "grammar_dead_end": (T5, draft_near(T5, distance=0.6, seed=7), SamplingParams(grammar=GRAMMAR, max_tokens=6)),
    "dead_draft_rows": (
        T5,
        draft_near(T5, distance=0.6, seed=7, zero_rate=0.7),
        SamplingParams(grammar=GRAMMAR, max_tokens=6),
    ),
    "greedy": (T5, draft_near(T5, distance=0.9, seed=9), SamplingParams(temperature=0.0, max_tokens=5)),
    "truncation_ignore_eos": (
        T6,
        draft_near(T6, distance=0.7, seed=4),
        SamplingParams(top_k=3, min_p=0.1, bad_token_ids=(1,), ignore_eos=True, max_tokens=5),
    ),
    "target_zeros": (random_target(V5, seed=6, zero_rate=0.4), None, SamplingParams(max_tokens=5)),
    "copy": (T5, draft_copy(T5), SamplingParams(max_tokens=6)),
    "logits_processor": (
        T5,
        draft_near(T5, distance=0.6, seed=7),
        SamplingParams(top_k=3, logits_processors=(parity_processor,), max_tokens=5),
    ),
}


def case(name):
    target, draft, params = CASES[name]
    return target, draft if draft is not None else draft_near(target, distance=0.8, seed=2), params


def requests(params, seeds, gammas=(1, 2, 4), prompts=((0,), LONG_PROMPT)):
    return [Request(p, params, g, seed=s) for g in gammas for p in prompts for s in seeds]


# ----------------------------------------------------------------------------------------- (a) token for token


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_outputs_equal_vectorized_token_for_token(name):
    target, draft, params = case(name)
    reqs = requests(params, range(16))
    block_size = BLOCK_SIZES[sorted(CASES).index(name) % len(BLOCK_SIZES)]
    ours = TransactionalDecoder(target, draft, block_size=block_size)
    got, expected = ours(reqs), VectorizedDecoder(target, draft)(reqs)
    mismatched = [(r, g, e) for r, g, e in zip(reqs, got, expected) if g != e]
    assert not mismatched, f"{len(mismatched)} mismatches; first: {mismatched[0]}"
    assert ours.pool.num_free == ours.pool.num_blocks  # every block came back


def test_case_matrix_reaches_every_finish_reason_and_dead_draft_rows():
    reasons, drafted_none = set(), 0
    for name in ("stops", "grammar_dead_end"):  # outputs equal ours (previous test): the fast decoder shows coverage
        target, draft, params = case(name)
        reasons |= {c.finish_reason for c in VectorizedDecoder(target, draft)(requests(params, range(16)))}

    def hook(state):
        nonlocal drafted_none
        drafted_none += state.drafted[-1] == 0

    target, draft, params = case("dead_draft_rows")
    TransactionalDecoder(target, draft, on_round=hook)(requests(params, range(5), gammas=(2,)))
    assert reasons == {"eos", "stop", "length", "no_token"} and drafted_none > 0


def test_unseeded_requests_match_vectorized_given_the_same_entropy_and_differ_from_each_other():
    target, draft, params = case("off")
    reqs = [Request((0,), params, 2, seed=None if i % 3 else i) for i in range(60)]
    got = TransactionalDecoder(target, draft, entropy=17)(reqs)
    assert got == VectorizedDecoder(target, draft, entropy=17)(reqs)
    assert len({c.tokens for c in got}) > 10


def test_sample_counts_equal_vectorized_sample():
    target, draft, params = case("penalties_top_p")
    request = Request((0, 1), replace(params, max_tokens=3), num_draft_tokens=2, seed=99)
    got = TransactionalDecoder(target, draft).sample(request, 200)
    expected = VectorizedDecoder(target, draft).sample(request, 200)
    assert dict(got.outcomes) == dict(expected.outcomes) and dict(got.accepted) == dict(expected.accepted)


def test_tight_pool_evicts_and_revives_prefix_blocks_without_changing_outputs():
    target, draft, params = case("stops")
    reqs = requests(params, range(8), gammas=(2, 4))
    need = 2 * -(-(len(LONG_PROMPT) + params.max_tokens) // 2)
    ours = TransactionalDecoder(target, draft, block_size=2, num_blocks=need)
    assert ours(reqs) == VectorizedDecoder(target, draft)(reqs)
    assert ours.pool.num_free == need and ours.pool.num_published > 0


def test_stream_emits_each_committed_token_once_in_round_chunks():
    target, draft, params = case("stops")
    for c in TransactionalDecoder(target, draft)(requests(params, range(20), gammas=(3,))):
        assert sum(c.stream, ()) == c.tokens and all(c.stream)
        assert all(a <= 3 for a in c.accepted)
        # a chunk is the accepted drafts plus one token, except where the request finished inside the block
        assert [len(s) for s in c.stream[:-1]] == [a + 1 for a in c.accepted[: len(c.stream) - 1]]


# ----------------------------------------------------------------------------------------- (b) state per round


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_after_every_round_equals_state_rebuilt_from_committed_tokens(name):
    target, draft, params = case(name)
    failures, rounds = [], 0

    def check_round(state):
        nonlocal rounds
        rounds += 1
        rebuilt = decoder.rebuild_state(state.request, state.generated, no_token=state.finish_reason == "no_token")
        live, fresh = state.view(), rebuilt.view()
        if live != fresh:
            failures.append((state.request, state.seed, live.diff(fresh)))
        assert len(state.target_cache) == len(state.draft_cache) == state.position
        assert state.target_cache.num_committed == state.position

    block_size = BLOCK_SIZES[(sorted(CASES).index(name) + 1) % len(BLOCK_SIZES)]
    decoder = TransactionalDecoder(target, draft, block_size=block_size, on_round=check_round)
    decoder(requests(params, range(6)))
    assert rounds > 36 and not failures, failures[:3]


def test_state_comparison_sees_a_stale_kv_entry_and_a_wrong_penalty_count():
    target, draft, params = case("penalties_top_p")
    decoder = TransactionalDecoder(target, draft)
    request = Request(LONG_PROMPT, params, 2, seed=1)
    state = decoder.rebuild_state(request, (0, 2))
    good = state.view()
    state.draft_cache.crop(len(state.draft_cache) - 1)
    state.draft_cache.forward([3])  # one stale entry: same length, other contents
    assert good.diff(state.view()) == ["draft_kv"]
    state.history = replace(state.history, counts=(1, 0, 1, 1, 0))
    assert good.diff(state.view()) == ["draft_kv", "counts"]


# ----------------------------------------------------------------------------------------- (c) the exact law


@pytest.mark.slow  # the fast suite: seeded outputs and sample() equal the vectorized decoder's, whose law is tested
def test_empirical_law_matches_exact_law():
    target, draft, _ = case("stops")
    params = SamplingParams(top_k=4, repetition_penalty=1.3, frequency_penalty=0.3, max_tokens=3, stop=("b a", "aa"))
    request = Request((0, 1), params, num_draft_tokens=2, seed=2024)  # 58 outcomes: eos, stop and length
    law = exact_law(target, request.prompt, params)
    assert len(law) <= 100
    n = 3000  # ~1-4 ms a draw through the protocol path: the budget of this file, not the statistics, sets n
    counts = TransactionalDecoder(target, draft).sample(request, n).outcomes
    pvalue, df, impossible = pooled_pvalue(counts, law)
    assert impossible == 0, f"{impossible} outcomes of exact probability 0"
    assert df >= 30 and pvalue > 1e-7, (pvalue, df)


# ----------------------------------------------------------------------------------------- (e) bad input


def test_bad_input_raises_invalid_argument_with_name_value_and_fix():
    target, draft, params = case("off")
    decoder = TransactionalDecoder(target, draft)
    with pytest.raises(InvalidArgument, match=r"requests\[1\]\.prompt=\(0, 5\) holds ids \[5\] outside"):
        decoder([Request((0,), params), Request((0, 5), params)])
    with pytest.raises(InvalidArgument, match=r"requests\[0\]=\(0,\) must be a specverify Request"):
        decoder([(0,)])
    with pytest.raises(InvalidArgument, match=r"num_draft_tokens=0 must be an int >= 1"):
        Request((0,), params, num_draft_tokens=0)
    with pytest.raises(InvalidArgument, match=r"draft\.vocab=.*differs from target\.vocab=.*Use a draft"):
        TransactionalDecoder(target, random_target(V6, seed=1))
    with pytest.raises(InvalidArgument, match=r"block_size=0 must be an int >= 1"):
        TransactionalDecoder(target, draft, block_size=0)
    with pytest.raises(InvalidArgument, match=r"on_round=3 must be callable"):
        TransactionalDecoder(target, draft, on_round=3)
    small = TransactionalDecoder(target, draft, block_size=2, num_blocks=5)
    with pytest.raises(InvalidArgument, match=r"num_blocks=5 is too small .* Raise num_blocks or block_size"):
        small([Request(LONG_PROMPT, params)])
    with pytest.raises(InvalidArgument, match=r"n=0 must be an int >= 1"):
        decoder.sample(Request((0,), params), 0)
    grammar = ToyGrammar(transitions=({7: 0},), accepting={0})
    with pytest.raises(InvalidArgument, match=r"grammar token 7"):
        decoder([Request((0,), replace(params, grammar=grammar))])


def test_rebuild_state_rejects_impossible_histories():
    target, draft, params = case("grammar_dead_end")
    decoder = TransactionalDecoder(target, draft)
    request = Request((0,), params, 2, seed=0)
    eos = V5.eos_token_id
    with pytest.raises(InvalidArgument, match=r"committed_tokens=\(0, 4, 1\) continue after the request finished"):
        decoder.rebuild_state(request, (0, eos, 1))
    with pytest.raises(InvalidArgument, match=r"committed_tokens=\(9,\) holds ids"):
        decoder.rebuild_state(request, (9,))
    with pytest.raises(InvalidArgument, match=r"token=2 is not allowed in grammar state=0"):
        decoder.rebuild_state(request, (2,))
    with pytest.raises(InvalidArgument, match=r"no_token=True but the target's next-token law"):
        decoder.rebuild_state(request, (0,), no_token=True)
    assert decoder.rebuild_state(request, (1, 0), no_token=True).finish_reason == "no_token"  # state 3: dead end
