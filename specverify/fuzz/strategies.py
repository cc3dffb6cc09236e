"""Hypothesis strategies for the inputs of a speculative decoder (imports hypothesis).

Every strategy draws small, structured choices (which kind of row, which processor values, which automaton edges)
so that shrinking simplifies the structure; values come from short menus that include the corners where decoders
go wrong: exact zeros, 1e-12 masses, ties, one-hot rows, processors that mask every token, grammars with dead ends
or accepting at once, stop strings that span tokens and overlap.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specverify.errors import check
from specverify.grammar import ToyGrammar
from specverify.params import SamplingParams

__all__ = ["probability_vectors", "law_pairs", "sampling_params", "toy_grammars", "stop_sets", "prompts",
           "gamma_sequences", "requests", "VECTOR_KINDS"]

VECTOR_KINDS = ("dense", "zeros", "tiny", "ties", "one_hot")
TEMPERATURES = (1.0, 0.0, 0.5, 1.5)
TOP_KS = (0, 1, 2, 3)
TOP_PS = (1.0, 0.9, 0.5, 0.01)
MIN_PS = (0.0, 0.1, 0.5, 1.0)
REPETITION_PENALTIES = (1.0, 1.3, 0.7, 2.0)
FREQUENCY_PENALTIES = (0.0, 0.5, -0.5, 1.0)
PRESENCE_PENALTIES = (0.0, 0.4, -0.4)
# built once: a strategy built inside a draw is validated again on every draw (most of the cost of a small draw)
_MENUS = {name: st.sampled_from(values) for name, values in (
    ("temperature", TEMPERATURES), ("top_k", TOP_KS), ("top_p", TOP_PS), ("min_p", MIN_PS),
    ("repetition_penalty", REPETITION_PENALTIES), ("frequency_penalty", FREQUENCY_PENALTIES),
    ("presence_penalty", PRESENCE_PENALTIES))}
_BOOLS = st.booleans()
_ONE_IN = {k: st.integers(0, k - 1) for k in (2, 4, 6, 10)}


def _check_size(name: str, value, low: int = 1) -> None:
    check(isinstance(value, int) and not isinstance(value, bool) and value >= low,
          f"{name}={value!r} must be an int >= {low}.")


def _vector(kind: str, weights: list, picks: list, size: int) -> np.ndarray:  # -> float64 [size], sums to 1
    if kind == "one_hot":
        return np.eye(size)[picks[0] % size]
    if kind == "ties":
        support = np.zeros(size)
        support[[p % size for p in picks]] = 1.0
        return support / support.sum()
    row = np.asarray(weights, dtype=np.float64) + 1e-3
    if kind == "zeros":
        row[[p % size for p in picks[1:]]] = 0.0
        row[picks[0] % size] += 1.0  # at least one positive entry
    if kind == "tiny":
        row[[p % size for p in picks[1:]]] = 0.0
        row = row / row.sum()
        row[[p % size for p in picks[1:]]] = 1e-12
    return row / row.sum()


@st.composite
def probability_vectors(draw, size=None, *, kinds=VECTOR_KINDS, max_size: int = 12):
    """Float64 probability vectors (non-negative, sum 1 within 1e-12) of the given ``kinds``: ``dense``,
    ``zeros`` (exact zeros), ``tiny`` (1e-12 masses), ``ties`` (a uniform support) and ``one_hot``.

    ``size`` fixes the length (else 1 .. ``max_size``).
    """
    check(size is None or (isinstance(size, int) and size >= 1), f"size={size!r} must be None or an int >= 1.")
    check(len(kinds) > 0 and set(kinds) <= set(VECTOR_KINDS), f"kinds={kinds!r} must be a non-empty subset of "
          f"{VECTOR_KINDS!r}.")
    _check_size("max_size", max_size)
    size = size if size is not None else draw(st.integers(1, max_size))
    kind = draw(st.sampled_from(tuple(kinds)))
    weights = draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size))
    picks = draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=max(1, size - 1)))
    return _vector(kind, weights, picks, size)


@st.composite
def law_pairs(draw, size=None, *, distance=(0.0, 1.0), max_size: int = 12):
    """``(target_probs, draft_probs)``: two probability vectors whose total-variation distance lies in ``distance``
    (a ``(low, high)`` pair; ``(0, 0)`` gives equal laws). The draft mixes the target with another vector."""
    low, high = distance
    check(0.0 <= low <= high <= 1.0, f"distance={distance!r} must be a (low, high) pair with 0 <= low <= high <= 1.")
    target = draw(probability_vectors(size, max_size=max_size))
    other = draw(probability_vectors(target.size))
    wanted = draw(st.floats(low, high))
    tv = 0.5 * float(np.abs(target - other).sum())
    if tv < wanted:  # push all the mass where the target has least: TV = 1 - min(target)
        other = np.eye(target.size)[int(np.argmin(target))]
        tv = 0.5 * float(np.abs(target - other).sum())
    mix = 0.0 if tv == 0 else min(1.0, wanted / tv)
    draft = (1.0 - mix) * target + mix * other
    return target, draft / draft.sum()


@st.composite
def toy_grammars(draw, vocab_size: int, eos_token_id: int, *, max_states: int = 4):
    """``ToyGrammar`` automata over the non-EOS ids, including dead ends (a state with no edge that does not
    accept), states accepting at once (state 0 accepting) and single-token states."""
    _check_size("vocab_size", vocab_size, 2)
    check(isinstance(eos_token_id, int) and 0 <= eos_token_id < vocab_size,
          f"eos_token_id={eos_token_id!r} must index the vocabulary [0, {vocab_size}).")
    tokens = [t for t in range(vocab_size) if t != eos_token_id]
    num_states = draw(st.integers(1, max_states))
    transitions = []
    for _ in range(num_states):
        allowed = draw(st.lists(st.sampled_from(tokens), max_size=3, unique=True))
        transitions.append({t: draw(st.integers(0, num_states - 1)) for t in allowed})
    accepting = draw(st.sets(st.integers(0, num_states - 1), max_size=num_states))
    return ToyGrammar(transitions=tuple(transitions), accepting=frozenset(accepting))


@st.composite
def stop_sets(draw, strings, *, max_stops: int = 3):
    """Tuples of stop strings for a vocabulary's token ``strings``: pieces of the text of 1-3 tokens (so a stop
    string can span tokens or sit inside one), plus overlapping pairs (one stop's suffix begins another)."""
    texts = [s for s in strings if s]
    check(len(texts) > 0, f"strings={strings!r} must hold at least one non-empty token string.")
    stops = []
    for _ in range(draw(st.integers(1, max_stops))):
        text = "".join(draw(st.lists(st.sampled_from(texts), min_size=1, max_size=3)))
        start = draw(st.integers(0, len(text) - 1))
        stop = text[start:start + draw(st.integers(1, 3))]
        if draw(_BOOLS):  # an overlapping partner: stop's last char starts it
            stops.append(stop[-1] + draw(st.sampled_from(texts))[:2])
        stops.append(stop)
    return tuple(dict.fromkeys(stops))


def prompts(vocab_size: int, eos_token_id: int, *, max_len: int = 6):
    """Non-empty prompts of non-EOS token ids."""
    _check_size("vocab_size", vocab_size, 2)
    _check_size("max_len", max_len)
    tokens = [t for t in range(vocab_size) if t != eos_token_id]
    return st.lists(st.sampled_from(tokens), min_size=1, max_size=max_len).map(tuple)


def gamma_sequences(*, max_gamma: int = 4, max_len: int = 6):
    """Lists of γ (drafts per round), one per round: γ may change from round to round."""
    _check_size("max_gamma", max_gamma)
    _check_size("max_len", max_len)
    return st.lists(st.integers(1, max_gamma), min_size=1, max_size=max_len)


@st.composite
def _bad_token_ids(draw, vocab_size: int):
    if draw(_ONE_IN[10]) == 0:  # every token masked: the request ends with no_token at once
        return tuple(range(vocab_size))
    return tuple(draw(st.sets(st.integers(0, vocab_size - 1), max_size=2)))


@st.composite
def sampling_params(draw, vocab, *, max_tokens=(1, 6), grammars: bool = True, stops: bool = True,
                    penalties: bool = True, truncation: bool = True):
    """``SamplingParams`` exercising every processor of DESIGN.md's pipeline, each on or off, including
    combinations that mask every token (all ids bad; a grammar dead end; EOS masked by ``min_tokens`` in a state
    that only accepts). ``vocab`` is a ``specverify.oracles.Vocab``; ``max_tokens`` a ``(low, high)`` range."""
    check(hasattr(vocab, "strings") and hasattr(vocab, "eos_token_id"), f"vocab={vocab!r} must be a Vocab.")
    low, high = max_tokens
    check(isinstance(low, int) and isinstance(high, int) and 1 <= low <= high,
          f"max_tokens={max_tokens!r} must be a (low, high) pair of ints with 1 <= low <= high.")
    size, eos = len(vocab.strings), vocab.eos_token_id
    fields = {"max_tokens": draw(st.integers(low, high)), "temperature": draw(_MENUS["temperature"])}
    fields["min_tokens"] = draw(st.integers(0, fields["max_tokens"])) if draw(_ONE_IN[4]) == 0 else 0
    names = (("top_k", "top_p", "min_p") if truncation else ()) + (
        ("repetition_penalty", "frequency_penalty", "presence_penalty") if penalties else ())
    for name in names:
        if draw(_BOOLS):  # half the processors off: their interactions stay readable when a test fails
            fields[name] = draw(_MENUS[name])
    if draw(_ONE_IN[4]) == 0:
        fields["bad_token_ids"] = draw(_bad_token_ids(size))
    if stops and draw(_ONE_IN[4]) == 0:
        fields["stop"] = draw(stop_sets(vocab.strings))
        fields["stop_after_min_tokens"] = draw(_BOOLS)
    if grammars and draw(_ONE_IN[6]) == 0:
        fields["grammar"] = draw(toy_grammars(size, eos))
    elif draw(_ONE_IN[6]) == 0:
        fields["ignore_eos"] = True
    return SamplingParams(**fields)


@st.composite
def requests(draw, vocab, *, seeded=None, max_gamma: int = 4, max_tokens=(1, 6)):
    """``Request``s over ``vocab``: a prompt, ``sampling_params``, γ in ``1..max_gamma`` and a seed (``seeded``:
    True always, False never, None either)."""
    from specverify.protocol import Request

    _check_size("max_gamma", max_gamma)
    check(seeded in (None, True, False), f"seeded={seeded!r} must be None, True or False.")
    has_seed = draw(_BOOLS) if seeded is None else seeded
    return Request(draw(prompts(vocab.size, vocab.eos_token_id)), draw(sampling_params(vocab, max_tokens=max_tokens)),
                   draw(st.integers(1, max_gamma)), seed=draw(st.integers(0, 2**32)) if has_seed else None)
