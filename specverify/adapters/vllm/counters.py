"""vLLM's own spec-decode counters as ``decoder.reported_metrics()`` (docs/adapters.md, "Engine counters").

The adapter diffs vLLM's cumulative Prometheus counters (``LLM.get_metrics()``: ``vllm:spec_decode_num_drafts``,
``num_draft_tokens``, ``num_accepted_tokens``, ``num_accepted_tokens_per_pos``) around every ``generate()`` and sums
them into ``decoder.engine_counters`` (:func:`read_counters`, :func:`counter_delta`, :func:`add_counters`), so they stay
cumulative over the decoder's engines. :func:`reported` turns those sums into a ``ReportedMetrics`` with the rates
vLLM's own logger derives from them: ``SpecDecodingLogging.log`` (v1/spec_decode/metrics.py:82-137 in 0.32.0) is run on
one observation of the sums and its arguments are read back (mean acceptance length and draft acceptance rate unrounded,
the per-position rates as it formats them, 3 decimals). Where that private API differs (another vLLM version) the rates
are None and the counts are still reported.
"""

from __future__ import annotations

from typing import Mapping, Optional

from specverify.metrics.counters import ReportedMetrics

__all__ = ["read_counters", "counter_delta", "add_counters", "reported", "reported_metrics", "logged_rates"]


def read_counters(llm, metrics=None) -> dict:
    """vLLM's cumulative spec-decode counters: name -> float, or list of floats (per position); ``metrics``: a
    snapshot of ``llm.get_metrics()`` already read (None: read one)."""
    out = {}
    for metric in llm.get_metrics() if metrics is None else metrics:
        if "spec_decode" not in metric.name:
            continue
        key = metric.name.removeprefix("vllm:spec_decode_")
        value = list(getattr(metric, "values", None) or []) if hasattr(metric, "values") else metric.value
        out[key] = value
    return out


def counter_delta(before: dict, after: dict) -> dict:
    """``after - before``, key by key (lists position by position): the counts of the calls between two reads."""
    out = {}
    for key, value in after.items():
        old = before.get(key)
        if isinstance(value, list):
            old = old or [0] * len(value)
            out[key] = [a - b for a, b in zip(value, old + [0] * (len(value) - len(old)))]
        else:
            out[key] = value - (old or 0)
    return out


def add_counters(total: dict, delta: dict) -> None:
    """Add ``delta`` into ``total``, key by key (lists position by position, the longer one's length)."""
    for key, value in delta.items():
        if isinstance(value, list):
            old = total.get(key, [])
            width = max(len(old), len(value))
            total[key] = [(old[i] if i < len(old) else 0) + (value[i] if i < len(value) else 0) for i in range(width)]
        else:
            total[key] = total.get(key, 0) + value


def _count(counters: Mapping, key: str) -> Optional[int]:
    value = counters.get(key)
    return None if value is None else int(round(float(value)))


def logged_rates(drafts: int, draft_tokens: int, accepted: int, per_position: tuple) -> Optional[dict]:
    """What vLLM's ``SpecDecodingLogging.log`` prints for these sums: mean acceptance length, draft acceptance rate
    (a fraction, not %), per-position rates; None when its API is not the one of 0.32.0."""
    try:
        from vllm.v1.spec_decode.metrics import SpecDecodingLogging, SpecDecodingStats

        stats = SpecDecodingStats.new(len(per_position))
        stats.num_drafts, stats.num_draft_tokens, stats.num_accepted_tokens = drafts, draft_tokens, accepted
        stats.num_accepted_tokens_per_pos = list(per_position)
        logger = SpecDecodingLogging()
        logger.observe(stats)
        seen: list = []
        logger.log(log_fn=lambda fmt, *args: seen.append(args))
        (mean_length, _, _, _, _, rates, rate_percent) = seen[0]
        per = tuple(float(r) for r in rates.split(",")) if rates.strip() else ()
        return dict(
            mean_acceptance_length=float(mean_length),
            acceptance_rate=float(rate_percent) / 100,
            acceptance_rate_per_position=per,
        )
    except (ImportError, AttributeError, TypeError, ValueError, IndexError):
        return None


def reported(counters: Mapping) -> ReportedMetrics:
    """``decoder.engine_counters`` (vLLM's counters summed over the decoder's calls) as a ``ReportedMetrics``."""
    drafts = _count(counters, "num_drafts")
    draft_tokens = _count(counters, "num_draft_tokens")
    accepted = _count(counters, "num_accepted_tokens")
    per = counters.get("num_accepted_tokens_per_pos")
    per = None if per is None else tuple(int(round(float(v))) for v in per)
    rates = None
    if drafts and draft_tokens and accepted is not None and per:
        rates = logged_rates(drafts, draft_tokens, accepted, per)
    return ReportedMetrics(
        num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted, accepted_per_position=per,
        **(rates or {}),
    )  # fmt: skip


def reported_metrics(decoder) -> Optional[ReportedMetrics]:
    """``VllmDecoder.reported_metrics()``: its ``engine_counters`` as :func:`reported` gives them; None when the
    decoder does not speculate (``plain``)."""
    return reported(decoder.engine_counters) if decoder._speculative else None
