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
