"""The scenario matrix on the checkpoint family: small laws, margins from every cut point, the reference exact."""

import pytest

pytest.importorskip("transformers", reason="the checkpoint family needs the hf extra: pip install -e '.[hf]'")

import specverify as sv  # noqa: E402
from specverify.certification import CORE, SCENARIOS  # noqa: E402
from specverify.certification.checks.judge import MIN_MARGIN, unfit_for_float32  # noqa: E402
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, TOY_ONLY  # noqa: E402
from specverify.certification.matrix.scenarios import matrix, select_scenarios  # noqa: E402
from specverify.oracles.law import boundary_margin, exact_law  # noqa: E402

CHECKPOINT = matrix("checkpoint")


def test_same_scenarios_as_toy_but_the_toy_only_ones_on_at_most_three_pairs():
    assert set(CHECKPOINT) == set(SCENARIOS) - set(TOY_ONLY) and set(CORE) <= set(CHECKPOINT)
    pairs = {s.pair for s in CHECKPOINT.values()}
    assert pairs <= set(CHECKPOINT_PAIRS.values()) and len(pairs) <= 3
    assert all(s.pair.family == "checkpoint" for s in CHECKPOINT.values())
    with pytest.raises(sv.InvalidArgument, match="toy-only"):
        select_scenarios(["target-zero"], "checkpoint")
    with pytest.raises(sv.InvalidArgument, match="Did you mean 'checkpoint'"):
        matrix("checkpiont")


def test_laws_stay_small_and_away_from_processor_boundaries():
    for s in CHECKPOINT.values():
        if s.kind in ("sampling", "greedy", "collision"):
            target = s.models().target
            law = exact_law(target, s.prompt, s.params)
            assert len(law) <= 800 and (law.probs > 1e-4).sum() <= 320, s.name
            if s.kind == "sampling":
                assert len(law) >= 10, f"{s.name}: a law of {len(law)} outcomes tests little"
            assert boundary_margin(target, s.prompt, s.params) >= MIN_MARGIN, s.name
            assert unfit_for_float32(s, CHECKPOINT) is None


def test_a_scenario_near_a_cut_point_is_refused_before_any_draw():
    from dataclasses import replace

    near = replace(CHECKPOINT["min-p"], params=replace(CHECKPOINT["min-p"].params, min_p=0.15))  # margin 4e-4
    assert "processor boundary" in unfit_for_float32(near, CHECKPOINT)


def test_reference_is_exact_on_the_checkpoint_core():
    cert = sv.certify(sv.make_decoder, level="quick", scenarios=list(CORE), isolation="none", models="checkpoint")
    assert cert.verdict == "exact", cert.reason
    assert "--models checkpoint" in cert.command
    sampling = [s for s in cert.scenarios if s.kind == "sampling"]
    assert sampling and all(s.n == s.planned_n > 1000 for s in sampling)


@pytest.mark.slow
def test_reference_is_exact_on_the_full_checkpoint_matrix():
    cert = sv.certify("specverify.reference:make_decoder", level="quick", models="checkpoint")
    assert cert.verdict == "exact", cert.reason
