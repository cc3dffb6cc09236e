"""Draw outcomes from the decoder under test and validate each one against the protocol."""

from __future__ import annotations

import contextlib
import time
import zlib
from collections import Counter
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Optional

from specverify.certification.run.bulk import gc_paused
from specverify.certification.run.tally import Draws, Tally, _slack, merge_draws
from specverify.errors import ProtocolViolation
from specverify.metrics.acceptance import consistency_violation
from specverify.oracles.pairs import ModelPair
from specverify.protocol import Completion, Request, merged_state

__all__ = ["Session", "DecoderHandle", "Draws", "Tally", "merge_draws", "scenario_seed", "CHUNK"]

CHUNK = 8192  # requests per call on the slow path at most (per-call overhead amortised; ~10 MB of objects)
FIRST_CALL = 256  # requests in the first call of a loop; later calls grow with the decoder's measured speed
FIRST_SAMPLE = 256  # draws in the first decoder.sample call of a draw; later ones are sized from its speed
FIXED_SAMPLE = 4096  # draws per decoder.sample call of a decoder without the ``start`` offset (fixed: its seeded
#                      counts depend on where the calls split, so the split never depends on timing)
SAMPLE_SHARE = 8  # a decoder.sample call is sized to take about 1/8 of the per-call time limit
CALLS_AT_ONCE = 256  # calls of Session.call_each sent to the worker in one message (each checked before the next 256)


def _even(size: int) -> int:
    """``size`` rounded down to even when above 1 (call sizes stay even: collision pairs never straddle calls)."""
    return size - size % 2 if size > 1 else size


_now = time.perf_counter  # the clock that sizes decoder.sample calls (a module attribute, so tests can replace it)


def chunk_seed(seed: int, start: int) -> int:
    """The seed of the chunk of draws that starts at draw ``start`` of a seeded request, for a decoder whose
    ``sample`` takes no offset: the request's own seed for the first chunk, a 63-bit mix of (seed, start) after."""
    if start == 0:
        return seed
    import numpy as np

    return int(np.random.SeedSequence([seed, start]).generate_state(1, np.uint64)[0] >> np.uint64(1))


def _validate():
    """The protocol checks (``validate.py``), imported on the first call: they use the oracle's finish rule (torch),
    and listing scenarios or building a run must not import it."""
    from specverify.certification.run import validate

    return validate


def scenario_seed(seed: int, name: str, salt: int = 0) -> int:
    """A 63-bit request seed for (certification seed, scenario), stable across runs and selections."""
    return (seed * 1_000_003 + zlib.crc32(name.encode()) * 7919 + salt) % (2**63)


@dataclass(frozen=True)
class DecoderHandle:
    """The decoder the factory made for one model pair: what it declares and whether it has the fast path."""

    pair: ModelPair
    capabilities: frozenset
    has_sample: bool
    sample_start: bool = False  # decoder.sample takes the draw offset ``start`` (docs/adapters.md)
    draft_law: str = "model"  # decoder.draft_law (specverify.protocol.draft_law_of)
    prefill_tokens: Optional[int] = None  # decoder.prefill_tokens (None: inferred from the counts)
    engine: Optional[dict] = None  # decoder.engine_info (specverify.protocol.engine_of)
    reports_metrics: bool = False  # has decoder.reported_metrics() (the counters check, counters_check.py)
    fixed_gamma: bool = False  # decoder.fixed_gamma (protocol.fixed_gamma_of): same-γ neighbours, greedy γ by γ
    call_size: Optional[tuple] = None  # decoder.call_size (protocol.call_size_of): (preferred, maximum) per call

    def requests_per_call(self, chunk: Optional[int] = None) -> int:
        """The most requests one call may take: 1 without ``batch``; else ``chunk`` (default ``CHUNK``), never
        above the decoder's declared maximum (``call_size``); a declared maximum is the default."""
        if "batch" not in self.capabilities:
            return 1
        if self.call_size is None:
            return CHUNK if chunk is None else chunk
        return self.call_size[1] if chunk is None else min(chunk, self.call_size[1])

    def first_call(self, chunk: int) -> int:
        """Requests in the first call of a loop of at most ``chunk`` per call: the declared preferred size, else
        ``FIRST_CALL``."""
        return min(chunk, FIRST_CALL if self.call_size is None else self.call_size[0])

    @property
    def seeded(self) -> bool:
        return "seed" in self.capabilities


