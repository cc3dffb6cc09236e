"""The spans of γ the checks a vLLM decoder's plan is ordered by (issue #24), without vLLM: greedy runs γ by γ over
its span, batch composition from its small calls' γ to 3. The plans on a real engine: test_plans_engine.py."""

from specverify.certification.checks.composition import small_call_shape
from specverify.certification.checks.greedy import GREEDY_GAMMAS
from specverify.certification.matrix.scenarios import matrix

CKPT = matrix("checkpoint")


def test_the_scenario_spans_order_greedy_and_composition():
    from specverify.certification import checks

    greedy, composition = (checks.CHECKS[CKPT[n].kind] for n in ("greedy", "batch-composition"))
    assert greedy.gamma_span(CKPT["greedy"]) == (GREEDY_GAMMAS[0], GREEDY_GAMMAS[-1])
    shape = small_call_shape(CKPT["batch-composition"])
    assert composition.gamma_span(CKPT["batch-composition"]) == (shape.num_draft_tokens, 3)
