"""Counting a group's finished rows: the keyed count gives what counting the rows one by one gives, in key order."""

from collections import Counter

import numpy as np
import pytest

from specverify.reference.finish import REASONS
from specverify.reference.outcomes import GroupResult, count_outcomes


def _result(rng, rows: int, width: int, vocab: int) -> GroupResult:
    lengths = rng.integers(0, width + 1, rows)
    tokens = rng.integers(0, vocab, (rows, width))
    tokens[np.arange(width)[None, :] >= lengths[:, None]] = 0  # past the length: whatever the buffer held
    reasons = rng.integers(1, len(REASONS), rows)
    empty = np.zeros((rows, 1), dtype=np.int64)
    return GroupResult(tokens=tokens, lengths=lengths, reasons=reasons, accepted=empty, chunk_sizes=empty)


@pytest.mark.parametrize("width, vocab", [(6, 8), (1, 3), (0, 4), (30, 16)])  # (30, 16): the wide-key path
def test_counts_equal_a_row_by_row_count(width, vocab):
    res = _result(np.random.default_rng(width), 3000, width, vocab)
    want = Counter(
        (tuple(res.tokens[i, : res.lengths[i]].tolist()), REASONS[res.reasons[i]]) for i in range(len(res.lengths))
    )
    got = count_outcomes(res, vocab)
    assert got == dict(want)
    assert all(type(t) is int for tokens, _ in got for t in tokens)
    if width * np.log2(vocab + 1) + 3 < 62:  # the keyed path lists outcomes by (reason, digits) key
        keys = [(REASONS.index(r), tuple(t + 1 for t in tokens) + (0,) * (width - len(tokens))) for tokens, r in got]
        assert keys == sorted(keys)


def test_completions_share_objects_only_between_equal_rows():
    from specverify.reference.outcomes import _completions, completions_of

    rng = np.random.default_rng(5)
    rows, width, rounds = 2000, 2, 2  # at most 768 distinct rows: some repeat
    res = _result(rng, rows, width, 2)
    res.chunk_sizes = rng.integers(0, 2, (rows, rounds))
    res.accepted = rng.integers(-1, 1, (rows, rounds))
    shared, alone = completions_of(res), _completions(res)
    assert shared == alone  # field by field, row by row
    assert len({id(c) for c in shared}) < rows  # equal rows share one object
    by_id = {}
    for c in shared:
        assert by_id.setdefault(id(c), c) == c
    small = _result(rng, 10, width, 3)  # below the sharing threshold: one object per row
    assert len({id(c) for c in completions_of(small)}) == 10


def test_accepted_and_position_counts_equal_a_row_by_row_count():
    from specverify.reference.outcomes import count_accepted, count_positions

    rng = np.random.default_rng(3)
    gamma = 3
    res = _result(rng, 500, 6, 8)
    res.accepted = rng.integers(-1, gamma + 1, (500, 4))
    res.verified = np.maximum(res.accepted, rng.integers(-1, gamma + 1, (500, 4)))
    assert count_accepted(res.accepted) == dict(Counter(int(a) for a in res.accepted.ravel() if a >= 0))
    want = tuple((int((res.verified > k).sum()), int((res.accepted > k).sum())) for k in range(gamma))
    assert count_positions(res, gamma) == want
    assert count_accepted(np.full((3, 2), -1)) == {}
