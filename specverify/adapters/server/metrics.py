"""A server's own speculative counters from its Prometheus ``/metrics`` text.

vLLM exports ``vllm:spec_decode_num_drafts``, ``_num_draft_tokens``, ``_num_accepted_tokens`` (counters, ``_total``
suffix in the text) and ``_num_accepted_tokens_per_pos`` (one series per ``position`` label). :func:`spec_counters`
reads them, summed over every other label (engines, model names), as the in-process adapter's counters are keyed
(``num_drafts``, ..., ``num_accepted_tokens_per_pos`` a list by position), so ``adapters.vllm.counters.reported``
turns their sums into a ``ReportedMetrics``. llama.cpp's server exports no spec-decode counters (its per-request
``draft_n`` / ``draft_n_accepted`` are summed from the answers instead).
"""

from __future__ import annotations

import re

__all__ = ["parse_prometheus", "spec_counters"]

_LINE = re.compile(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list:
    """``[(name, {label: value}, float)]`` of the samples in a Prometheus text answer (comments skipped).

    >>> parse_prometheus('# HELP x\\nvllm:a_total{engine="0",position="1"} 3.0\\nb 2\\n')
    [('vllm:a_total', {'engine': '0', 'position': '1'}, 3.0), ('b', {}, 2.0)]
    """
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if not match:
            continue
        name, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        out.append((name, dict(_LABEL.findall(labels or "")), number))
    return out


def spec_counters(text: str, prefix: str = "vllm:spec_decode_") -> dict:
    """vLLM's spec-decode counters in a ``/metrics`` text, summed over labels; ``{}`` when it exports none.

    >>> spec_counters('vllm:spec_decode_num_drafts_total{engine="0"} 4\\n'
    ...               'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 2\\n'
    ...               'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 3\\n')
    {'num_drafts': 4.0, 'num_accepted_tokens_per_pos': [3.0, 2.0]}
    """
    out: dict = {}
    per_pos: dict = {}
    for name, labels, value in parse_prometheus(text):
        if not name.startswith(prefix) or name.endswith(("_created", "_bucket", "_count", "_sum")):
            continue
        key = name[len(prefix) :].removesuffix("_total")
        if key == "num_accepted_tokens_per_pos":
            position = int(labels.get("position", 0))
            per_pos[position] = per_pos.get(position, 0.0) + value
        else:
            out[key] = out.get(key, 0.0) + value
    if per_pos:
        out["num_accepted_tokens_per_pos"] = [per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)]
    return out
