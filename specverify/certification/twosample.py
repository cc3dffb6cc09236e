"""Two-sample mode: the speculative path against the same engine's own plain path (``--against``).

For processor semantics that differ from the canonical ones, the exact law is the wrong reference; the engine's
own speculation-off path is the right one. Each sampling scenario then draws ``2 ×`` its planned N from both
decoders (two samples of n have the noise of one sample of n / 2) with unrelated seeds and compares them with a
homogeneity χ² over the observed outcomes (``specverify.stats.homogeneity_test``; pooled on the combined counts,
so no exact law is needed for the test itself — it is used here only to plan N). Greedy, collision, mixed and
batch-composition scenarios keep their comparisons with the oracle.
"""

from __future__ import annotations

import time

from specverify.certification.collect import scenario_seed
from specverify.certification.evidence import ScenarioResult
from specverify.errors import InvalidArgument
from specverify.protocol import Request

__all__ = ["against_spec", "run_two_sample"]


def against_spec(factory_name: str, against: str) -> str:
    """``"plain"`` → the ``plain`` attribute of the factory's module; ``"module:attr"`` as it is."""
    if ":" in against:
        return against
    module = factory_name.split(":")[0]
    if not module or module == "?":
        raise InvalidArgument(
            f"--against={against!r} needs the factory as 'module:attr' to find {against!r} beside "
            "it; pass --against MODULE:ATTR instead."
        )
    return f"{module}:{against}"


def run_two_sample(session, other, scenario, plan, reproduce, *, against: str) -> ScenarioResult:
    from specverify.oracles.law import exact_law
    from specverify.stats import detectable_tv, homogeneity_test

    started = time.perf_counter()
    handle, other_handle = session.decoder(scenario), other.decoder(scenario)
    law = exact_law(handle.pair.target, scenario.prompt, scenario.params)
    n = plan.allotted(scenario.name, 2 * plan.sample_size(law))
    draws = []
    for h, sess, salt in ((handle, session, 0), (other_handle, other, 2)):
        seed = scenario_seed(plan.seed, scenario.name, salt) if h.seeded and scenario.seeded else None
        request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)
        draws.append(sess.draw(h, request, n).outcomes)
    outcomes = sorted(set(draws[0]) | set(draws[1]))
    test = homogeneity_test([draws[0][o] for o in outcomes], [draws[1][o] for o in outcomes])
    gaps = sorted(outcomes, key=lambda o: -abs(draws[0][o] - draws[1][o]))[:5]
    worst = tuple((f"{law.text(o)!r} {list(o[0])} {o[1]}", int(draws[0][o]), float(draws[1][o]), 0.0) for o in gaps)
    return ScenarioResult(
        name=scenario.name,
        kind=scenario.kind,
        exercises=scenario.exercises,
        covered=True,
        n=n,
        planned_n=2 * plan.sample_size(law),
        statistic=float(test.statistic),
        df=int(test.df),
        pvalue=float(test.pvalue),
        detectable_tv=float(detectable_tv(law.probs, max(n // 2, 1), alpha=plan.alpha_test, power=plan.power)),
        worst=worst,
        num_outcomes=len(outcomes),
        note=f"two-sample against {against}: homogeneity χ² over {test.num_cells} pooled cells (worst: observed "
        "here vs there)",
        reproduce=reproduce,
        elapsed_s=time.perf_counter() - started,
    )
