"""Budgets allocate samples (core first) and say what each scenario could detect; sequential decisions stop early."""

import time

import specverify as sv
from specverify.certification import CORE
from specverify.certification.run.budget import allocate, allotted
from specverify.reference import make_decoder
from tests.certification import bad_decoders


def run(factory, scenarios, **kw):
    return sv.certify(factory, level="quick", scenarios=scenarios, isolation="none", **kw)


def test_allocation_serves_the_core_first_then_shares_pro_rata():
    sizes = {"a": 100, "core": 1000, "b": 300}
    assert allocate(sizes, {"core"}, 10_000) == {"a": 1.0, "core": 1.0, "b": 1.0}
    assert allocate(sizes, {"core"}, 1200) == {"a": 0.5, "core": 1.0, "b": 0.5}
    assert allocate(sizes, {"core"}, 500) == {"a": 0.0, "core": 0.5, "b": 0.0}
    assert allotted(10_000, 0.5) == 5000 and allotted(10_000, 0.01) == 0 and allotted(150, 1.0) == 150
    assert allotted(150, 0.3) == 150 and allotted(150, 0.0) == 0  # a plan this small is drawn whole or not at all


def test_max_samples_gives_the_core_its_plan_and_states_what_the_rest_detects():
    full = run(make_decoder, list(CORE), sequential=False)
    core_n = sum(s.n for s in full.scenarios if s.kind == "sampling")
    cert = run(make_decoder, list(CORE) + ["penalties"], max_samples=core_n + 120 + 6000, sequential=False)
    got = {s.name: s for s in cert.scenarios}
    assert all(got[name].n == got[name].planned_n for name in CORE if got[name].kind == "sampling")
    short = got["penalties"]
    assert short.covered and short.passed and 1000 < short.n < short.planned_n
    assert short.detectable_tv > 0.05  # what it could detect at the N it got, above the level's 0.05
    assert cert.verdict == "inconclusive" and "penalties: N = " in cert.reason and "detects TV" in cert.reason


def test_a_time_budget_on_a_slow_decoder_finishes_in_time_and_is_inconclusive():
    started = time.perf_counter()
    # the core's plans take ~10 s
    cert = run(bad_decoders.Slow, list(CORE) + ["penalties", "top-k"], budget_s=3.0, sequential=False)
    elapsed = time.perf_counter() - started
    assert elapsed < 3.0 + 4.0, elapsed  # the greedy scenario's fixed cost and exact laws are not allocated
    assert cert.verdict == "inconclusive" and "budget" in cert.reason
    assert any(s.covered and s.n < s.planned_n for s in cert.scenarios)


def test_sequential_passes_exact_decoders_early_and_rejects_bugs_early():
    fixed = run(make_decoder, ["temperature-1", "eos-in-block"], sequential=False)
    seq = run(make_decoder, ["temperature-1", "eos-in-block"])  # sequential looks: the default
    for a, b in zip(fixed.scenarios, seq.scenarios):
        assert b.passed and b.n < 0.7 * a.n and "sequential: early pass" in b.note, (b.name, b.n, a.n)
        assert b.detectable_tv == 0.05  # an early pass rules out the level's ε, not the TV its N alone detects
    bad = run("specverify.zoo:temperature_not_in_rejection", ["temperature-0.5"], sequential=True)
    assert bad.scenarios[0].passed is False and bad.scenarios[0].n <= 2000


def test_the_allocation_is_redone_as_the_run_goes():
    from specverify.certification.run.budget import Allocation

    plan = Allocation({"a": 100, "core": 1000, "b": 300}, {"core"}, 1200)
    assert plan.fraction("a") == 0.5 and plan.fraction("core") == 1.0
    plan.spend("a", 50)  # a stopped early: what it left goes to the others
    assert plan.fraction("b") == 150 / 300 and plan.fraction("core") == 1.0
    plan.spend("core", 400)  # core too (a sequential pass)
    assert plan.fraction("b") == 1.0 and plan.fraction("not-budgeted") == 1.0 and plan.fraction("a") == 0.0
    same = Allocation({"a": 100, "core": 1000, "b": 300}, {"core"}, 1200)
    same.spend("a", 50)
    same.spend("core", 1000)  # every share used in full: later shares are the ones allocated at the start
    assert same.fraction("b") == 0.5


def test_sequential_under_a_sample_budget_spends_its_savings_on_later_scenarios():
    scenarios = ["temperature-1", "eos-in-block"]  # planned N ~14.5k and ~15.3k at quick
    fixed = run(make_decoder, scenarios, max_samples=17_000, sequential=False)
    seq = run(make_decoder, scenarios, max_samples=17_000)
    assert fixed.verdict == "inconclusive" and all(s.n < s.planned_n for s in fixed.scenarios)  # both core: pro rata
    assert seq.verdict != "exact"  # exact needs the whole core (greedy too); the scenarios themselves are decided:
    for s in seq.scenarios:  # the first one's early pass, within its share, left the second enough for its own
        assert s.passed and "sequential: early pass" in s.note, (s.name, s.n, s.planned_n, s.note)
