"""Issue 45's axes on the checkpoint family: the scenarios an engine can serve are there, the others toy-only, and
the reference (float64 forward) passes them."""

import pytest

pytest.importorskip("transformers", reason="the checkpoint family needs the hf extra (pip install -e '.[hf]')")

from specverify import certify  # noqa: E402
from specverify.certification.matrix.scenarios import matrix  # noqa: E402

SERVED = ["gamma-8", "greedy-gamma-sweep", "greedy-long-prompts", "mixed-kinds"]
TOY_ONLY = ["sliding-window", "greedy-sliding-window", "greedy-ties", "recurrent", "greedy-recurrent"]


def test_the_served_axes_are_in_the_checkpoint_matrix_and_the_rest_are_not():
    checkpoint = matrix("checkpoint")
    assert set(SERVED) <= set(checkpoint), sorted(set(SERVED) - set(checkpoint))
    assert not set(TOY_ONLY) & set(checkpoint)
    assert checkpoint["gamma-8"].num_draft_tokens == 8 and checkpoint["gamma-8"].params.max_tokens == 7
    sweep, long = checkpoint["greedy-gamma-sweep"], checkpoint["greedy-long-prompts"]
    assert max(sweep.gammas) == 8 and long.prompt_lengths == (10, 30)


@pytest.mark.slow
def test_the_reference_passes_the_checkpoint_axes():
    cert = certify(
        "specverify.reference:make_decoder", models="checkpoint", level="quick", seed=0, scenarios=SERVED,
        isolation="none",
    )  # fmt: skip
    assert all(s.covered and s.passed for s in cert.scenarios), cert.reason
