"""The toy models' KV hash (``models.py``): splitmix64's finaliser chained over the tokens of a prefix, in numpy
arrays for the caches and in Python ints for the oracle's pure ``logits`` (the same values, bit for bit)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["step_kv"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STEP = np.uint64(0x9E3779B97F4A7C15)
_ROOT_KV = np.uint64(0x2545F4914F6CDD1D)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 values (wrapping arithmetic); ``x`` is left as it is."""
    if np.ndim(x) == 0:
        x = (x ^ (x >> _S30)) * _M1
        x = (x ^ (x >> _S27)) * _M2
        return x ^ (x >> _S31)
    return _mix_in_place(np.array(x, dtype=np.uint64))


def _mix_in_place(x: np.ndarray) -> np.ndarray:  # uint64 [...] (ndim >= 1) -> the same array, mixed
    """:func:`_mix` written into ``x`` itself: one scratch array instead of seven temporaries (the same values);
    a few entries in Python ints (eight numpy calls cost more than the arithmetic)."""
    if x.size <= 4:
        x[...] = np.array([_mix_int(v) for v in x.reshape(-1).tolist()], dtype=np.uint64).reshape(x.shape)
        return x
    scratch = np.right_shift(x, _S30)
    x ^= scratch
    x *= _M1
    np.right_shift(x, _S27, out=scratch)
    x ^= scratch
    x *= _M2
    np.right_shift(x, _S31, out=scratch)
    x ^= scratch
    return x


def step_kv(prev: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """The KV entry after ``tokens`` given the previous entries (uint64 arrays, broadcast)."""
    with np.errstate(over="ignore"):
        x = np.asarray(tokens).astype(np.uint64)  # a fresh array, mixed in place where the shapes allow
        if x.ndim == 0 or x.shape != np.shape(prev):
            return _mix(prev ^ ((x + np.uint64(1)) * _STEP))
        x += np.uint64(1)
        x *= _STEP
        np.bitwise_xor(x, prev, out=x)
        return _mix_in_place(x)


_MASK64 = (1 << 64) - 1
_M1_INT, _M2_INT, _STEP_INT, _ROOT_INT = int(_M1), int(_M2), int(_STEP), int(_ROOT_KV)


def _mix_int(x: int) -> int:
    """:func:`_mix` of one value in Python ints (the same wrapping uint64 arithmetic)."""
    x = ((x ^ (x >> 30)) * _M1_INT) & _MASK64
    x = ((x ^ (x >> 27)) * _M2_INT) & _MASK64
    return x ^ (x >> 31)


def _prefix_kv(prefix: Sequence[int]) -> int:
    """The KV entry after the whole ``prefix``: ``step_kv`` from the root over each token, in Python ints (the
    same wrapping uint64 arithmetic, bit for bit, ~20x cheaper than numpy scalars for one history)."""
    h = _ROOT_INT
    for tok in prefix:
        x = h ^ (((tok + 1) * _STEP_INT) & _MASK64)
        x = ((x ^ (x >> 30)) * _M1_INT) & _MASK64
        x = ((x ^ (x >> 27)) * _M2_INT) & _MASK64
        h = x ^ (x >> 31)
    return h
