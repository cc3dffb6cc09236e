"""Argument validation shared by the statistics modules (private).

Every check raises ``InvalidArgument`` with the message shape of STYLE.md: ``name=value!r``, what was expected, how to
fix it. Arrays are summarised rather than printed in full.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from specverify.errors import InvalidArgument

SUM_ATOL = 1e-9


def _show(array: np.ndarray) -> str:
    """A short description of an array for error messages."""
    if array.size <= 6:
        return repr(array.tolist())
    return f"<array shape={array.shape} dtype={array.dtype}>"


def as_expected(expected, name: str = "expected") -> np.ndarray:  # any -> float64 [K], renormalised
    """Validate an exact law over K outcomes of positive probability; return it as float64 summing to 1."""
    try:
        array = np.asarray(expected, dtype=np.float64)
    except (TypeError, ValueError) as error:
        message = f"{name}={expected!r} is not numeric; pass a 1-D float array of probabilities."
        raise InvalidArgument(message) from error
    if array.ndim != 1 or array.size == 0:
        raise InvalidArgument(
            f"{name}={_show(array)} has shape {array.shape}; expected a non-empty 1-D array of probabilities "
            "(one per outcome of positive probability). Flatten it or drop the empty scenario."
        )
    if not np.all(np.isfinite(array)):
        raise InvalidArgument(f"{name}={_show(array)} contains NaN or inf; expected finite probabilities.")
    if np.any(array <= 0):
        raise InvalidArgument(
            f"{name}={_show(array)} has {int(np.sum(array <= 0))} entries <= 0 (min {array.min()!r}); expected "
            "strictly positive probabilities. Drop outcomes of probability 0: observing one rejects at once."
        )
    total = math.fsum(array.tolist())
    if abs(total - 1.0) > SUM_ATOL:
        raise InvalidArgument(
            f"{name} sums to {total!r}; expected 1 within {SUM_ATOL} (atol). Did you pass unnormalised weights or "
            "logits? Normalise with expected / expected.sum() in float64."
        )
    return array / total


def as_counts(counts, size: int, name: str = "counts") -> np.ndarray:  # any -> int64 [K]
    """Validate non-negative integer counts with ``size`` entries; return them as int64."""
    try:
        raw = np.asarray(counts)
        array = raw.astype(np.float64)
    except (TypeError, ValueError) as error:
        raise InvalidArgument(f"{name}={counts!r} is not numeric; pass a 1-D integer array of counts.") from error
    if array.shape != (size,):
        raise InvalidArgument(
            f"{name}={_show(raw)} has shape {array.shape}; expected shape ({size},), one count per outcome of the "
            "expected law, in the same order."
        )
    if not np.all(np.isfinite(array)) or np.any(array < 0) or np.any(array != np.round(array)):
        raise InvalidArgument(
            f"{name}={_show(raw)} contains negative, fractional or non-finite entries; expected non-negative "
            "integer counts (how many samples hit each outcome)."
        )
    return raw.astype(np.int64) if raw.dtype.kind in "iub" else array.astype(np.int64)


def as_positive_int(value, name: str, minimum: int = 1) -> int:
    """Validate an integer ``>= minimum`` (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgument(f"{name}={value!r}; expected an integer >= {minimum}.")
    return int(value)


def as_probability(value, name: str, *, open_right: bool = True) -> float:
    """Validate a float in (0, 1) (or (0, 1] with ``open_right=False``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0.0 < value
    ok = ok and (value < 1.0 if open_right else value <= 1.0)
    if not ok:
        interval = "(0, 1)" if open_right else "(0, 1]"
        raise InvalidArgument(f"{name}={value!r}; expected a real number in {interval}.")
    return float(value)


def as_positive_float(value, name: str) -> float:
    """Validate a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 < value < math.inf):
        raise InvalidArgument(f"{name}={value!r}; expected a finite real number > 0.")
    return float(value)
