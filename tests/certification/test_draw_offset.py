"""The draw offset: ``decoder.sample(request, n, start)`` in chunks the certifier sizes; the same counts however
split."""

from collections import Counter

import pytest

import specverify as sv
from specverify.certification.matrix.scenarios import SCENARIOS
from specverify.certification.run import collect
from specverify.certification.run.collect import DecoderHandle, Session, chunk_seed
from specverify.certification.run.runner import takes_start
from specverify.protocol import Request


class _Clock:
    """A fake ``time.perf_counter``: each ``sample`` call advances it by n / rate seconds."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class _Runner:
    """A runner double: records every ``sample`` call's (n, start, seed) and answers from ``decoder``."""

    def __init__(self, decoder, clock=None, rate=None, timeout_s=120.0):
        self.decoder, self.calls, self.clock, self.rate, self.timeout_s = decoder, [], clock, rate, timeout_s

    def request(self, op, spec, request, n, start=0):
        assert op == "sample"
        self.calls.append((n, start, request.seed))
        if self.clock is not None:
            self.clock.now += n / self.rate
        if start:
            return self.decoder.sample(request, n, start=start)
        return self.decoder.sample(request, n)


def _scenario():
    return SCENARIOS["temperature-1"]


def _handle(decoder, sample_start=None):
    pair = _scenario().models()
    start = takes_start(decoder.sample) if sample_start is None else sample_start
    return DecoderHandle(pair, frozenset(decoder.capabilities), True, sample_start=start)


def _request(seed=123):
    sc = _scenario()
    return Request(sc.prompt, sc.params, sc.num_draft_tokens, seed=seed)


def _decoder():
    pair = _scenario().models()
    return sv.make_decoder(pair.target, pair.draft)


def test_a_decoder_with_start_gives_the_same_counts_however_the_draws_are_split(monkeypatch):
    decoder = _decoder()
    whole = decoder.sample(_request(), 5000)
    monkeypatch.setattr(collect, "FIRST_SAMPLE", 300)
    clock = _Clock()
    monkeypatch.setattr(collect, "_now", clock)
    runner = _Runner(decoder, clock, rate=1000.0, timeout_s=2.0)  # 1000 draws/s: calls of 250 draws
    draws = Session(runner).draw(_handle(decoder), _request(), 5000)
    assert len(runner.calls) > 5 and all(n <= 300 for n, _, _ in runner.calls), runner.calls
    assert [start for _, start, _ in runner.calls] == [sum(n for n, _, _ in runner.calls[:i]) for i in
                                                        range(len(runner.calls))]  # fmt: skip
    assert draws.n == 5000 and draws.outcomes == Counter(whole.outcomes)
    assert draws.accepted == Counter(whole.accepted)
    # a stretch that starts later is that part of the stream: draws 2000..4999 = whole - draws 0..1999
    head = decoder.sample(_request(), 2000)
    tail = Session(_Runner(decoder)).draw(_handle(decoder), _request(), 3000, start=2000)
    assert tail.outcomes == Counter(whole.outcomes) - Counter(head.outcomes)


def test_calls_grow_with_the_measured_speed_and_stay_under_the_time_limit(monkeypatch):
    decoder = _decoder()
    clock = _Clock()
    monkeypatch.setattr(collect, "_now", clock)
    runner = _Runner(decoder, clock, rate=200.0, timeout_s=120.0)  # a slow decoder: 200 draws/s
    Session(runner).draw(_handle(decoder), _request(), 20_000)
    sizes = [n for n, _, _ in runner.calls]
    assert sizes[0] == collect.FIRST_SAMPLE and sum(sizes) == 20_000
    assert max(sizes) / 200.0 <= 120.0 / collect.SAMPLE_SHARE + 1e-9  # no call takes more than 1/8 of the limit
    assert len(sizes) > 5  # the 14919-draw single call that timed out a correct decoder is gone


class _NoStart:
    """A fast-path decoder whose ``sample`` takes no offset (the two-argument form)."""

    def __init__(self, inner):
        self.inner, self.capabilities = inner, inner.capabilities

    def sample(self, request, n):
        return self.inner.sample(request, n)


def test_a_decoder_without_start_gets_fixed_chunks_with_derived_seeds():
    decoder = _NoStart(_decoder())
    assert not takes_start(decoder.sample) and takes_start(_decoder().sample)
    runner = _Runner(decoder)
    draws = Session(runner).draw(_handle(decoder), _request(7), 10_000)
    sizes = [n for n, _, _ in runner.calls]
    assert sizes == [collect.FIXED_SAMPLE, collect.FIXED_SAMPLE, 10_000 - 2 * collect.FIXED_SAMPLE]
    seeds = [seed for _, _, seed in runner.calls]
    assert seeds == [7, chunk_seed(7, collect.FIXED_SAMPLE), chunk_seed(7, 2 * collect.FIXED_SAMPLE)]
    assert len(set(seeds)) == 3 and all(0 <= s < 2**63 for s in seeds)
    again = Session(_Runner(decoder)).draw(_handle(decoder), _request(7), 10_000)
    assert again.outcomes == draws.outcomes  # a fixed split: the same seed gives the same counts


def test_the_slow_path_numbers_draws_from_start():
    pair = _scenario().models()
    inner = sv.make_decoder(pair.target, pair.draft)
    seen = []

    class CallRunner:
        timeout_s = 120.0

        def request(self, op, spec, requests):
            assert op == "call"
            seen.extend(r.seed for r in requests)
            return inner(requests)

    handle = DecoderHandle(pair, frozenset({"batch", "seed"}), False)
    Session(CallRunner()).draw(handle, _request(1000), 10, start=5)
    assert seen == list(range(1005, 1015))


def test_sample_start_is_validated():
    with pytest.raises(sv.InvalidArgument, match="start=-1"):
        sv.draw_seeds(3, 4, start=-1)
    with pytest.raises(sv.InvalidArgument, match="n=2.5"):
        sv.draw_seeds(3, 2.5)