class Session:
    """The decoder under test for one certification: one decoder per model pair, created on first use."""

    def __init__(self, runner):
        self.runner = runner
        self._made: dict = {}
        # what was already found valid, per model pair (the checks read its vocabulary and EOS): completions'
        # (tokens, reason, params) and accepted shapes, and the fast path's outcomes per params
        self._valid: dict = {}  # pair spec -> set
        self._valid_outcomes: dict = {}  # (pair spec, params) -> set of (tokens, reason)
        self.counters = None  # the open CounterScope of the scenario being run (counters_check.py), if any
        self.journal = None  # the resume file's journal of the scenario being run (resume.py), if any
        self.on_draws = None  # called (draws done, draws asked for) after every call of a draw (progress lines)
        self._released: dict = {}  # pair spec -> its decoder's engine_info when it was closed (run_engine_info)

    def decoder(self, scenario) -> DecoderHandle:
        spec = scenario.pair
        if spec not in self._made:
            pair = scenario.models()
            made = self.runner.request("make", spec, pair.target, pair.draft)
            made["capabilities"] = frozenset(made["capabilities"])
            self._made[spec] = DecoderHandle(pair, **made)
        return self._made[spec]

    def release_unused(self, upcoming: Iterable, keep: Iterable = ()) -> None:
        """Close (``decoder.close()``, DESIGN: optional) every decoder whose model pair no scenario in ``upcoming``
        or ``keep`` uses: engines hold memory, and scenarios are ordered by pair. A pair needed again is re-made."""
        needed = {sc.pair for sc in upcoming} | set(keep)
        for spec in [s for s in self._made if s not in needed]:
            self._released[spec] = self._engine_info_of(self._made.pop(spec))  # its state counts for the run
            self.runner.request("release", spec)

    def engine_info(self, scenario) -> Optional[dict]:
        """The scenario's decoder's ``engine_info`` at the end of the run (an adapter may learn its effective
        configuration only once the engine ran); its value at set-up when asking fails."""
        handle = self.decoder(scenario)
        try:
            return self.runner.request("engine_info", handle.pair.spec)
        except Exception:  # noqa: BLE001 - a description of the engine, never evidence for the verdict
            return handle.engine

    def _engine_info_of(self, handle: DecoderHandle) -> Optional[dict]:
        try:
            return self.runner.request("engine_info", handle.pair.spec)
        except Exception:  # noqa: BLE001 - a description of the engine, never evidence for the verdict
            return handle.engine

    def run_engine_info(self, scenario) -> Optional[dict]:
        """The ``engine_info`` of the run, after the calls: ``scenario``'s decoder's (as closed, if it was closed:
        never a fresh one made to ask), with ``state`` over every decoder of the run, each key the largest value
        one decoder reached (``EngineConfig.reaches`` asks whether the state was reached; a decoder closed when
        the run moved to another model pair counts as it was then)."""
        spec = scenario.pair
        records = dict(self._released)
        records.update({s: self._engine_info_of(h) for s, h in self._made.items()})
        info = records.get(spec)
        if info is None:
            info = self.engine_info(scenario)
        states = [r.get("state") for r in records.values() if isinstance(r, dict) and isinstance(r.get("state"), dict)]
        if not isinstance(info, dict) or not states:
            return info
        return {**info, "state": merged_state(states)}

    def engine_state(self) -> dict:
        """``engine_info["state"]`` over every decoder made so far (closed ones as they were then), each key the
        largest value one decoder reached (``protocol.merged_state``); ``{}`` when none reports a state."""
        records = dict(self._released)
        records.update({s: self._engine_info_of(h) for s, h in self._made.items()})
        return merged_state(r.get("state") for r in records.values() if isinstance(r, dict))

    def timings(self, scenario) -> Optional[dict]:
        """The optional ``decoder.timings()`` of the scenario's decoder (None when it has none, or on failure:
        timings are evidence for the speed model, never for the verdict)."""
        try:
            return self.runner.request("timings", self.decoder(scenario).pair.spec)
        except Exception:  # noqa: BLE001 - a failing timings() costs the speed model its input, nothing else
            return None

    @contextlib.contextmanager
    def counting(self) -> Iterator:
        """Open a ``CounterScope`` for one scenario's calls; yields it (``scope.close(...)`` gives the evidence)."""
        from specverify.certification.results.counters import CounterScope

        scope = CounterScope(self.reported_metrics)
        self.counters = scope
        try:
            yield scope
        finally:
            self.counters = None

    def handles(self) -> dict:
        """The decoders made so far, by model pair."""
        return dict(self._made)

    def reported_metrics(self, handle: DecoderHandle) -> object:
        """The decoder's ``reported_metrics()`` now, checked (a ``ReportedMetrics`` or None)."""
        return self.runner.request("reported_metrics", handle.pair.spec)

    def _counted(self, handle: DecoderHandle):
        """The open scope when ``handle`` reports counters (its window opened before the call), else None."""
        scope = self.counters
        if scope is None or not handle.reports_metrics:
            return None
        scope.opening(handle)
        return scope

    def call(self, handle: DecoderHandle, requests: list) -> list:
        """One decoder call, validated: completions in order, each obeying the protocol."""
        scope = self._counted(handle)
        requests = list(requests)
        return self._checked(handle, scope, requests, self.runner.request("call", handle.pair.spec, requests))

    def call_each(self, handle: DecoderHandle, batches: list) -> list:
        """One decoder call per batch of ``batches``, in order, each validated as :meth:`call`'s: the completion
        lists. A runner with ``calls`` (the worker process) gets them ``CALLS_AT_ONCE`` to a message and answers
        call by call, so the decoder never waits on this process between them; the decoder sees the same calls
        either way. The first failure in call order is raised (a protocol violation of an earlier call before a
        later call's crash)."""
        batches = [list(b) for b in batches]
        many = getattr(self.runner, "calls", None)
        if not callable(many) or len(batches) < 2:
            return [self.call(handle, requests) for requests in batches]
        scope, out = self._counted(handle), []
        for start in range(0, len(batches), CALLS_AT_ONCE):
            part = batches[start : start + CALLS_AT_ONCE]
            answers, failure = many(handle.pair.spec, part)
            out += [self._checked(handle, scope, requests, got) for requests, got in zip(part, answers)]
            if failure is not None:
                raise failure
        return out

    def _checked(self, handle: DecoderHandle, scope, requests: list, completions: list) -> list:
        """``completions`` of one call of ``requests``, checked against the protocol and counted."""
        if len(completions) != len(requests):
            raise ProtocolViolation(f"wrong count: {len(completions)} completions for {len(requests)} requests")
        with gc_paused():
            known = self._valid.setdefault(handle.pair.spec, set())
            problem = _validate().completions_violation(completions, requests, handle.pair.vocab, known_ok=known)
        if problem:
            raise ProtocolViolation(problem)
        if scope is not None:
            scope.add_completions(handle, requests, completions)
        return completions

    def calls(self, handle: DecoderHandle, requests: Iterable[Request], chunk: int) -> Iterator[tuple[list, list]]:
        """Every request through :meth:`call`, a call at a time: yields ``(requests, completions)`` per call. Calls
        start at ``FIRST_CALL`` requests (the decoder's preferred size where it declares ``call_size``) and double
        while a call takes under a twentieth of the per-call time limit, up to ``chunk`` (never above a declared
        maximum; a slow decoder is never handed 8,192 requests under a 120 s limit). Sizes stay even, so the
        collision scenario's pairs never straddle two calls."""
        limit = getattr(self.runner, "timeout_s", None) or 120.0
        if handle.call_size is not None:  # the declared maximum, kept even (a collision pair never straddles calls)
            chunk = max(1, _even(min(chunk, handle.call_size[1])))
        size, batch = _even(handle.first_call(chunk)), []
        for request in requests:
            batch.append(request)
            if len(batch) == size:
                started = time.perf_counter()
                yield batch, self.call(handle, batch)
                if time.perf_counter() - started < limit / 20:
                    size = min(chunk, 2 * size)
                batch = []
        if batch:
            yield batch, self.call(handle, batch)

    def call_in_chunks(
        self, handle: DecoderHandle, requests: Iterable[Request], chunk: int
    ) -> Iterator[tuple[Request, Completion]]:
        """:meth:`calls`, yielded request by request with its completion, in order."""
        for batch, completions in self.calls(handle, requests, chunk):
            yield from zip(batch, completions)

    def draw(self, handle: DecoderHandle, request: Request, n: int, start: int = 0) -> Draws:
        """Draws ``start`` .. ``start + n - 1`` of ``request``'s stream of independent outcomes. Seeded requests:
        on the slow path draw i gets seed ``request.seed + i``; on the fast path ``decoder.sample`` is called in
        chunks (:meth:`_draw_fast`), so no call can outlast the per-call time limit because n is large. With a
        ``journal`` (``--resume``), the counts are recorded after every call and a recorded draw continues from
        its last recorded call."""
        entry = None if self.journal is None else self.journal.open(request, n, start)
        if handle.has_sample:
            return self._draw_fast(handle, request, n, start, entry)
        seeded = handle.seeded and request.seed is not None
        done = entry.done if entry is not None and entry.done else 0
        if done == n:
            return entry.state()
        requests = (
            Request(
                request.prompt,
                request.params,
                request.num_draft_tokens,
                seed=(request.seed + start + i) % 2**63 if seeded else None,
            )
            for i in range(done, n)
        )
        tally = entry.state() if done else Tally(request.num_draft_tokens, handle.prefill_tokens, handle.draft_law)
        for batch, completions in self.calls(handle, requests, handle.requests_per_call()):
            tally.add_all(completions)
            done += len(batch)
            if entry is not None:
                entry.save(tally if done < n else tally.draws(n), done)
            if self.on_draws is not None:
                self.on_draws(start + done, start + n)
        return tally.draws(n)

    def _draw_fast(self, handle: DecoderHandle, request: Request, n: int, start: int = 0, entry=None) -> Draws:
        """``decoder.sample`` in chunks. With the ``start`` offset the first call takes ``FIRST_SAMPLE`` draws and
        each later one what the measured speed fits in ``1 / SAMPLE_SHARE`` of the time limit: draw i depends on
        (seed, i) only, so the split changes no count. Without it every call takes ``FIXED_SAMPLE`` draws and a
        seeded request's chunk gets :func:`chunk_seed` (a fixed split, so the same seed gives the same counts)."""
        limit = getattr(self.runner, "timeout_s", None) or 120.0
        draws, done, size = None, 0, FIRST_SAMPLE if handle.sample_start else FIXED_SAMPLE
        if entry is not None and entry.done:  # recorded draws: a fixed split resumes at a chunk's start
            draws, done = entry.state(), entry.done
        while done < n or draws is None:
            take = min(size, n - done)
            began = _now()
            if handle.sample_start:
                part = self._sample_once(handle, request, take, start + done)
            else:
                seed = None if request.seed is None else chunk_seed(request.seed, start + done)
                part = self._sample_once(handle, replace(request, seed=seed), take, 0)
            draws = merge_draws(draws, part)
            done += take
            if entry is not None:
                entry.save(draws, done)
            if self.on_draws is not None:
                self.on_draws(start + done, start + n)
            if handle.sample_start:
                rate = take / max(_now() - began, 1e-6)
                size = max(32, int(rate * limit / SAMPLE_SHARE))
        return draws

    def _known_outcomes(self, handle: DecoderHandle, params) -> Optional[set]:
        """The outcomes already found valid on ``handle``'s pair under ``params`` on the fast path (each call of a
        scenario's looks returns mostly the same ones), or None where ``params`` cannot be a key (a grammar holds
        dicts)."""
        try:
            return self._valid_outcomes.setdefault((handle.pair.spec, params), set())
        except TypeError:
            return None

    def _sample_once(self, handle: DecoderHandle, request: Request, n: int, start: int) -> Draws:
        scope = self._counted(handle)
        result = self.runner.request("sample", handle.pair.spec, request, n, start)
        total = sum(result.outcomes.values())
        if total != n:
            raise ProtocolViolation(f"wrong count: decoder.sample returned {total} outcomes for n={n}")
        if any(c < 0 for c in result.outcomes.values()):
            raise ProtocolViolation("decoder.sample returned a negative count")
        known = self._known_outcomes(handle, request.params)
        fresh = result.outcomes.keys() - known if known is not None else result.outcomes.keys()
        if fresh:
            outcome_violation = _validate().outcome_violation
            for tokens, reason in (o for o in result.outcomes if o in fresh):  # in the decoder's order
                problem = outcome_violation(tokens, reason, handle.pair.vocab, request.params)
                if problem:
                    raise ProtocolViolation(problem)
            if known is not None:
                known |= fresh
        accepted = None
        if result.accepted is not None:
            accepted = Counter(result.accepted)
            bad = [a for a in accepted if not 0 <= a <= request.num_draft_tokens]
            if bad or sum(accepted.values()) != n:
                raise ProtocolViolation(f"accepted counts {dict(accepted)!r} are not n={n} values in [0, γ]")
        rounds = positions = violation = None
        if result.rounds is not None:
            rounds = Counter({int(m): int(c) for m, c in result.rounds.items()})
            positions = None if result.positions is None else tuple((int(v), int(a)) for v, a in result.positions)
            tokens = sum(len(t) * c for (t, _), c in result.outcomes.items())
            slack = _slack(handle.prefill_tokens, handle.draft_law)
            violation = consistency_violation(
                rounds, positions, requests=n, tokens=tokens, gamma=request.num_draft_tokens, first_round=accepted,
                prefill=slack,
            )  # fmt: skip
        if scope is not None:
            scope.add_counts(handle, request, result, n)
        prefill = handle.prefill_tokens or 0
        return Draws(
            Counter(result.outcomes), accepted, n, rounds=rounds, positions=positions, violation=violation,
            prefill=prefill,
        )  # fmt: skip
