"""Text-level grammars: a small regex subset compiled by our own automaton and lifted to a token-level ``Grammar``.

The oracle computes laws under a grammar through the :class:`~specverify.grammar.Grammar` protocol; an engine is given
the same grammar as text (``RegexGrammar.pattern``) and compiles it with its own backend (vLLM: xgrammar), so the law
the certifier expects never depends on the engine's grammar code.

**Regex subset.** Literals; escapes ``\\`` + a punctuation character (that character), ``\\n``, ``\\t``, ``\\r``;
character classes ``[...]`` with ranges and escapes (no negation); alternation ``|``; groups ``(...)``; the
quantifiers ``*``, ``+``, ``?``. Anything else (``.``, ``^``, ``$``, ``{m,n}``, ``(?...)``, negated classes,
``\\d`` ...) raises ``InvalidArgument``. The whole text must match (``re.fullmatch`` semantics).

**Lifting to tokens.** The pattern becomes a DFA (Thompson NFA, subset construction, states that cannot reach
acceptance pruned). A non-EOS token is allowed in a state iff consuming its string from that state keeps the DFA live
(it can still reach acceptance); the next state is where its string leads. EOS is allowed iff the state accepts. A
non-EOS token with an empty string, and any id in ``special_token_ids``, is never allowed (it consumes no text, so a
grammar over text says nothing of it; engines mask such tokens too). The token-level automaton over the states
reachable from the initial one is a :class:`~specverify.grammar.ToyGrammar` (``RegexGrammar.toy``), so every decoder
and the oracle use it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from specverify.errors import InvalidArgument, check
from specverify.grammar import ToyGrammar

__all__ = ["RegexGrammar", "compile_regex", "CharDFA"]

_SPECIAL = set("()|*+?[]")
_REFUSED = set(".^${}")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


class _Parser:
    """Recursive descent over the subset; builds a Thompson NFA (``edges``: state -> [(charset | None, next)])."""

    def __init__(self, pattern: str):
        self.pattern, self.pos = pattern, 0
        self.edges: list = []

    def fail(self, what: str):
        raise InvalidArgument(
            f"pattern={self.pattern!r}: {what} at offset {self.pos}. The regex subset is literals, escapes, [classes], "
            "|, (groups), *, +, ? (specverify.grammar_regex); rewrite the pattern with those."
        )

    def state(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def edge(self, src: int, chars, dst: int) -> None:
        self.edges[src].append((chars, dst))

    def peek(self):
        return self.pattern[self.pos] if self.pos < len(self.pattern) else None

    def take(self) -> str:
        self.pos += 1
        return self.pattern[self.pos - 1]

    def alternation(self) -> tuple:  # -> (start, end)
        start, end = self.state(), self.state()
        while True:
            s, e = self.concatenation()
            self.edge(start, None, s)
            self.edge(e, None, end)
            if self.peek() != "|":
                return start, end
            self.take()

    def concatenation(self) -> tuple:
        start = cur = self.state()
        while self.peek() is not None and self.peek() not in "|)":
            s, e = self.repeat()
            self.edge(cur, None, s)
            cur = e
        return start, cur

    def repeat(self) -> tuple:
        s, e = self.atom()
        while self.peek() in ("*", "+", "?"):
            op = self.take()
            start, end = self.state(), self.state()
            self.edge(start, None, s)
            self.edge(e, None, end)
            if op in "*?":
                self.edge(start, None, end)
            if op in "*+":
                self.edge(e, None, s)
            s, e = start, end
        return s, e

    def atom(self) -> tuple:
        c = self.peek()
        if c == "(":
            self.take()
            if self.peek() == "?":
                self.fail("'(?' groups are not in the subset")
            s, e = self.alternation()
            if self.peek() != ")":
                self.fail("an unclosed group")
            self.take()
            return s, e
        if c == "[":
            chars = self.char_class()
        elif c in _REFUSED or c in ("*", "+", "?", ")", "]"):
            self.fail(f"{c!r} is not in the subset here")
        elif c == "\\":
            chars = frozenset(self.escape())
        else:
            chars = frozenset(self.take())
        s, e = self.state(), self.state()
        self.edge(s, chars, e)
        return s, e

    def escape(self) -> str:
        self.take()
        if self.peek() is None:
            self.fail("a trailing backslash")
        c = self.take()
        if c in _ESCAPES:
            return _ESCAPES[c]
        if c.isalnum() or c == "_":
            self.pos -= 1
            self.fail(f"the escape \\{c} is not in the subset")
        return c

    def char_class(self) -> frozenset:
        self.take()
        if self.peek() == "^":
            self.fail("negated classes are not in the subset")
        chars: set = set()
        while self.peek() != "]":
            if self.peek() is None:
                self.fail("an unclosed character class")
            low = self.escape() if self.peek() == "\\" else self.take()
            if self.peek() == "-" and self.pos + 1 < len(self.pattern) and self.pattern[self.pos + 1] != "]":
                self.take()
                high = self.escape() if self.peek() == "\\" else self.take()
                if ord(high) < ord(low):
                    self.fail(f"the range {low!r}-{high!r} is reversed")
                chars.update(chr(o) for o in range(ord(low), ord(high) + 1))
            else:
                chars.add(low)
        self.take()
        if not chars:
            self.fail("an empty character class")
        return frozenset(chars)


def _closure(edges: list, states) -> frozenset:
    todo, seen = list(states), set(states)
    while todo:
        for chars, dst in edges[todo.pop()]:
            if chars is None and dst not in seen:
                seen.add(dst)
                todo.append(dst)
    return frozenset(seen)


@dataclass(frozen=True)
class CharDFA:
    """A DFA over characters: ``transitions[s]`` maps a character to the next state; state 0 initial; only live
    states are kept (each can reach ``accepting``), so a missing character is the dead state (``step`` -> None)."""

    transitions: tuple
    accepting: frozenset

    def step(self, state, text: str) -> int | None:
        """The state after ``text`` from ``state``, or None once the text leaves every live state."""
        for c in text:
            if state is None:
                return None
            state = self.transitions[state].get(c)
        return state

    def fullmatch(self, text: str) -> bool:
        state = self.step(0, text)
        return state is not None and state in self.accepting


def compile_regex(pattern: str) -> CharDFA:
    """Compile ``pattern`` (the subset of the module docstring) to a pruned :class:`CharDFA`.

    Examples
    --------
    >>> dfa = compile_regex("(ab|b)+ ?")
    >>> [dfa.fullmatch(t) for t in ("ab", "bab ", "a", "", "ab  ")]
    [True, True, False, False, False]
    """
    check(isinstance(pattern, str), f"pattern={pattern!r} must be a str (a regex of the subset).")
    parser = _Parser(pattern)
    start, end = parser.alternation()
    if parser.peek() is not None:
        parser.fail(f"an unmatched {parser.peek()!r}")
    edges = parser.edges
    alphabet = sorted({c for row in edges for chars, _ in row if chars is not None for c in chars})
    first = _closure(edges, [start])
    index, rows, todo = {first: 0}, [{}], [first]
    while todo:
        current = todo.pop()
        row = rows[index[current]]
        for c in alphabet:
            moved = [dst for s in current for chars, dst in edges[s] if chars is not None and c in chars]
            if not moved:
                continue
            target = _closure(edges, moved)
            if target not in index:
                index[target] = len(rows)
                rows.append({})
                todo.append(target)
            row[c] = index[target]
    accepting = {i for subset, i in index.items() if end in subset}
    return _prune(rows, accepting, pattern)


def _prune(rows: list, accepting: set, pattern: str) -> CharDFA:
    live = set(accepting)
    changed = True
    while changed:
        changed = False
        for s, row in enumerate(rows):
            if s not in live and any(d in live for d in row.values()):
                live.add(s)
                changed = True
    if 0 not in live:
        raise InvalidArgument(f"pattern={pattern!r} matches no text; give a pattern that matches at least one string.")
    order = [0] + sorted(live - {0})
    renum = {s: i for i, s in enumerate(order)}
    transitions = tuple({c: renum[d] for c, d in rows[s].items() if d in live} for s in order)
    return CharDFA(transitions=transitions, accepting=frozenset(renum[s] for s in accepting))


@dataclass(frozen=True, eq=False)
class RegexGrammar:
    """A text-level grammar over a vocabulary's token strings (the module docstring: subset, lifting, rules).

    Parameters
    ----------
    pattern : str
        The regex, as given to an engine (``.pattern``).
    strings : sequence of str
        The token strings by id (``Vocab.strings``).
    eos_token_id : int
        EOS: allowed exactly in accepting states.
    special_token_ids : sequence of int
        Ids never allowed (besides EOS and empty strings, which are never allowed either).

    Examples
    --------
    >>> g = RegexGrammar("(ab|b)+", ("a", "b", "ab", " ", "ba", ""), eos_token_id=5)
    >>> sorted(g.allowed(0)), g.accepting(0)
    ([0, 1, 2, 4], False)
    >>> s = g.advance(0, 2); sorted(g.allowed(s)), g.accepting(s)
    ([0, 1, 2, 4], True)
    """

    pattern: str
    strings: tuple
    eos_token_id: int
    special_token_ids: frozenset = frozenset()
    dfa: CharDFA = field(init=False, repr=False)
    toy: ToyGrammar = field(init=False, repr=False)
    dfa_states: tuple = field(init=False, repr=False)  # token-grammar state -> its DFA state

    def __init__(self, pattern: str, strings: Sequence[str], eos_token_id: int, *, special_token_ids=()):
        check(
            isinstance(strings, (tuple, list)) and all(isinstance(s, str) for s in strings) and len(strings) > 0,
            f"strings={strings!r} must be a non-empty sequence of token strings by id (Vocab.strings).",
        )
        check(
            isinstance(eos_token_id, int) and 0 <= eos_token_id < len(strings),
            f"eos_token_id={eos_token_id!r} must be an id in [0, {len(strings)}).",
        )
        special = frozenset(special_token_ids)
        check(
            all(isinstance(t, int) and 0 <= t < len(strings) for t in special),
            f"special_token_ids={special_token_ids!r} must be ids in [0, {len(strings)}).",
        )
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "strings", tuple(strings))
        object.__setattr__(self, "eos_token_id", eos_token_id)
        object.__setattr__(self, "special_token_ids", special)
        dfa = compile_regex(pattern)
        object.__setattr__(self, "dfa", dfa)
        toy, states = _lift(dfa, self.strings, {eos_token_id} | special)
        object.__setattr__(self, "toy", toy)
        object.__setattr__(self, "dfa_states", states)

    def __eq__(self, other):
        return isinstance(other, RegexGrammar) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self) -> tuple:
        return (self.pattern, self.strings, self.eos_token_id, self.special_token_ids)

    @property
    def initial_state(self) -> int:
        return 0

    @property
    def num_states(self) -> int:
        return self.toy.num_states

    def allowed(self, state) -> frozenset[int]:
        return self.toy.allowed(state)

    def advance(self, state, token: int) -> int:
        return self.toy.advance(state, token)

    def accepting(self, state) -> bool:
        return self.toy.accepting(state)

    def tables(self, vocab_size: int, eos_token_id: int) -> tuple:
        """``ToyGrammar.tables`` of the lifted automaton."""
        return self.toy.tables(vocab_size, eos_token_id)

    def text_accepted(self, text: str) -> bool:
        """Whether the whole ``text`` matches (our automaton; ``re.fullmatch`` semantics)."""
        check(isinstance(text, str), f"text={text!r} must be a str.")
        return self.dfa.fullmatch(text)


def _lift(dfa: CharDFA, strings: tuple, never: set) -> tuple:
    """The token-level automaton over the DFA states reachable by tokens from state 0, numbered in BFS order."""
    index, order, rows = {0: 0}, [0], []
    for dfa_state in order:  # grows while iterating: breadth first
        row = {}
        for tok, text in enumerate(strings):
            if tok in never or text == "":
                continue
            nxt = dfa.step(dfa_state, text)
            if nxt is None:
                continue
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            row[tok] = index[nxt]
        rows.append(row)
    accepting = frozenset(i for i, s in enumerate(order) if s in dfa.accepting)
    return ToyGrammar(transitions=tuple(rows), accepting=accepting), tuple(order)
