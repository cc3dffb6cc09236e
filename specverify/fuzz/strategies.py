"""Hypothesis strategies for the inputs of a speculative decoder (imports hypothesis).

Every strategy draws small, structured choices (which kind of row, which processor values, which automaton edges)
so that shrinking simplifies the structure; values come from short menus that include the corners where decoders
go wrong: exact zeros, 1e-12 masses, ties, one-hot rows, processors that mask every token, grammars with dead ends
or accepting at once, stop strings that span tokens and overlap.
"""

from __future__ import annotations

from functools import partial
from typing import Optional

import numpy as np
from hypothesis import strategies as st

from specverify.errors import check
from specverify.grammar import ToyGrammar
from specverify.params import SamplingParams

__all__ = [
    "probability_vectors",
    "law_pairs",
    "sampling_params",
    "toy_grammars",
    "stop_sets",
    "prompts",
    "num_draft_tokens_sequences",
    "requests",
    "VECTOR_KINDS",
]

VECTOR_KINDS = ("dense", "zeros", "tiny", "ties", "one_hot")
TEMPERATURES = (1.0, 0.0, 0.5, 1.5)
TOP_KS = (0, 1, 2, 3)
TOP_PS = (1.0, 0.9, 0.5, 0.01)
MIN_PS = (0.0, 0.1, 0.5, 1.0)
REPETITION_PENALTIES = (1.0, 1.3, 0.7, 2.0)
FREQUENCY_PENALTIES = (0.0, 0.5, -0.5, 1.0)
PRESENCE_PENALTIES = (0.0, 0.4, -0.4)
# built once: a strategy built inside a draw is validated again on every draw (most of the cost of a small draw)
_MENUS = {
    name: st.sampled_from(values)
    for name, values in (
        ("temperature", TEMPERATURES),
        ("top_k", TOP_KS),
        ("top_p", TOP_PS),
        ("min_p", MIN_PS),
        ("repetition_penalty", REPETITION_PENALTIES),
        ("frequency_penalty", FREQUENCY_PENALTIES),
        ("presence_penalty", PRESENCE_PENALTIES),
    )
}
_BOOLS = st.booleans()
_ONE_IN = {k: st.integers(0, k - 1) for k in (2, 3, 4, 6, 10)}


def _check_size(name: str, value, low: int = 1) -> None:
    check(
        isinstance(value, int) and not isinstance(value, bool) and value >= low,
        f"{name}={value!r} must be an int >= {low}.",
    )


def _vector(kind: str, size: int, count: int, seed: int) -> np.ndarray:  # -> float64 [size], sums to 1
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, size, size=count)
    if kind == "one_hot":
        return np.eye(size)[picks[0]]
    if kind == "ties":
        support = np.zeros(size)
        support[picks] = 1.0
        return support / support.sum()
    row = rng.random(size) + 1e-3
    if kind == "zeros":
        row[picks[1:]] = 0.0
        row[picks[0]] += 1.0  # at least one positive entry
    if kind == "tiny":
        row[picks[1:]] = 0.0
        row = row / row.sum()
        row[picks[1:]] = 1e-12
    return row / row.sum()


def probability_vectors(size=None, *, kinds=VECTOR_KINDS, max_size: int = 12) -> st.SearchStrategy:
    """Float64 probability vectors (non-negative, sum 1 within 1e-12) of the given ``kinds``: ``dense``,
    ``zeros`` (exact zeros), ``tiny`` (1e-12 masses), ``ties`` (a uniform support) and ``one_hot``.

    ``size`` fixes the length (else 1 .. ``max_size``). Hypothesis draws the kind, the size, how many entries are
    special and a seed; numpy draws the values (cheap examples; shrinking simplifies the structure).
    """
    check(size is None or (isinstance(size, int) and size >= 1), f"size={size!r} must be None or an int >= 1.")
    check(
        len(kinds) > 0 and set(kinds) <= set(VECTOR_KINDS),
        f"kinds={kinds!r} must be a non-empty subset of {VECTOR_KINDS!r}.",
    )
    _check_size("max_size", max_size)
    sizes = st.just(size) if size is not None else st.integers(1, max_size)
    return st.tuples(st.sampled_from(tuple(kinds)), sizes, st.integers(0, 2**32 - 1)).flatmap(
        lambda t: st.integers(1, max(1, t[1] - 1)).map(lambda count: _vector(t[0], t[1], count, t[2]))
    )


