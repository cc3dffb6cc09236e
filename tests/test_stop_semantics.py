"""Stop strings, one table of cases, three implementations that share no code.

- the decoders' DFA (``specverify.reference.stops.stop_tables``, stepped by ``reference.finish.stop_step``, which
  also holds stops back until ``min_tokens``): what every reference decoder, the zoo and the fuzz mutants use,
- ``specverify.fuzz.naive_stop_hits`` (a naive search of the text, the fuzzer's independent check of the DFA),
- the oracle's finish rule ``specverify.oracles.law.first_finish`` (its own naive copy: docs/design.md keeps the
  oracle independent of the decoders).

Each case gives token strings, stop strings, the token ids generated and the index of the first token after which
the request finishes with ``stop`` (None: it does not). The vocabulary of every case ends with EOS (text "").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest

from specverify.fuzz import naive_stop_hits
from specverify.oracles import Vocab
from specverify.oracles.law import first_finish
from specverify.params import SamplingParams
from specverify.reference.finish import stop_step
from specverify.reference.stops import stop_tables


@dataclass(frozen=True)
class StopCase:
    name: str
    strings: tuple[str, ...]  # token strings without EOS (appended as the last id)
    stops: tuple[str, ...]
    tokens: tuple[int, ...]
    expected: Optional[int]  # index of the token that finishes with "stop"
    min_tokens: int = 0
    stop_after_min_tokens: bool = False
    ignore_eos: bool = False

    @property
    def vocab(self) -> Vocab:
        return Vocab(strings=self.strings + ("",), eos_token_id=len(self.strings))

    @property
    def params(self) -> SamplingParams:  # max_tokens past the end: only a stop string can finish the request
        return SamplingParams(
            max_tokens=len(self.tokens) + 1,
            stop=self.stops,
            min_tokens=self.min_tokens,
            stop_after_min_tokens=self.stop_after_min_tokens,
            ignore_eos=self.ignore_eos,
        )


ABC = ("a", "b", "c")
# fmt: off
CASES = [
    StopCase("one token", ABC, ("b",), (0, 1, 2), 1),
    StopCase("no stop in the text", ABC, ("ab",), (1, 0, 2, 0), None),
    StopCase("spans two tokens", ABC, ("ab",), (2, 0, 1), 2),
    StopCase("spans three tokens", ABC, ("abc",), (0, 1, 2), 2),
    StopCase("overlapping stops ab / ba", ABC, ("ab", "ba"), (1, 1, 0), 2),
    StopCase("partial match restarts inside itself", ABC, ("aab",), (0, 0, 0, 1), 3),
    StopCase("completed inside a multi-character token", ("xa", "bcd", "y"), ("ab",), (2, 0, 1), 2),
    StopCase("starts in one token, ends in the middle of the next", ("xab", "cdy"), ("bcd",), (0, 1), 1),
    StopCase("whole stop inside one token", ("zabz", "a"), ("ab",), (1, 0), 1),
    StopCase("suffix of another stop completes first", ABC, ("abcd", "bc"), (0, 1, 2), 2),
    StopCase("empty tokens never complete a stop", ("a", "b", ""), ("ab",), (2, 0, 2, 2, 1), 4),
    StopCase("EOS under ignore_eos is an empty ordinary token", ABC, ("ab",), (0, 3, 1), 2, ignore_eos=True),
    StopCase("held back until min_tokens, then hit again", ABC, ("a",), (0, 1, 0), 2, min_tokens=2,
             stop_after_min_tokens=True),
    StopCase("held back until min_tokens, never hit again", ABC, ("ab",), (0, 1, 2), None, min_tokens=3,
             stop_after_min_tokens=True),
    StopCase("min_tokens alone does not hold stops back", ABC, ("a",), (0, 1, 0), 0, min_tokens=2),
]
# fmt: on


def first_hit(hits: list, case: StopCase) -> Optional[int]:
    """The first flagged token that counts: with ``stop_after_min_tokens``, none before ``min_tokens`` tokens exist
    (the naive search knows nothing of it; the DFA column applies it through ``stop_step``)."""
    held = case.min_tokens if case.stop_after_min_tokens else 0
    return next((i for i, hit in enumerate(hits) if hit and i + 1 >= held), None)


def dfa_first_stop(case: StopCase) -> Optional[int]:
    tables, state = stop_tables(case.vocab.strings, case.stops), np.array(0)
    for i, token in enumerate(case.tokens):
        hit, state = stop_step(tables, state, np.array(token), i + 1, case.params)
        if hit:
            return i
    return None


def naive_first_stop(case: StopCase) -> Optional[int]:
    return first_hit(naive_stop_hits(case.vocab.strings, case.stops, case.tokens), case)


def oracle_first_stop(case: StopCase) -> Optional[int]:
    finish = first_finish(case.vocab, case.tokens, case.params)
    assert finish is None or finish[1] == "stop", f"{case.name}: the oracle finished with {finish!r}"
    return None if finish is None else finish[0]


IMPLEMENTATIONS = {"dfa": dfa_first_stop, "naive": naive_first_stop, "oracle": oracle_first_stop}


def test_the_cases_are_distinct_and_hold_both_outcomes():
    assert len({c.name for c in CASES}) == len(CASES) >= 12
    assert {c.expected is None for c in CASES} == {True, False}


@pytest.mark.parametrize("implementation", list(IMPLEMENTATIONS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_implementation_finds_the_first_stop(case, implementation):
    assert IMPLEMENTATIONS[implementation](case) == case.expected, case
