"""The ``collision`` check: disjoint pairs (2i, 2i+1) of identical unseeded requests in one call collide at rate
Σp² when the requests are independent (docs/design.md, verdict rule 3)."""

from __future__ import annotations

import time
from collections import Counter

from specverify.certification.checks.judge import decode
from specverify.certification.evidence import ScenarioResult
from specverify.certification.laws import law_of
from specverify.enums import Level, ScenarioKind
from specverify.protocol import Request

__all__ = ["CollisionCheck", "COLLISION_PAIRS", "COLLISION_CHUNK"]

COLLISION_PAIRS = {Level.QUICK: 2000, Level.STANDARD: 5000, Level.THOROUGH: 10000}
COLLISION_CHUNK = 2048  # requests per call: pairs never straddle two calls


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
        outcomes = Counter()
        collisions, previous = 0, None
        for i, (_, comp) in enumerate(run.session.call_in_chunks(handle, requests, COLLISION_CHUNK)):
            outcome = (comp.tokens, comp.finish_reason)
            outcomes[outcome] += 1
            if i % 2:
                collisions += int(outcome == previous)
            previous = outcome
        _, impossible = law.align(outcomes)
        rate = collision_probability(law.probs)
        test = collision_test(pairs, collisions, rate)
        expected = pairs * rate
        note = (
            f"{collisions} collisions in {pairs} pairs; independent requests expect {expected:.1f} (Σp² = {rate:.4f})"
        )
        if test.pvalue < run.plan.alpha_scenario:
            note += (
                ": too many — identical unseeded requests share or replay randomness"
                if collisions > expected
                else ": too few — the law of unseeded requests is wrong (repeats rarer than the exact law gives)"
            )
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
