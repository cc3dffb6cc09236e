"""No engine restart between scenarios that share (pair, γ, options): the certifier makes one decoder per model pair
and configuration in a run and keeps it until no part left needs it, and it orders the scenarios so that a decoder
which fixes γ per engine (``fixed_gamma``: vLLM keeps one live engine and restarts it at every change of γ) meets each
(pair, γ) of the single-γ scenarios in one stretch. A counting factory stands for such an engine."""

import pytest

from specverify import certify
from specverify.certification.matrix.scenarios import SCENARIOS
from specverify.reference import make_decoder

MADE: list = []  # (pair, options) per factory call
STARTS: list = []  # (pair, γ) per simulated engine start
_LIVE: list = [None]  # the one live engine's (pair, γ), as vLLM's adapter keeps it


class _OneEnginePerGamma:
    """The reference behind a simulated engine per γ: a call or sample of another (pair, γ) than the live one
    restarts it."""

    fixed_gamma = True

    def __init__(self, target, draft, **options):
        self.pair = (id(target), id(draft))
        self.inner = make_decoder(target, draft)
        self.capabilities = self.inner.capabilities
        MADE.append((self.pair, tuple(sorted(options.items()))))

    def _engine(self, gammas) -> None:
        assert len(gammas) == 1, f"a call of a fixed-γ decoder mixed γ {sorted(gammas)}"
        key = (self.pair, next(iter(gammas)))
        if _LIVE[0] != key:
            _LIVE[0] = key
            STARTS.append(key)

    def __call__(self, requests):
        self._engine({r.num_draft_tokens for r in requests})
        return self.inner(requests)

    def sample(self, request, n, start=0):
        self._engine({request.num_draft_tokens})
        return self.inner.sample(request, n, start)


def counting(target, draft, **options):
    return _OneEnginePerGamma(target, draft, **options)


def _mark(line: str) -> None:
    if "the reproducibility check" in line:  # the run-level check comes last, on the first scenario's pair
        STARTS.append("reproducibility")


def _run(scenarios, **options):
    """Certify ``scenarios`` with the counting factory; the engine starts made before the reproducibility check."""
    MADE.clear(), STARTS.clear()
    _LIVE[0] = None
    cert = certify(counting, level="quick", seed=0, scenarios=scenarios, isolation="none", progress=_mark, **options)
    assert cert.verdict in ("exact", "inconclusive") and not cert.failures, cert.reason
    assert "reproducibility" in STARTS, STARTS
    return STARTS[: STARTS.index("reproducibility")]


# four model pairs (penalties: vocabulary 5; near-deterministic: another target; full-acceptance-bonus: another
# draft), γ 1, 2, 3 and 5, interleaved
SINGLE_GAMMA = ["temperature-1", "penalties", "gamma-1", "near-deterministic", "full-acceptance-bonus",
                "temperature-0.5", "gamma-5", "top-k"]  # fmt: skip


def test_one_decoder_per_pair_and_one_engine_start_per_pair_and_gamma():
    """The reproducibility check, last, may start the first pair's engine once more (its timings and state are read
    after every scenario's calls); between scenarios no (pair, γ) starts twice."""
    starts = _run(SINGLE_GAMMA)
    pairs = {SCENARIOS[n].pair for n in SINGLE_GAMMA}
    assert len(MADE) == len(set(MADE)) == len(pairs) == 4, MADE
    wanted = {(SCENARIOS[n].pair, SCENARIOS[n].num_draft_tokens) for n in SINGLE_GAMMA}
    restarted = sorted({k for k in starts if starts.count(k) > 1})
    assert not restarted, f"engines restarted for {restarted}: starts in order {starts}"
    assert len(starts) == len(wanted) == 6, starts


def test_a_budget_keeps_matrix_order_yet_never_makes_a_decoder_twice():
    """Under a budget the scenarios run in matrix order (core first) and pairs interleave: every pair's decoder is
    still made once and kept until its last scenario."""
    _run(SINGLE_GAMMA, max_samples=40_000)
    assert len(MADE) == len(set(MADE)) == 4, MADE


@pytest.mark.parametrize("greedy", [["greedy", "greedy-penalties"]])
def test_greedy_scenarios_start_each_gamma_once_per_pair(greedy):
    """The greedy scenarios of a pair share their calls γ by γ: γ 1 to 4 start once each on each pair."""
    starts = _run(greedy)
    restarted = sorted({k for k in starts if starts.count(k) > 1})
    assert not restarted, f"engines restarted for {restarted}: starts in order {starts}"
    assert len({pair for pair, _ in starts}) == len({SCENARIOS[n].pair for n in greedy}) == 2, starts
    assert len(starts) == 8 and len(MADE) == len(set(MADE)), (starts, MADE)  # γ 1 to 4 on each pair


def test_a_mixed_scenario_of_two_gammas_starts_each_gamma_once():
    """``mixed-kinds`` holds members at γ 3 and γ 1: a fixed-γ decoder gets them γ by γ (every call of one γ, the
    kinds still mixed in each), so its engine starts once per γ instead of switching at every call."""
    starts = _run(["mixed-kinds"])
    members = [SCENARIOS[m] for m in SCENARIOS["mixed-kinds"].members]
    assert {m.num_draft_tokens for m in members} == {1, 3}
    assert [gamma for _, gamma in starts] == [3, 1], starts
