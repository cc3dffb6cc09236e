"""The ``collision`` check: disjoint pairs (2i, 2i+1) of identical unseeded requests in one call collide at rate
Σp² when the requests are independent (docs/design.md, verdict rule 3)."""

from __future__ import annotations

import time
from collections import Counter

from specverify.certification.checks.judge import decode
from specverify.certification.matrix.laws import law_of
from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import Level, ScenarioKind
from specverify.protocol import Request

__all__ = ["CollisionCheck", "COLLISION_PAIRS", "COLLISION_CHUNK", "blame", "law_pvalue"]

COLLISION_PAIRS = {Level.QUICK: 2000, Level.STANDARD: 5000, Level.THOROUGH: 10000}
COLLISION_CHUNK = 2048  # requests per call: pairs never straddle two calls


def law_pvalue(law, firsts: Counter) -> float:
    """The p-value of the marginal law of one request per pair (``firsts``) against the exact law: 0 when one has
    exact probability 0. Requests of different pairs are independent unless the whole batch shares one stream, so
    this tests the law itself."""
    from specverify.stats import goodness_of_fit

    counts, impossible = law.align(firsts)
    if impossible:
        return 0.0
    return float(goodness_of_fit(counts, law.probs).pvalue)


def blame(too_many: bool, law_p: float, alpha: float) -> str:
    """Why the collision count is off. Shared randomness is named only when the marginal law passes (``law_p`` >=
    ``alpha``): a wrong law changes Σp² by itself (a sharper law collides more, a flatter one less)."""
    if law_p < alpha:
        return (
            f"too {'many' if too_many else 'few'}, and the law of these requests is itself off the exact law (one "
            f"request per pair: p = {law_p:.2g} < {alpha:.2g}), which changes the collision rate by itself: the "
            "sampling scenarios say whether the law is wrong (only if they pass does every request of a call share "
            "one RNG stream)"
        )
    if too_many:
        return "too many — identical unseeded requests share or replay randomness (their own law passes)"
    return "too few — unseeded requests avoid repeats: their draws are not independent (their own law passes)"


class CollisionCheck:
    """One binomial test of the collision count against Σp² of the exact law (its share of α like a sampling test);
    an outcome of exact probability 0 rejects it outright."""

    kind = ScenarioKind.COLLISION

    def uses_other(self, run) -> bool:
        return False

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs() | {"batch"}

    def num_tests(self, scenario) -> int:
        return 1

    def planned_size(self, run, scenario) -> int:
        return 2 * COLLISION_PAIRS[run.config.level]

    def run(self, run, scenario) -> list:
        from specverify.stats import collision_probability, collision_test

        started = time.perf_counter()
        handle = run.session.decoder(scenario)
        law = law_of(scenario)
        pairs = COLLISION_PAIRS[run.config.level]
        requests = [Request(scenario.prompt, scenario.params, scenario.num_draft_tokens) for _ in range(2 * pairs)]
        outcomes, firsts = Counter(), Counter()  # firsts: one request of each pair, independent under any pairing
        collisions, previous = 0, None
        for i, (_, comp) in enumerate(run.session.call_in_chunks(handle, requests, COLLISION_CHUNK)):
            outcome = (comp.tokens, comp.finish_reason)
            outcomes[outcome] += 1
            if i % 2:
                collisions += int(outcome == previous)
            else:
                firsts[outcome] += 1
            previous = outcome
        _, impossible = law.align(outcomes)
        rate = collision_probability(law.probs)
        test = collision_test(pairs, collisions, rate)
        expected = pairs * rate
        note = (
            f"{collisions} collisions in {pairs} pairs; independent requests expect {expected:.1f} (Σp² = {rate:.4f})"
        )
        if test.pvalue < run.plan.alpha_scenario:
            note += ": " + blame(collisions > expected, law_pvalue(law, firsts), run.plan.alpha_scenario)
        result = ScenarioResult(
            scenario=scenario.name,
            kind=ScenarioKind.COLLISION,
            exercises=scenario.exercises,
            covered=True,
            passed=None,
            n=pairs,
            planned_n=pairs,
            pvalue=0.0 if impossible else float(test.pvalue),
            statistic=float(collisions),
            note=note,
            reproduce=run.reproduce(scenario),
            impossible=tuple((decode(law, o), c) for o, c in impossible[:5]),
            elapsed_s=time.perf_counter() - started,
        )
        return [result]
