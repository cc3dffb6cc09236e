"""Draw outcomes from the decoder under test and validate each one against the protocol."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np

from specverify.certify.validate import completion_violation, outcome_violation
from specverify.protocol import Request

__all__ = ["Session", "scenario_seed", "ProtocolBreak", "counts_vector"]

CHUNK = 8192  # requests per call on the slow path (per-call overhead amortised; ~10 MB of objects)


class ProtocolBreak(Exception):
    """A protocol violation found while collecting (verdict rule 1)."""


def scenario_seed(seed: int, name: str, salt: int = 0) -> int:
    """A 63-bit request seed for (certification seed, scenario), stable across runs and selections."""
    return (seed * 1_000_003 + zlib.crc32(name.encode()) * 7919 + salt) % (2**63)


class Session:
    """The decoder under test for one certification: one decoder per model pair, created on first use."""

    def __init__(self, runner):
        self.runner = runner
        self._made = {}
        self._valid = set()  # outcomes already validated, per params

    def decoder(self, scenario):
        key = (scenario.vocab_size, scenario.target_seed, scenario.target_scale, scenario.target_zero,
               scenario.eos_bias, scenario.draft_distance, scenario.draft_seed, scenario.draft_zero)
        if key not in self._made:
            target, draft = scenario.models()
            caps, has_sample = self.runner.request("make", key, target, draft)
            self._made[key] = (frozenset(caps), has_sample)
        return key, self._made[key]

    def call(self, key, requests, vocab) -> list:
        """One decoder call, validated: completions in order, each obeying the protocol."""
        completions = self.runner.request("call", key, list(requests))
        if len(completions) != len(requests):
            raise ProtocolBreak(f"wrong count: {len(completions)} completions for {len(requests)} requests")
        for req, comp in zip(requests, completions):
            problem = completion_violation(comp, req, vocab, known_ok=self._valid)
            if problem:
                raise ProtocolBreak(problem)
        return completions

    def draw(self, key, caps, has_sample, request: Request, n: int, vocab):
        """``n`` independent outcomes of ``request``: (Counter of outcomes, Counter of first-round accepted)."""
        if has_sample:
            return self._draw_fast(key, request, n, vocab)
        outcomes, accepted = Counter(), Counter()
        batch = CHUNK if "batch" in caps else 1
        seeded = "seed" in caps and request.seed is not None
        done = 0
        while done < n:
            size = min(batch, n - done)
            reqs = [Request(request.prompt, request.params, request.num_draft_tokens,
                            seed=(request.seed + done + i) % 2**63 if seeded else None) for i in range(size)]
            for comp in self.call(key, reqs, vocab):
                outcomes[(comp.tokens, comp.finish_reason)] += 1
                if comp.accepted:
                    accepted[comp.accepted[0]] += 1
            done += size
        return outcomes, (accepted or None)

    def _draw_fast(self, key, request, n, vocab):
        result = self.runner.request("sample", key, request, n)
        total = sum(result.outcomes.values())
        if total != n:
            raise ProtocolBreak(f"wrong count: decoder.sample returned {total} outcomes for n={n}")
        if any(c < 0 for c in result.outcomes.values()):
            raise ProtocolBreak("decoder.sample returned a negative count")
        for tokens, reason in result.outcomes:
            problem = outcome_violation(tokens, reason, vocab, request.params)
            if problem:
                raise ProtocolBreak(problem)
        accepted = None
        if result.accepted is not None:
            accepted = Counter(result.accepted)
            bad = [a for a in accepted if not 0 <= a <= request.num_draft_tokens]
            if bad or sum(accepted.values()) != n:
                raise ProtocolBreak(f"accepted counts {dict(accepted)!r} are not n={n} values in [0, γ]")
        return Counter(result.outcomes), accepted


def counts_vector(outcomes: Counter, law) -> tuple[np.ndarray, list]:
    """Counts aligned with ``law.outcomes`` and the observed outcomes of exact probability 0."""
    vec = np.zeros(len(law), dtype=np.int64)
    impossible = []
    for outcome, count in outcomes.items():
        i = law.index(outcome)
        if i < 0:
            impossible.append((outcome, count))
        else:
            vec[i] += count
    return vec, impossible

