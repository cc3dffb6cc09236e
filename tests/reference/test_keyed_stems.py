"""The reference's draws from per-group stems are the keyed RNG's uniforms, bit for bit (docs/design.md, RNG)."""

import numpy as np
import pytest

from specverify.keyed import Purpose, keyed_uniforms
from specverify.reference.group_state import keyed_draws, keyed_stems


@pytest.mark.parametrize("purpose", [Purpose.DRAFT, Purpose.ACCEPT, Purpose.TARGET, Purpose.PLAIN, 7])
def test_draws_from_stems_are_keyed_uniforms(purpose):
    rng = np.random.default_rng(purpose)
    seeds = rng.integers(0, 2**63, size=5000, dtype=np.int64).astype(np.uint64)
    seeds[:3] = [0, 1, 2**63 - 1]
    positions = rng.integers(0, 4096, size=5000)
    want = keyed_uniforms(seeds, positions, purpose)
    got = keyed_draws(keyed_stems(seeds, purpose), positions)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    assert np.array_equal(keyed_draws(keyed_stems(seeds, purpose)[10:20], positions[10:20]), want[10:20])
