"""The text-level grammar (specverify.grammar_regex): our automaton against ``re.fullmatch``, refusals, the lifting."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify.errors import InvalidArgument
from specverify.grammar import Grammar
from specverify.grammar_regex import RegexGrammar, compile_regex

STRINGS = ("a", "b", "ab", " ", "ba", "")  # the checkpoint vocabulary of size 6, EOS last
PATTERNS = ["(ab|b)+ ?", "a*b", "[ab]+( [ab]+)?", "(a|ba)*", "b?a+", "x\\.y", "(a|)b", "[a-c ]*c", "((a|b) )+"]


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=st.text(alphabet="ab c.xy", max_size=8))
def test_automaton_equals_re_fullmatch(pattern, text):
    assert compile_regex(pattern).fullmatch(text) == (re.fullmatch(pattern, text) is not None), (pattern, text)


@pytest.mark.parametrize(
    "bad", [".", "a{2}", "^a", "a$", "(?:a)", "[^a]", "\\d", "(a", "a)", "*a", "[a", "[b-a]", "a\\"]
)
def test_outside_the_subset_is_refused(bad):
    with pytest.raises(InvalidArgument, match="pattern="):
        compile_regex(bad)


def _token_texts(grammar, max_len):
    """Every token sequence of at most max_len tokens the grammar allows, with whether EOS may follow."""
    out, frontier = [], [((), grammar.initial_state)]
    for _ in range(max_len + 1):
        nxt = []
        for tokens, state in frontier:
            out.append((tokens, grammar.accepting(state), state))
            for tok in grammar.allowed(state):
                nxt.append((tokens + (tok,), grammar.advance(state, tok)))
        frontier = nxt
    return out


@pytest.mark.parametrize("pattern", ["(ab|b)+ ?", "[ab]+( [ab]+)?", "(a|ba)*", "b?a+ "])
def test_lifting_allows_exactly_the_live_prefixes(pattern):
    g = RegexGrammar(pattern, STRINGS, eos_token_id=5)
    assert isinstance(g, Grammar)
    dfa = compile_regex(pattern)
    for tokens, accepting, state in _token_texts(g, 4):
        text = "".join(STRINGS[t] for t in tokens)
        assert accepting == (re.fullmatch(pattern, text) is not None), (pattern, tokens)
        for tok in range(5):  # non-EOS ids: allowed iff the text stays a prefix of some match (a live DFA state)
            assert (tok in g.allowed(state)) == (dfa.step(0, text + STRINGS[tok]) is not None), (tokens, tok)
        assert 5 not in g.allowed(state)


def test_empty_and_special_tokens_are_never_allowed():
    g = RegexGrammar("a*", ("a", "", "aa", "b"), eos_token_id=3, special_token_ids=(2,))
    assert g.allowed(0) == frozenset({0}) and g.accepting(0)


def test_tables_and_hash_follow_the_toy_automaton():
    g = RegexGrammar("(ab|b)+", STRINGS, eos_token_id=5)
    allowed, nxt = g.tables(6, 5)
    assert allowed.shape == (g.num_states, 6)
    assert [set(allowed[s].nonzero()[0]) for s in range(g.num_states)] == [
        set(g.allowed(s)) | ({5} if g.accepting(s) else set()) for s in range(g.num_states)
    ]
    assert g == RegexGrammar("(ab|b)+", STRINGS, eos_token_id=5) and len({g, RegexGrammar("(ab|b)+", STRINGS, 5)}) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(pattern="a", strings=(), eos_token_id=0),
        dict(pattern="a", strings=("a", ""), eos_token_id=2),
        dict(pattern=3, strings=("a", ""), eos_token_id=1),
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(InvalidArgument):
        RegexGrammar(**kwargs)


def test_a_text_grammar_needs_text_grammar_and_any_grammar_implies_it():
    """A scenario whose grammar has a text form needs ``text-grammar`` (engines' structured outputs); a token-level
    ToyGrammar needs ``grammar``, which a text-grammar decoder lacks, so those scenarios read not covered there."""
    from dataclasses import replace

    from specverify.certification.matrix.checkpoint import structured_grammar
    from specverify.certification.matrix.scenarios import matrix
    from specverify.protocol import capabilities_of

    token_level = matrix()["grammar-dead-end"]
    structured = replace(token_level, params=replace(token_level.params, grammar=structured_grammar()))
    assert "text-grammar" in structured.needs() and "grammar" not in structured.needs()
    assert "grammar" in token_level.needs()

    class TextOnly:
        capabilities = ("temperature", "max_tokens", "text-grammar")

    class Full:
        capabilities = ("temperature", "max_tokens", "grammar")

    assert structured.needs() <= capabilities_of(TextOnly()) and structured.needs() <= capabilities_of(Full())
    assert not token_level.needs() <= capabilities_of(TextOnly())


def test_acceptance_counts_of_drafts_that_ignore_the_grammar_are_shown_not_judged():
    """vLLM's drafts (``model-temperature``) ignore the grammar and the engine cuts the forbidden ones: no rule models
    that, so the metrics evidence is ``ok=None`` (and the block rule's oracle is never walked past a forbidden draft,
    which raised InvalidArgument from the grammar in the first structured certificate)."""
    from types import SimpleNamespace

    from specverify.certification.matrix.checkpoint import structured_grammar
    from specverify.certification.results.metrics import metrics_evidence
    from specverify.params import SamplingParams

    law = SimpleNamespace(params=SamplingParams(max_tokens=3, grammar=structured_grammar()), prompt=(0,))
    draws = SimpleNamespace(violation=None, n=10, prefill=1)
    scenario = SimpleNamespace(num_draft_tokens=3)
    out = metrics_evidence(scenario, draws, law, alpha=1e-6, draft_law="model-temperature")
    assert out["ok"] is None and out["rows"] == [] and out["draft_law"] == "model-temperature"
    masked = SimpleNamespace(params=SamplingParams(max_tokens=3), prompt=(0,))
    assert metrics_evidence(scenario, SimpleNamespace(violation="x", n=0, prefill=0), masked, alpha=1e-6)["ok"] is False
