"""The xgrammar adapter: rollback under speculative schedules equals a fresh matcher, broken rollbacks are caught,
and the reference decoders keep the exact law under xgrammar EBNF and JSON-schema grammars."""

import pytest

xgrammar = pytest.importorskip(
    "xgrammar", reason="xgrammar is not installed: pip install 'specverify-toolkit[grammar]'"
)

from hypothesis import event, find  # noqa: E402

from specverify.fuzz import PropertyFailure, check_law  # noqa: E402
from specverify.fuzz.grammars import check_matcher_rollback, example_grammars, json_vocab, matcher_cases  # noqa: E402
from specverify.grammar_xgrammar import SpeculativeMatcher, XGrammar  # noqa: E402
from specverify.oracles import draft_near, exact_law, make_vocab, random_target  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402
from specverify.reference import VectorizedDecoder  # noqa: E402
from specverify.reference.transactional import TransactionalDecoder  # noqa: E402
from tests.fuzz._budget import fast_and_full, search  # noqa: E402


@fast_and_full(800, matcher_cases())
def test_live_matcher_after_any_accept_reject_history_equals_a_fresh_matcher(case):
    name, seed = case
    history = check_matcher_rollback(example_grammars()[name], seed)
    eos = example_grammars()[name].vocab.eos_token_id
    event(f"grammar {name}")
    if any(accepted < len(drafts) for drafts, accepted, _ in history):
        event("rollback after rejection")
    if any(eos in drafts[accepted:] for drafts, accepted, _ in history):
        event("rejected EOS rolled back")


class NoRollback(SpeculativeMatcher):
    """Rejected drafts stay accepted in the matcher (the seed: grammar state not rolled back with the branch)."""

    mechanism = "grammar-state-not-rolled-back"

    def resolve(self, accepted, extra=()):
        self.pending = self.pending[:accepted]
        super().resolve(accepted, extra)


class RollbackOneShort(SpeculativeMatcher):
    """Rolls back one token fewer than were rejected."""

    def resolve(self, accepted, extra=()):
        rejected = len(self.pending) - accepted
        if rejected > 1:
            self.matcher.rollback(rejected - 1)
        self.committed += self.pending[:accepted]
        self.pending = ()
        for token in extra:
            self.matcher.accept_token(int(token))
            self.committed += (int(token),)


@pytest.mark.parametrize("session_class", [NoRollback, RollbackOneShort])
def test_rollback_property_catches_a_broken_rollback(session_class):
    def fails(case):
        name, seed = case
        try:
            check_matcher_rollback(example_grammars()[name], seed, session_class=session_class)
        except PropertyFailure:
            return True
        return False

    find(matcher_cases(), fails, settings=search(100))


def test_adapter_answers_like_the_matcher_and_its_finite_unrolling():
    grammar = example_grammars()["alternation"]
    toy = grammar.to_toy(4)
    frontier = [((), 0)]
    for _ in range(4):  # the ToyGrammar's allowed sets and accepting flags equal the adapter's, state by state
        nxt = []
        for state, toy_state in frontier:
            assert toy.allowed(toy_state) == grammar.allowed(state)
            assert toy.accepting(toy_state) == grammar.accepting(state)
            nxt += [(state + (t,), toy.advance(toy_state, t)) for t in sorted(grammar.allowed(state))]
        frontier = nxt
    dead = example_grammars()["dead_end"]  # after "a" the grammar wants "x", which no token holds
    assert dead.allowed((0,)) == frozenset() and not dead.accepting((0,))
    assert dead.allowed(()) == {0, 1} and dead.accepting((1,)) and dead.allowed((1,)) == {3}


def test_adapter_rejects_bad_input_with_name_value_and_fix():
    from specverify.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"ebnf='root ::= \(' does not compile"):
        XGrammar.from_ebnf(make_vocab(6), "root ::= (")
    grammar = example_grammars()["alternation"]
    with pytest.raises(InvalidArgument, match=r"token=3 is not allowed in grammar state=\(\)"):
        grammar.advance((), 3)
    with pytest.raises(InvalidArgument, match=r"state=\(3,\) is unreachable"):
        grammar.allowed((3,))


# ----------------------------------------------------------------------------------------- the exact law

V6 = make_vocab(6)
T6 = random_target(V6, seed=4, eos_bias=0.5)
JV = json_vocab()
TJ = random_target(JV, seed=2)


@pytest.mark.parametrize(
    "name, target, max_tokens", [("alternation", T6, 4), ("dead_end", T6, 3), ("json_schema", TJ, 7)]
)
def test_reference_decoders_keep_the_exact_law_under_an_xgrammar_grammar(name, target, max_tokens):
    grammar = example_grammars()[name]
    draft = draft_near(target, distance=0.7, seed=9)
    params = SamplingParams(max_tokens=max_tokens, grammar=grammar)
    law = exact_law(target, (0,), params)
    transactional = TransactionalDecoder(target, draft)([Request((0,), params, 2, seed=s) for s in range(200)])
    counts = {}
    for c in transactional:
        counts[(c.tokens, c.finish_reason)] = counts.get((c.tokens, c.finish_reason), 0) + 1
    check_law(counts, law, alpha=1e-6)
    toy_params = SamplingParams(max_tokens=max_tokens, grammar=grammar.to_toy(max_tokens))
    fast = VectorizedDecoder(target, draft, entropy=2).sample(Request((0,), toy_params, 3), 4000)
    check_law(fast.outcomes, exact_law(target, (0,), toy_params), alpha=1e-6)
    assert exact_law(target, (0,), toy_params).outcomes == law.outcomes  # the unrolled grammar is the same law
