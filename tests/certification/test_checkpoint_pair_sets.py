"""The checkpoint pair sets: a factory that declares ``checkpoint_pairs = "mimo"`` runs the checkpoint matrix on the
MiMo pair (vLLM's ``mtp``: its drafts live in the target), with the Llama matrix's scenarios and margins."""

import pytest

pytest.importorskip("transformers", reason="the checkpoint family needs the hf extra: pip install -e '.[hf]'")

import specverify as sv  # noqa: E402
from specverify.certification.checks.judge import MIN_MARGIN, unfit_for_float32  # noqa: E402
from specverify.certification.config.run_config import RunConfig  # noqa: E402
from specverify.certification.matrix.checkpoint import MIMO_PAIRS, PAIR_SETS, pair_set_of  # noqa: E402
from specverify.certification.matrix.scenarios import matrix, matrix_of  # noqa: E402
from specverify.certification.run.context import matrix_for  # noqa: E402
from specverify.oracles.law import boundary_margin, exact_law  # noqa: E402
from specverify.reference import make_decoder  # noqa: E402

MIMO = matrix("checkpoint", pairs="mimo")


SEEN = []  # the targets mimo_factory was given


def mimo_factory(target, draft):
    SEEN.append(target)
    return make_decoder(target, draft)


mimo_factory.checkpoint_pairs = "mimo"


def test_the_mimo_matrix_has_the_llama_matrix_s_scenarios_on_one_pair():
    llama = matrix("checkpoint")
    assert list(MIMO) == list(llama) and set(PAIR_SETS) == {"llama", "mimo"}
    assert {s.pair for s in MIMO.values()} == {MIMO_PAIRS["mimo"]}
    assert all(MIMO[n].params == llama[n].params for n in MIMO)
    assert matrix_of(MIMO_PAIRS["mimo"]) is MIMO and matrix("checkpoint", pairs="llama") is llama


def test_the_mimo_laws_stay_small_and_away_from_processor_boundaries():
    for s in MIMO.values():
        if s.kind in ("sampling", "greedy", "collision"):
            target = s.models().target
            law = exact_law(target, s.prompt, s.params)
            assert len(law) <= 800, s.name
            if s.kind == "sampling":
                assert len(law) >= 10, f"{s.name}: a law of {len(law)} outcomes tests little"
            assert boundary_margin(target, s.prompt, s.params) >= MIN_MARGIN, s.name
            assert unfit_for_float32(s, MIMO) is None


def test_a_factory_picks_its_pair_set():
    mine = RunConfig.create(factory=mimo_factory, models="checkpoint")
    assert matrix_for(mine) is MIMO
    assert matrix_for(RunConfig.create(factory=make_decoder, models="checkpoint")) is matrix("checkpoint")
    assert matrix_for(RunConfig.create(factory=mimo_factory)) is matrix("toy")  # toy models have one set
    assert pair_set_of(make_decoder) == "llama" and pair_set_of(mimo_factory) == "mimo"

    def typo(target, draft):
        return make_decoder(target, draft)

    typo.checkpoint_pairs = "qwen"
    with pytest.raises(sv.InvalidArgument, match="typo.checkpoint_pairs='qwen' must be one of"):
        pair_set_of(typo)
    with pytest.raises(sv.InvalidArgument, match="pairs='qwen'"):
        matrix("checkpoint", pairs="qwen")


def test_certify_runs_the_factory_on_the_mimo_pair():
    SEEN.clear()
    cert = sv.certify(mimo_factory, level="quick", scenarios=["temperature-1"], isolation="none",
                      models="checkpoint", max_samples=600, sequential=False)  # fmt: skip
    assert [r.name for r in cert.scenarios if r.covered] == ["temperature-1"]
    assert cert.scenarios[0].n == 600 and cert.scenarios[0].passed, cert.reason  # inconclusive: a budget, no core
    assert SEEN and {type(t).__name__ for t in SEEN} == {"MimoModel"}
