"""Draw outcomes from the decoder under test and validate each one against the protocol."""

from __future__ import annotations

import time
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from specverify.certification.validate import completion_violation, outcome_violation
from specverify.errors import ProtocolViolation
from specverify.oracles.pairs import ModelPair
from specverify.protocol import Completion, Request

__all__ = ["Session", "DecoderHandle", "Draws", "scenario_seed", "CHUNK"]

CHUNK = 8192  # requests per call on the slow path at most (per-call overhead amortised; ~10 MB of objects)
FIRST_CALL = 256  # requests in the first call of a loop; later calls grow with the decoder's measured speed


def scenario_seed(seed: int, name: str, salt: int = 0) -> int:
    """A 63-bit request seed for (certification seed, scenario), stable across runs and selections."""
    return (seed * 1_000_003 + zlib.crc32(name.encode()) * 7919 + salt) % (2**63)


@dataclass(frozen=True)
class DecoderHandle:
    """The decoder the factory made for one model pair: what it declares and whether it has the fast path."""

    pair: ModelPair
    capabilities: frozenset
    has_sample: bool

    def requests_per_call(self, chunk: int = CHUNK) -> int:
        """``chunk`` when the decoder declares ``batch``, else 1."""
        return chunk if "batch" in self.capabilities else 1

    @property
    def seeded(self) -> bool:
        return "seed" in self.capabilities


@dataclass(frozen=True)
class Draws:
    """``n`` outcomes of one request shape: counts per (tokens, finish_reason) and of the first round's accepted
    drafts (None when the decoder does not report them)."""

    outcomes: Counter
    accepted: Optional[Counter]
    n: int


class Session:
    """The decoder under test for one certification: one decoder per model pair, created on first use."""

    def __init__(self, runner):
        self.runner = runner
        self._made: dict = {}
        self._valid: set = set()  # outcomes already validated, per params

    def decoder(self, scenario) -> DecoderHandle:
        spec = scenario.pair
        if spec not in self._made:
            pair = scenario.models()
            caps, has_sample = self.runner.request("make", spec, pair.target, pair.draft)
            self._made[spec] = DecoderHandle(pair, frozenset(caps), has_sample)
        return self._made[spec]

    def release_unused(self, upcoming: Iterable, keep: Iterable = ()) -> None:
        """Close (``decoder.close()``, DESIGN: optional) every decoder whose model pair no scenario in ``upcoming``
        or ``keep`` uses: engines hold memory, and scenarios are ordered by pair. A pair needed again is re-made."""
        needed = {sc.pair for sc in upcoming} | set(keep)
        for spec in [s for s in self._made if s not in needed]:
            del self._made[spec]
            self.runner.request("release", spec)

    def call(self, handle: DecoderHandle, requests: list) -> list:
        """One decoder call, validated: completions in order, each obeying the protocol."""
        completions = self.runner.request("call", handle.pair.spec, list(requests))
        if len(completions) != len(requests):
            raise ProtocolViolation(f"wrong count: {len(completions)} completions for {len(requests)} requests")
        vocab = handle.pair.vocab
        for req, comp in zip(requests, completions):
            problem = completion_violation(comp, req, vocab, known_ok=self._valid)
            if problem:
                raise ProtocolViolation(problem)
        return completions

    def call_in_chunks(
        self, handle: DecoderHandle, requests: Iterable[Request], chunk: int
    ) -> Iterator[tuple[Request, Completion]]:
        """Every request through :meth:`call`, yielded with its completion in order: calls start at
        ``FIRST_CALL`` requests and double while a call takes under a twentieth of the per-call time limit, up to
        ``chunk`` (a slow decoder is never handed 8,192 requests under a 120 s limit). Sizes stay even, so the
        collision scenario's pairs never straddle two calls."""
        limit = getattr(self.runner, "timeout_s", None) or 120.0
        size, batch = min(chunk, FIRST_CALL), []
        for request in requests:
            batch.append(request)
            if len(batch) == size:
                started = time.perf_counter()
                yield from zip(batch, self.call(handle, batch))
                if time.perf_counter() - started < limit / 20:
                    size = min(chunk, 2 * size)
                batch = []
        if batch:
            yield from zip(batch, self.call(handle, batch))

    def draw(self, handle: DecoderHandle, request: Request, n: int) -> Draws:
        """``n`` independent outcomes of ``request`` (seeded requests get seeds ``request.seed + i``)."""
        if handle.has_sample:
            return self._draw_fast(handle, request, n)
        seeded = handle.seeded and request.seed is not None
        requests = (
            Request(
                request.prompt,
                request.params,
                request.num_draft_tokens,
                seed=(request.seed + i) % 2**63 if seeded else None,
            )
            for i in range(n)
        )
        outcomes, accepted = Counter(), Counter()
        for _, comp in self.call_in_chunks(handle, requests, handle.requests_per_call()):
            outcomes[(comp.tokens, comp.finish_reason)] += 1
            if comp.accepted:
                accepted[comp.accepted[0]] += 1
        return Draws(outcomes, accepted or None, n)

    def _draw_fast(self, handle: DecoderHandle, request: Request, n: int) -> Draws:
        result = self.runner.request("sample", handle.pair.spec, request, n)
        total = sum(result.outcomes.values())
        if total != n:
            raise ProtocolViolation(f"wrong count: decoder.sample returned {total} outcomes for n={n}")
        if any(c < 0 for c in result.outcomes.values()):
            raise ProtocolViolation("decoder.sample returned a negative count")
        for tokens, reason in result.outcomes:
            problem = outcome_violation(tokens, reason, handle.pair.vocab, request.params)
            if problem:
                raise ProtocolViolation(problem)
        accepted = None
        if result.accepted is not None:
            accepted = Counter(result.accepted)
            bad = [a for a in accepted if not 0 <= a <= request.num_draft_tokens]
            if bad or sum(accepted.values()) != n:
                raise ProtocolViolation(f"accepted counts {dict(accepted)!r} are not n={n} values in [0, γ]")
        return Draws(Counter(result.outcomes), accepted, n)
