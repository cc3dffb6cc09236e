"""The decoders' finish codes (``reference/finish.py``): the rule order per row."""

import numpy as np

from specverify.params import SamplingParams
from specverify.reference.finish import EOS, LENGTH, STOP, finish_codes


def test_finish_codes_follow_the_rule_order():
    """EOS over a stop string over the length, per row; scalars broadcast (``plain.py`` passes one count)."""
    params = SamplingParams(max_tokens=3)
    tokens = np.array([7, 7, 1, 1, 2, 2])
    hit = np.array([True, False, True, False, True, False])
    count = np.array([3, 1, 3, 3, 1, 1])
    want = [EOS, EOS, STOP, LENGTH, STOP, 0]
    assert finish_codes(tokens, hit, count, params, 7).tolist() == want
    assert finish_codes(tokens, hit, 3, params, 7).tolist() == [EOS, EOS, STOP, LENGTH, STOP, LENGTH]
    ignore = SamplingParams(max_tokens=3, ignore_eos=True)
    assert finish_codes(tokens, hit, count, ignore, 7).tolist() == [STOP, 0, STOP, LENGTH, STOP, 0]
    assert finish_codes(np.array([7]), np.array([False]), np.array([1]), params, 7).dtype == np.int64
