"""Grammar matchers under speculative schedules: after any accept / reject history, a live matcher's allowed set
must equal that of a fresh matcher fed the committed tokens (imports xgrammar lazily, through the adapter).

Histories are drawn from a seed: each round drafts up to ``max_num_draft_tokens`` grammar-valid tokens (EOS where
the state accepts), accepts a prefix, then commits a recovered token (after a rejection) or a bonus token (after
full acceptance), as a speculative decoder with a grammar mask would.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np
from hypothesis import strategies as st

from specverify.errors import InvalidArgument, check
from specverify.fuzz.properties import PropertyFailure

if TYPE_CHECKING:
    from specverify.oracles import Vocab

__all__ = ["check_matcher_rollback", "example_grammars", "matcher_cases", "JSON_STRINGS", "json_vocab"]

#: Token strings of a small JSON vocabulary (EOS appended as the last id): several tokenizations of each value.
JSON_STRINGS = ("{", "}", '"a"', ":", "true", "false", '"', "a", ",", '{"a":', "tr", "ue", "1", "0")

EBNF = {
    "alternation": 'root ::= ("a" | "b")+ (" " "c")?',
    "accepts_at_once": 'root ::= "" | ("ab" | "ba") root',
    "dead_end": 'root ::= "a" "x" | "b" (" " "a")?',  # "x" is in no token: after "a" nothing is allowed
}
JSON_SCHEMA = {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}


def json_vocab() -> Vocab:
    from specverify.oracles import Vocab

    return Vocab(strings=JSON_STRINGS + ("",), eos_token_id=len(JSON_STRINGS))


@lru_cache(maxsize=1)
def example_grammars() -> dict:
    """Name -> ``XGrammar``: EBNF grammars over ``make_vocab(6)`` (alternation, accepting at once, a dead end) and
    a JSON schema over ``json_vocab()``. Built once."""
    from specverify.grammar_xgrammar import XGrammar
    from specverify.oracles import make_vocab

    vocab = make_vocab(6)
    out = {name: XGrammar.from_ebnf(vocab, ebnf) for name, ebnf in EBNF.items()}
    out["json_schema"] = XGrammar.from_json_schema(json_vocab(), JSON_SCHEMA)
    return out


def matcher_cases(names: Optional[Sequence[str]] = None) -> st.SearchStrategy:
    """``(grammar name, seed)`` pairs for ``check_matcher_rollback``."""
    names = tuple(names or sorted(EBNF) + ["json_schema"])
    return st.tuples(st.sampled_from(names), st.integers(0, 2**32 - 1))


def _options(grammar, state) -> list:
    """Tokens a masked sampler could pick after non-EOS ``state``: the allowed ids, EOS where it accepts."""
    ids = sorted(grammar.allowed(state))
    return ids + [grammar.vocab.eos_token_id] if grammar.accepting(state) else ids


def _draft(grammar, rng, committed: tuple, num_draft_tokens: int) -> list:
    drafts, state = [], committed
    for _ in range(num_draft_tokens):
        options = _options(grammar, state)
        if not options:
            break
        token = int(rng.choice(options))
        drafts.append(token)
        if token == grammar.vocab.eos_token_id:
            break
        state += (token,)
    return drafts


def _extra(grammar, rng, committed: tuple, drafts: list, accepted: int) -> list:
    """The recovered token after a rejection (never the rejected draft), or the bonus after full acceptance."""
    eos = grammar.vocab.eos_token_id
    if accepted == len(drafts) and drafts and drafts[-1] == eos:
        return []
    options = _options(grammar, committed + tuple(drafts[:accepted]))
    if accepted < len(drafts):
        options = [t for t in options if t != drafts[accepted]]
    return [int(rng.choice(options))] if options else []


def _compare(grammar, session, committed: tuple, where: str) -> None:
    expected = grammar.mask(grammar.fresh_matcher(committed))
    got = session.mask()
    if got != expected:
        raise PropertyFailure(
            "grammar",
            f"{where}: after committing {committed!r} the live matcher allows "
            f"{sorted(got[0])} (EOS {got[1]}) but a fresh matcher allows {sorted(expected[0])} "
            f"(EOS {expected[1]})",
        )


def check_matcher_rollback(
    grammar, seed: int, *, rounds: int = 6, max_num_draft_tokens: int = 4, session_class: Optional[type] = None
) -> list:
    """Drive ``session_class(grammar)`` (default ``SpeculativeMatcher``) through ``rounds`` speculative rounds drawn
    from ``seed``; raise ``PropertyFailure("grammar")`` when its mask differs from a fresh matcher's. Returns the
    history: one ``(drafts, accepted, extra)`` per round."""
    from specverify.grammar_xgrammar import SpeculativeMatcher, XGrammar

    check(isinstance(grammar, XGrammar), f"grammar={grammar!r} must be an XGrammar (specverify.grammar_xgrammar).")
    check(isinstance(seed, int) and seed >= 0, f"seed={seed!r} must be an int >= 0.")
    session = (session_class or SpeculativeMatcher)(grammar)
    rng, eos, history = np.random.default_rng(seed), grammar.vocab.eos_token_id, []
    for i in range(rounds):
        committed = session.committed
        if committed and committed[-1] == eos:
            break
        drafts = _draft(grammar, rng, committed, int(rng.integers(1, max_num_draft_tokens + 1)))
        accepted = int(rng.integers(0, len(drafts) + 1))
        extra = _extra(grammar, rng, committed, drafts, accepted)
        history.append((tuple(drafts), accepted, tuple(extra)))
        try:
            if session.propose(drafts) != len(drafts):
                raise PropertyFailure(
                    "grammar",
                    f"round {i}: the matcher refused a draft of {drafts!r} that a fresh "
                    f"matcher allows after {committed!r}",
                )
            session.resolve(accepted, extra)
        except (InvalidArgument, RuntimeError) as exc:
            raise PropertyFailure(
                "grammar",
                f"round {i} ({drafts!r}, accepted {accepted}, extra {extra!r}): the "
                f"live matcher raised {type(exc).__name__}: {exc}",
            ) from exc
        _compare(grammar, session, session.committed, f"round {i}")
        if (not extra and accepted < len(drafts)) or not drafts:
            break  # no token left to commit: the request would end (no_token)
    return history
