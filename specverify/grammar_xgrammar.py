"""xgrammar behind specverify's ``Grammar`` protocol (extra ``grammar``: ``pip install specverify-toolkit[grammar]``).

``XGrammar`` compiles an EBNF or JSON-schema grammar for a toy ``Vocab`` (built from the explicit token strings,
no hub download; EOS is the stop token) and answers ``allowed`` / ``accepting`` / ``advance`` from xgrammar's token
bitmask. States are the tuples of non-EOS token ids accepted so far (hashable, as the protocol needs); a cache maps
each state to a matcher positioned there, grown by ``fork`` + ``accept_token`` from its parent state.

``SpeculativeMatcher`` is the other way engines use xgrammar: one live matcher per request that accepts each draft
as it is proposed and ``rollback``-s the rejected ones. ``specverify.fuzz.grammars`` checks that its allowed sets
after any accept / reject history equal those of a fresh matcher fed the committed tokens.

xgrammar is imported on first use, never by ``import specverify``.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Sequence

from specverify.errors import InvalidArgument, check

__all__ = ["XGrammar", "SpeculativeMatcher", "import_xgrammar"]

STOP_STRING = "</s>"  # the text xgrammar sees for EOS (toy EOS has text "", which a tokenizer cannot hold)


def import_xgrammar() -> object:
    """The ``xgrammar`` module, or ``ImportError`` saying how to install it."""
    try:
        import xgrammar
    except ImportError as exc:  # pragma: no cover - depends on the environment
        hint = "pip install 'specverify-toolkit[grammar]'"
        raise ImportError(f"specverify.grammar_xgrammar needs xgrammar: {hint}") from exc
    return xgrammar


class XGrammar:
    """A compiled xgrammar grammar over a toy vocabulary, implementing ``specverify.grammar.Grammar``.

    Build with ``XGrammar.from_ebnf(vocab, ebnf)`` or ``XGrammar.from_json_schema(vocab, schema)``.

    Examples
    --------
    >>> from specverify.oracles import make_vocab
    >>> g = XGrammar.from_ebnf(make_vocab(6), 'root ::= "a" ("b" | "ab")')
    >>> sorted(g.allowed(())), g.accepting(()), sorted(g.allowed((0,))), g.accepting((0, 1)), g.allowed((0, 1))
    ([0, 2], False, [0, 1, 2], True, frozenset())
    """

    def __init__(self, vocab, compiled, *, description: str = ""):
        xgr = import_xgrammar()
        check(
            isinstance(compiled, xgr.CompiledGrammar),
            f"compiled={compiled!r} must be an xgrammar "
            "CompiledGrammar; build with XGrammar.from_ebnf or XGrammar.from_json_schema.",
        )
        self.vocab, self.compiled, self.description = vocab, compiled, description
        self._bitmask = xgr.allocate_token_bitmask(1, vocab.size)
        root = xgr.GrammarMatcher(compiled)
        self._cache = {(): (root, *self.mask(root))}

    # ------------------------------------------------------------------------------------------- building
    @staticmethod
    def compiler(vocab: object) -> object:
        """An xgrammar ``GrammarCompiler`` for ``vocab`` (raw token strings; EOS the only stop token)."""
        xgr = import_xgrammar()
        check(hasattr(vocab, "strings") and hasattr(vocab, "eos_token_id"), f"vocab={vocab!r} must be a Vocab.")
        encoded = [STOP_STRING if i == vocab.eos_token_id else s for i, s in enumerate(vocab.strings)]
        info = xgr.TokenizerInfo(encoded, vocab_type=xgr.VocabType.RAW, stop_token_ids=[vocab.eos_token_id])
        return xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    @classmethod
    def from_ebnf(cls, vocab, ebnf: str, *, root_rule_name: str = "root") -> "XGrammar":
        check(isinstance(ebnf, str) and ebnf.strip(), f"ebnf={ebnf!r} must be a non-empty EBNF string.")
        try:
            compiled = cls.compiler(vocab).compile_grammar(ebnf, root_rule_name=root_rule_name)
        except RuntimeError as exc:
            raise InvalidArgument(f"ebnf={ebnf!r} does not compile: {exc}. Check the EBNF syntax.") from exc
        return cls(vocab, compiled, description=f"ebnf {ebnf!r}")

    @classmethod
    def from_json_schema(cls, vocab, schema, *, any_whitespace: bool = False) -> "XGrammar":
        text = schema if isinstance(schema, str) else json.dumps(schema)
        try:
            compiled = cls.compiler(vocab).compile_json_schema(text, any_whitespace=any_whitespace)
        except (RuntimeError, ValueError) as exc:
            raise InvalidArgument(f"schema={text!r} does not compile: {exc}. Pass a JSON schema.") from exc
        return cls(vocab, compiled, description=f"json schema {text}")

    def __repr__(self) -> str:
        return f"XGrammar({self.description})"

    # ------------------------------------------------------------------------------------------- the protocol
    @property
    def initial_state(self) -> tuple:
        return ()

    def allowed(self, state) -> frozenset[int]:
        return self._entry(state)[1]

    def accepting(self, state) -> bool:
        return self._entry(state)[2]

    def advance(self, state, token: int) -> tuple:
        if token not in self.allowed(state):
            raise InvalidArgument(
                f"token={token!r} is not allowed in grammar state={state!r} (allowed: "
                f"{sorted(self.allowed(state))}). Mask with allowed() before sampling."
            )
        return tuple(state) + (int(token),)

    # ------------------------------------------------------------------------------------------- matchers
    def fresh_matcher(self, tokens: Sequence[int] = ()) -> object:
        """A new matcher fed ``tokens`` from scratch (no cache, no fork): the oracle for rollback checks."""
        matcher = import_xgrammar().GrammarMatcher(self.compiled)
        for token in tokens:
            check(matcher.accept_token(int(token)), f"token {token!r} of {tuple(tokens)!r} is refused by the grammar.")
        return matcher

    def mask(self, matcher) -> tuple[frozenset, bool]:
        """(allowed non-EOS ids, EOS allowed) from ``matcher``'s next-token bitmask; a terminated matcher (it
        accepted EOS) allows nothing."""
        if matcher.is_terminated():  # filling a terminated matcher raises in xgrammar
            return frozenset(), False
        matcher.fill_next_token_bitmask(self._bitmask)
        words = self._bitmask[0].tolist()
        ids = [t for t in range(self.vocab.size) if (words[t >> 5] >> (t & 31)) & 1]
        eos = self.vocab.eos_token_id
        return frozenset(t for t in ids if t != eos), eos in ids

    def _entry(self, state):
        entry = self._cache.get(state)
        if entry is None:
            check(
                isinstance(state, tuple) and len(state) > 0,
                f"state={state!r} is not a state of {self!r} (states are tuples of accepted token ids).",
            )
            parent = self._entry(state[:-1])
            if state[-1] not in parent[1]:
                raise InvalidArgument(
                    f"state={state!r} is unreachable: token {state[-1]!r} is not allowed after {state[:-1]!r}."
                )
            matcher = parent[0].fork()
            matcher.accept_token(int(state[-1]))
            entry = self._cache[state] = (matcher, *self.mask(matcher))
        return entry

    def to_toy(self, max_depth: int) -> object:
        """An equivalent ``ToyGrammar`` over the states reachable in at most ``max_depth`` tokens (enough for
        requests with ``max_tokens <= max_depth``); gives the vectorized decoder its tables."""
        from specverify.grammar import ToyGrammar

        check(isinstance(max_depth, int) and max_depth >= 0, f"max_depth={max_depth!r} must be an int >= 0.")
        ids, order, queue = {(): 0}, [()], deque([()])
        while queue:
            state = queue.popleft()
            if len(state) == max_depth:
                continue
            for token in sorted(self.allowed(state)):
                child = state + (token,)
                if child not in ids:
                    ids[child] = len(order)
                    order.append(child)
                    queue.append(child)
        transitions = [{t: ids[s + (t,)] for t in sorted(self.allowed(s))} if len(s) < max_depth else {} for s in order]
        return ToyGrammar(transitions=tuple(transitions), accepting={ids[s] for s in order if self.accepting(s)})


class SpeculativeMatcher:
    """One live xgrammar matcher per request, driven as engines drive it under speculation.

    ``propose(drafts)`` accepts drafts in order (stopping at the first one refused); ``resolve(accepted, extra)``
    rolls back the drafts past ``accepted`` with ``rollback`` and accepts the recovered / bonus ``extra`` tokens.
    """

    def __init__(self, grammar: XGrammar):
        check(isinstance(grammar, XGrammar), f"grammar={grammar!r} must be an XGrammar.")
        self.grammar = grammar
        self.matcher = grammar.fresh_matcher()
        self.committed: tuple[int, ...] = ()
        self.pending: tuple[int, ...] = ()

    def mask(self) -> tuple[frozenset, bool]:
        return self.grammar.mask(self.matcher)

    def propose(self, drafts: Sequence[int]) -> int:
        """Accept ``drafts`` provisionally; return how many the matcher took."""
        for token in drafts:
            if not self.matcher.accept_token(int(token)):
                break
            self.pending += (int(token),)
        return len(self.pending)

    def resolve(self, accepted: int, extra: Sequence[int] = ()) -> None:
        check(
            isinstance(accepted, int) and 0 <= accepted <= len(self.pending),
            f"accepted={accepted!r} must lie in [0, {len(self.pending)}] (drafts the matcher took).",
        )
        rejected = len(self.pending) - accepted
        if rejected:
            self.matcher.rollback(rejected)
        self.committed += self.pending[:accepted]
        self.pending = ()
        for token in extra:
            check(self.matcher.accept_token(int(token)), f"extra token {token!r} refused after {self.committed!r}.")
            self.committed += (int(token),)
