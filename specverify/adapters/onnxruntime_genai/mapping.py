"""The ONNX Runtime GenAI adapter's mapping, without the engine: a request's search options, its seed, the rounds
read from the engine's own counters, the counters as ``ReportedMetrics``, the request checks.

**Search options** (``GeneratorParams.set_search_options``). The engine's defaults are not the canonical ones: the
model builder writes ``do_sample false`` and ``top_k 50`` into ``genai_config.json`` (greedy; and a ``top_k`` above
the vocabulary is refused at the first sampling step: ``top_k (50) must be less than or equal to vocab_size (6)``),
so ``do_sample``, ``temperature`` and ``top_k`` are always sent (an unset ``top_k`` as 0, which the engine reads as
off, ``temperature`` as 1); ``top_p`` only when the request set it (the engine's default 1.0 is off). Temperature 0 is
``do_sample=False`` (the engine's argmax). ``max_length`` is the prompt's length plus ``max_tokens`` (the engine
counts the prompt), ``random_seed`` the request's seed hashed into [0, 2**31) (an unseeded request sends -1: the
engine seeds that generator from ``std::random_device``, its own unseeded path).

**Rounds** (``RoundLog``). The engine reports no per-round acceptance, but its counters (``get_speculative_stats()``,
per generator) move as it runs: a ``generate_next_token()`` that ran a round raises ``rounds`` by one and
``draft_tokens_accepted`` by that round's accepted drafts, and the next ``accepted`` calls drain the round's buffered
tokens; a call that neither runs a round nor drains one is a plain target step (an n-gram miss, a cool-down step): a
round of 0 drafts accepted. The engine counts drafts it accepted past the token it stopped on, so the rounds are
clipped to the tokens returned (``clip_accepted``).

Nothing here imports ``onnxruntime_genai``.
"""

from __future__ import annotations

from typing import Mapping, Optional

import numpy as np

from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["SEED_RANGE", "search_options", "engine_seed", "RoundLog", "reported", "check_request"]

SEED_RANGE = 2**31 - 1  # random_seed is parsed as an int (config.cpp, SafeDoubleToInt); -1 means unseeded


def engine_seed(seed: Optional[int]) -> int:
    """The engine's ``random_seed`` for a request seed: hashed into [0, 2**31 - 1); -1 (unseeded) for None.

    >>> engine_seed(None), engine_seed(7) == engine_seed(7), engine_seed(7) != engine_seed(8)
    (-1, True, True)
    """
    if seed is None:
        return -1
    return int(np.random.SeedSequence(int(seed)).generate_state(1, np.uint64)[0] % SEED_RANGE)


def search_options(request: Request) -> dict:
    """``set_search_options`` keywords for ``request`` (module docstring).

    >>> from specverify.params import SamplingParams
    >>> search_options(Request((0, 1), SamplingParams(max_tokens=3), 2, seed=None))
    {'max_length': 5, 'random_seed': -1, 'do_sample': True, 'temperature': 1.0, 'top_k': 0}
    >>> search_options(Request((0,), SamplingParams(temperature=0.0, max_tokens=2), 1))["do_sample"]
    False
    """
    p = request.params
    out = {"max_length": len(request.prompt) + int(p.max_tokens), "random_seed": engine_seed(request.seed)}
    out["do_sample"] = p.temperature > 0
    out["temperature"] = float(p.temperature) if p.temperature > 0 else 1.0
    out["top_k"] = int(p.top_k)
    if p.is_set("top_p"):
        out["top_p"] = float(p.top_p)
    return out


def check_request(request: Request, capabilities: frozenset, method: str, vocab_size: int) -> None:
    """Refuse what the decoder does not map exactly (``InvalidArgument``, named in the message)."""
    p = request.params
    extra = sorted(n for n in p.active() if n not in capabilities)
    if extra:
        raise InvalidArgument(
            f"params={p!r} set {extra!r}, which ONNX Runtime GenAI's {method!r} path does not map exactly (not "
            "declared); drop them or use another factory (docs/findings/onnxruntime_genai.md)."
        )
    if p.top_k == 1 or p.top_k > vocab_size:
        raise InvalidArgument(
            f"top_k={p.top_k!r}: the engine reads top_k 1 as off (sampling_distribution.h, apply_topk = top_k > 1) "
            f"and refuses one above vocab_size={vocab_size}; send top_k 0 or in [2, {vocab_size}]."
        )


_STAT_KEYS = ("rounds", "draft_tokens_accepted", "draft_tokens_evaluated", "draft_tokens_proposed")


class RoundLog:
    """Accepted drafts per round of one generator, from its counters read after each ``generate_next_token()``
    (module docstring)."""

    def __init__(self):
        self.before = {k: 0 for k in _STAT_KEYS}
        self.per_round: list = []
        self.pending = 0  # tokens of the last round still to be drained

    def step(self, stats: Mapping) -> None:
        """Account for one ``generate_next_token()`` given the generator's counters after it.

        >>> log = RoundLog()
        >>> for s in ({"rounds": 1, "draft_tokens_accepted": 2}, {"rounds": 1, "draft_tokens_accepted": 2},
        ...           {"rounds": 1, "draft_tokens_accepted": 2}, {"rounds": 1, "draft_tokens_accepted": 2},
        ...           {"rounds": 2, "draft_tokens_accepted": 2}):
        ...     log.step(s)
        >>> log.per_round  # a round of 2 (three tokens), a plain step, a round of 0
        [2, 0, 0]
        """
        rounds = int(stats.get("rounds", 0)) - self.before["rounds"]
        accepted = int(stats.get("draft_tokens_accepted", 0)) - self.before["draft_tokens_accepted"]
        if rounds > 1 or rounds < 0 or accepted < 0:
            raise RuntimeError(
                f"onnxruntime_genai's counters moved by {rounds} rounds and {accepted} accepted drafts in one "
                f"generate_next_token() (expected 0 or 1 round): {dict(stats)!r}"
            )
        if rounds == 1:
            self.per_round.append(accepted)
            self.pending = accepted
        elif self.pending > 0:
            self.pending -= 1
        else:
            self.per_round.append(0)
        self.before = {k: int(stats.get(k, 0)) for k in _STAT_KEYS}


def reported(totals: Mapping) -> Optional[dict]:
    """``ReportedMetrics`` fields from the engine's counters summed over the decoder's generators: ``rounds`` (every
    speculative round carries drafts), ``draft_tokens_evaluated`` (the drafts the target judged: the engine's own
    ``acceptance_rate`` is accepted over evaluated) and ``draft_tokens_accepted``. The engine's rates are per
    generator, never over the certifier's window, so none is passed on.

    >>> reported({"rounds": 3, "draft_tokens_evaluated": 7, "draft_tokens_accepted": 4})
    {'num_drafts': 3, 'num_draft_tokens': 7, 'num_accepted_tokens': 4}
    """
    return {
        "num_drafts": int(totals.get("rounds", 0)),
        "num_draft_tokens": int(totals.get("draft_tokens_evaluated", 0)),
        "num_accepted_tokens": int(totals.get("draft_tokens_accepted", 0)),
    }
