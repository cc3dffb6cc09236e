"""The keyed RNG: every uniform is a function of (request seed, position, purpose), never of a batch index, and the
per-draw seeds of a request's stream (docs/design.md, RNG; docs/adapters.md, the draw offset). numpy only: a
decoder's ``sample`` can derive its seeds without importing torch.
"""

from __future__ import annotations

import numpy as np

from specverify.errors import check

__all__ = ["Purpose", "keyed_uniforms", "draw_seeds"]


class Purpose:
    """RNG purposes: a draw is keyed by (request seed, position, purpose) (docs/design.md, RNG)."""

    DRAFT = 1  # the draft's proposal at a position
    ACCEPT = 2  # the acceptance test of the draft at a position
    TARGET = 3  # a recovered or bonus token (residual or target row) at a position
    PLAIN = 4  # plain autoregressive sampling at a position
    REQUEST = 5  # deriving per-draw seeds for repeated draws of one request


# --------------------------------------------------------------------------------------------------- keyed RNG

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic is defined for numpy arrays)."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


def keyed_uniforms(seeds, positions, purpose: int) -> np.ndarray:
    """Uniforms in [0, 1) keyed by (request seed, position, purpose), never by batch index (docs/design.md, RNG).

    ``seeds`` and ``positions`` are int arrays (broadcast); returns float64 with 53 random bits.

    Examples
    --------
    >>> a = keyed_uniforms([7, 8], [3, 3], Purpose.ACCEPT)
    >>> bool(a[0] == keyed_uniforms([7], [3], Purpose.ACCEPT)[0]) and bool(a[0] != a[1])
    True
    """
    with np.errstate(over="ignore"):
        s = np.asarray(seeds).astype(np.uint64)
        p = np.asarray(positions).astype(np.uint64)
        x = _mix64(s * _GOLDEN + np.uint64(purpose))
        x = _mix64(x ^ (p * _MIX1 + np.uint64(0x632BE59BD9B4E019)))
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def draw_seeds(seed: int, n: int, start: int = 0) -> np.ndarray:
    """The per-draw seeds (uint64 [n], 63-bit) of draws ``start`` .. ``start + n - 1`` of a request seeded with
    ``seed``: draw i's depends on (seed, i) only, so any split of the draws into ``sample(request, n, start)`` calls
    gives the same draws (docs/adapters.md, the draw offset).

    Examples
    --------
    >>> whole = draw_seeds(7, 5)
    >>> bool((whole[2:] == draw_seeds(7, 3, start=2)).all()) and len(set(whole.tolist())) == 5
    True
    """
    check(isinstance(n, int) and not isinstance(n, bool) and n >= 0, f"n={n!r} must be an int >= 0.")
    check(
        isinstance(start, int) and not isinstance(start, bool) and start >= 0,
        f"start={start!r} must be an int >= 0 (the index of the first draw in the request's stream).",
    )
    positions = np.arange(start, start + n, dtype=np.int64)
    return (keyed_uniforms(seed, positions, Purpose.REQUEST) * 2.0**63).astype(np.uint64)