def law_pairs(size=None, *, distance=(0.0, 1.0), max_size: int = 12) -> st.SearchStrategy:
    """``(target_probs, draft_probs)``: two probability vectors whose total-variation distance lies in ``distance``
    (a ``(low, high)`` pair; ``(0, 0)`` gives equal laws). The draft mixes the target with another vector. Both
    vectors are of ``probability_vectors``' kinds (drawn, with the size, the distance and a seed, by hypothesis)."""
    low, high = distance
    check(0.0 <= low <= high <= 1.0, f"distance={distance!r} must be a (low, high) pair with 0 <= low <= high <= 1.")
    check(size is None or (isinstance(size, int) and size >= 1), f"size={size!r} must be None or an int >= 1.")
    _check_size("max_size", max_size)
    return _law_pairs(size, (float(low), float(high)), max_size)


def _law_pair(size: int, kinds: tuple, wanted: float, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    target = _vector(kinds[0], size, int(rng.integers(1, max(2, size))), int(rng.integers(2**32)))
    other = _vector(kinds[1], size, int(rng.integers(1, max(2, size))), int(rng.integers(2**32)))
    tv = 0.5 * float(np.abs(target - other).sum())
    if tv < wanted:  # push all the mass where the target has least: TV = 1 - min(target)
        other = np.eye(size)[int(np.argmin(target))]
        tv = 0.5 * float(np.abs(target - other).sum())
    mix = 0.0 if tv == 0 else min(1.0, wanted / tv)
    draft = (1.0 - mix) * target + mix * other
    return target, draft / draft.sum()


def _law_pairs(size, distance, max_size):
    sizes = st.just(size) if size is not None else st.integers(1, max_size)
    kinds = st.tuples(st.sampled_from(VECTOR_KINDS), st.sampled_from(VECTOR_KINDS))
    return st.builds(_law_pair, sizes, kinds, st.floats(*distance), st.integers(0, 2**32 - 1))


def toy_grammars(vocab_size: int, eos_token_id: int, *, max_states: int = 4) -> st.SearchStrategy:
    """``ToyGrammar`` automata over the non-EOS ids, including dead ends (a state with no edge that does not
    accept), states accepting at once (state 0 accepting) and single-token states."""
    _check_size("vocab_size", vocab_size, 2)
    check(
        isinstance(eos_token_id, int) and 0 <= eos_token_id < vocab_size,
        f"eos_token_id={eos_token_id!r} must index the vocabulary [0, {vocab_size}).",
    )
    _check_size("max_states", max_states)
    return _toy_grammars(vocab_size, eos_token_id, max_states)


@st.composite
def _toy_grammars(draw, vocab_size, eos_token_id, max_states):
    tokens = [t for t in range(vocab_size) if t != eos_token_id]
    num_states = draw(st.integers(1, max_states))
    transitions = []
    for _ in range(num_states):
        allowed = draw(st.lists(st.sampled_from(tokens), max_size=3, unique=True))
        transitions.append({t: draw(st.integers(0, num_states - 1)) for t in allowed})
    accepting = draw(st.sets(st.integers(0, num_states - 1), max_size=num_states))
    return ToyGrammar(transitions=tuple(transitions), accepting=frozenset(accepting))


def stop_sets(strings, *, max_stops: int = 3) -> st.SearchStrategy:
    """Tuples of stop strings for a vocabulary's token ``strings``: pieces of the text of 1-3 tokens (so a stop
    string can span tokens or sit inside one), plus overlapping pairs (one stop's last character begins another).
    Hypothesis draws how many and a seed; numpy draws the pieces."""
    texts = [s for s in strings if s]
    check(len(texts) > 0, f"strings={strings!r} must hold at least one non-empty token string.")
    _check_size("max_stops", max_stops)
    return _stop_sets(tuple(strings), max_stops)


def _stop_set(strings: tuple, count: int, seed: int) -> tuple:
    rng, texts, stops = np.random.default_rng(seed), [s for s in strings if s], []
    for _ in range(count):
        text = "".join(texts[i] for i in rng.integers(0, len(texts), size=int(rng.integers(1, 4))))
        start = int(rng.integers(0, len(text)))
        stop = text[start : start + int(rng.integers(1, 4))]
        if rng.random() < 0.5:  # an overlapping partner: stop's last char starts it
            stops.append(stop[-1] + texts[int(rng.integers(len(texts)))][:2])
        stops.append(stop)
    return tuple(dict.fromkeys(stops))


def _stop_sets(strings, max_stops):
    return st.builds(partial(_stop_set, strings), st.integers(1, max_stops), st.integers(0, 2**32 - 1))


def prompts(vocab_size: int, eos_token_id: int, *, max_len: int = 6) -> st.SearchStrategy:
    """Non-empty prompts of non-EOS token ids."""
    _check_size("vocab_size", vocab_size, 2)
    _check_size("max_len", max_len)
    tokens = [t for t in range(vocab_size) if t != eos_token_id]
    return st.lists(st.sampled_from(tokens), min_size=1, max_size=max_len).map(tuple)


def num_draft_tokens_sequences(*, max_num_draft_tokens: int = 4, max_len: int = 6) -> st.SearchStrategy:
    """Lists of ``num_draft_tokens`` (γ, drafts per round), one per round: the count may change from round to
    round."""
    _check_size("max_num_draft_tokens", max_num_draft_tokens)
    _check_size("max_len", max_len)
    return st.lists(st.integers(1, max_num_draft_tokens), min_size=1, max_size=max_len)


@st.composite
def _bad_token_ids(draw, vocab_size: int):
    if draw(_ONE_IN[10]) == 0:  # every token masked: the request ends with no_token at once
        return tuple(range(vocab_size))
    return tuple(draw(st.sets(st.integers(0, vocab_size - 1), max_size=2)))


def sampling_params(
    vocab,
    *,
    max_tokens=(1, 6),
    grammars: bool = True,
    stops: bool = True,
    penalties: bool = True,
    truncation: bool = True,
) -> st.SearchStrategy:
    """``SamplingParams`` exercising every processor of docs/design.md's pipeline, each on or off, including
    combinations that mask every token (all ids bad; a grammar dead end; EOS masked by ``min_tokens`` in a state
    that only accepts). ``vocab`` is a ``specverify.oracles.Vocab``; ``max_tokens`` a ``(low, high)`` range."""
    check(hasattr(vocab, "strings") and hasattr(vocab, "eos_token_id"), f"vocab={vocab!r} must be a Vocab.")
    low, high = max_tokens
    check(
        isinstance(low, int) and isinstance(high, int) and 1 <= low <= high,
        f"max_tokens={max_tokens!r} must be a (low, high) pair of ints with 1 <= low <= high.",
    )
    return _sampling_params(vocab, (low, high), bool(grammars), bool(stops), bool(penalties), bool(truncation))


@st.composite
def _sampling_params(draw, vocab, max_tokens, grammars, stops, penalties, truncation):
    (low, high), size, eos = max_tokens, len(vocab.strings), vocab.eos_token_id
    fields = {"max_tokens": draw(st.integers(low, high)), "temperature": draw(_MENUS["temperature"])}
    fields["min_tokens"] = draw(st.integers(0, fields["max_tokens"])) if draw(_ONE_IN[4]) == 0 else 0
    names = (("top_k", "top_p", "min_p") if truncation else ()) + (
        ("repetition_penalty", "frequency_penalty", "presence_penalty") if penalties else ()
    )
    for name in names:
        if draw(_BOOLS):  # half the processors off: their interactions stay readable when a test fails
            fields[name] = draw(_MENUS[name])
    if draw(_ONE_IN[4]) == 0:
        fields["bad_token_ids"] = draw(_bad_token_ids(size))
    if stops and draw(_ONE_IN[3]) == 0:
        fields["stop"] = draw(stop_sets(vocab.strings))
        fields["stop_after_min_tokens"] = draw(_BOOLS)
    if grammars and draw(_ONE_IN[6]) == 0:
        fields["grammar"] = draw(toy_grammars(size, eos))
    elif draw(_ONE_IN[6]) == 0:
        fields["ignore_eos"] = True
    return SamplingParams(**fields)


def requests(
    vocab, *, seeded: Optional[bool] = None, max_num_draft_tokens: int = 4, max_tokens=(1, 6)
) -> st.SearchStrategy:
    """``Request``s over ``vocab``: a prompt, ``sampling_params``, ``num_draft_tokens`` in
    ``1..max_num_draft_tokens`` and a seed (``seeded``: True always, False never, None either)."""
    from specverify.protocol import Request

    _check_size("max_num_draft_tokens", max_num_draft_tokens)
    check(seeded in (None, True, False), f"seeded={seeded!r} must be None, True or False.")
    seeds = st.integers(0, 2**32)
    seed = seeds if seeded else st.none() if seeded is False else st.none() | seeds
    return st.builds(
        Request,
        prompts(vocab.size, vocab.eos_token_id),
        sampling_params(vocab, max_tokens=max_tokens),
        st.integers(1, max_num_draft_tokens),
        seed=seed,
    )
