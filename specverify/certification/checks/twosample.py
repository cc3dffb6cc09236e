"""The run-level two-sample check (``--against``): a sampling scenario drawn from the decoder under test and from
another decoder (the same engine's plain path, speculation off), compared with a homogeneity χ².

For processor semantics that differ from the canonical ones, the exact law is the wrong reference; the engine's own
speculation-off path is the right one. Each side draws twice the planned N (two samples of n have the noise of one
sample of n / 2), with unrelated seeds; the test pools on the combined counts, so no exact law is needed for it. N is
planned from the exact law where the matrix has one, else (a user's own checkpoints) from a pilot of the other path:
its observed frequencies stand in for the law (``USER_PILOT`` draws, not used as evidence). Greedy, collision, mixed
and batch-composition scenarios keep their own checks.
"""

from __future__ import annotations

import time

import numpy as np

from specverify.certification.checks.judge import budget_spent
from specverify.certification.matrix.laws import law_of
from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.run.collect import scenario_seed
from specverify.enums import ScenarioKind
from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["TwoSampleCheck", "against_spec", "USER_PILOT"]

USER_PILOT = 2000  # draws of the other path that stand in for the law when there is none


def against_spec(factory_name: str, against: str) -> str:
    """``"plain"`` → the ``plain`` attribute of the factory's module; ``"module:attr"`` as it is."""
    if ":" in against:
        return against
    module = factory_name.split(":")[0]  # the factory spec module:attr, named on the command line
    if not module or module == "?":
        raise InvalidArgument(
            f"--against={against!r} needs the factory as 'module:attr' to find {against!r} beside "
            "it; pass --against MODULE:ATTR instead."
        )
    return f"{module}:{against}"


class TwoSampleCheck:
    """Homogeneity χ² of two samples of 2·N each (one test: the scenario's share of α)."""

    kind = ScenarioKind.SAMPLING

    def uses_other(self, run) -> bool:
        return True

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs()

    def num_tests(self, scenario) -> int:
        return 1

    def planned_size(self, run, scenario) -> int:
        return 2 * _law_and_plan(run, scenario)[1]

    def run(self, run, scenario) -> list:
        from specverify.stats import detectable_tv, homogeneity_test

        started = time.perf_counter()
        probs, planned, pilot = _law_and_plan(run, scenario)
        n = run.allotted(scenario, 2 * planned)
        if n == 0:
            return [budget_spent(scenario, 2 * planned)]
        sides = []
        for session, salt in ((run.session, 0), (run.other, 1 if pilot else 2)):
            handle = session.decoder(scenario)
            sides.append(session.draw(handle, _request(run, scenario, handle, salt), n))
        here, there = sides[0].outcomes, sides[1].outcomes
        outcomes = sorted(set(here) | set(there))
        test = homogeneity_test([here[o] for o in outcomes], [there[o] for o in outcomes])
        gaps = sorted(outcomes, key=lambda o: -abs(here[o] - there[o]))[:5]
        vocab = run.session.decoder(scenario).pair.vocab
        worst = tuple((f"{vocab.text(o[0])!r} {list(o[0])} {o[1]}", int(here[o]), float(there[o]), 0.0) for o in gaps)
        against = against_spec(run.config.factory_name, run.config.against)
        planned_from = "the exact law" if pilot is None else f"a {pilot}-draw pilot of the {against} path"
        accepted = sides[0].accepted
        result = ScenarioResult(
            scenario=scenario.name,
            kind=scenario.kind,
            exercises=scenario.exercises,
            covered=True,
            n=n,
            planned_n=2 * planned,
            statistic=float(test.statistic),
            df=int(test.df),
            pvalue=float(test.pvalue),
            detectable_tv=float(detectable_tv(probs, max(n // 2, 1), alpha=run.plan.alpha_test, power=run.plan.power)),
            worst=worst,
            num_outcomes=len(outcomes),
            note=f"two-sample against {against} (N planned from {planned_from}): homogeneity χ² over "
            f"{test.num_cells} pooled cells (worst: observed here vs there)",
            reproduce=run.reproduce(scenario),
            accepted_observed=None if not accepted else {int(m): int(c) for m, c in sorted(accepted.items())},
            elapsed_s=time.perf_counter() - started,
        )
        return [result]


def _request(run, scenario, handle, salt: int) -> Request:
    seed = scenario_seed(run.seed, scenario.name, salt) if handle.seeded and scenario.seeded else None
    return Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)


def _law_and_plan(run, scenario) -> tuple:
    """(law probabilities, planned N per sample of the one-sample plan, pilot draws or None), measured once."""
    if scenario.name not in run.pilots:
        if run.matrix.exact_law:
            probs, pilot = law_of(scenario).probs, None
        else:
            pilot = USER_PILOT if run.config.max_samples is None else min(USER_PILOT, run.config.max_samples)
            handle = run.other.decoder(scenario)
            seen = run.other.draw(handle, _request(run, scenario, handle, 2), pilot).outcomes
            probs = np.array(sorted(seen.values()), dtype=np.float64) / pilot
        run.pilots[scenario.name] = (probs, run.plan.sample_size_of(probs), pilot)
    return run.pilots[scenario.name]
