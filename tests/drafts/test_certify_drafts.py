"""Each draft family's reference decoder, and block verification, certified exact on its family's matrix; the
draft object and the scenarios the factory receives; ``--drafts`` on the command line."""

import pytest

import specverify as sv
from specverify.certification.matrix.drafts import FAMILY_SCENARIOS
from specverify.certification.matrix.scenarios import CORE, matrix
from specverify.cli import main
from specverify.enums import DraftFamily
from specverify.errors import InvalidArgument
from specverify.oracles.drafts import DRAFT_FAMILIES as ORACLE_FAMILIES
from specverify.oracles.drafts import draft_family

FAMILIES = [f.value for f in DraftFamily if f != DraftFamily.AR]
BLOCK_FAMILIES = ("heads", "ngram")  # slow: the fast suite checks the block rule through test_decoders


def certified(factory, drafts, level="quick", scenarios=None):
    return sv.certify(factory, level=level, drafts=drafts, scenarios=scenarios, isolation="none", seed=3)


# the fast suite certifies the tree family's reference (the richest draft object); the other families' decoders are
# law-checked directly in the fast suite (test_decoders.py: heads and ngram chains, the mtp block rule) and their
# matrices certified through a zoo entry each (tests/quality/test_zoo_certify.py)
@pytest.mark.parametrize("drafts", [pytest.param(f, marks=[] if f == "tree" else [pytest.mark.slow]) for f in FAMILIES])
def test_each_familys_reference_is_exact_on_the_core_scenarios(drafts):
    cert = certified("specverify.reference:make_decoder", drafts, scenarios=list(CORE))
    assert cert.verdict == "exact", cert.reason
    assert f"{drafts} draft scenarios" in cert.reason and cert.speculation_observed


@pytest.mark.slow
@pytest.mark.parametrize("drafts", BLOCK_FAMILIES)
def test_block_verification_is_exact_on_the_core_scenarios(drafts):
    cert = certified("specverify.reference:make_block_decoder", drafts, scenarios=list(CORE))
    assert cert.verdict == "exact", cert.reason


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["make_decoder", "make_block_decoder"])
@pytest.mark.parametrize("drafts", FAMILIES)
def test_each_family_is_exact_on_its_full_matrix_at_standard(drafts, factory):
    if drafts == "tree" and factory == "make_block_decoder":
        pytest.skip("block verification verifies chains")
    cert = certified(f"specverify.reference:{factory}", drafts, level="standard")
    assert cert.verdict == "exact", cert.reason
    assert f"on the full {drafts} draft matrix" in cert.reason


def test_every_family_matrix_has_the_core_scenarios_on_its_own_draft_object():
    assert tuple(f.value for f in DraftFamily) == ORACLE_FAMILIES
    for drafts in FAMILIES:
        family = matrix("toy", drafts)
        assert set(CORE) <= set(family) and set(FAMILY_SCENARIOS[drafts]) <= set(family)
        for scenario in family.values():
            assert scenario.pair.drafts == drafts and draft_family(scenario.models().draft) == drafts
            assert scenario.kind in ("sampling", "greedy")


def test_the_acceptance_evidence_uses_the_familys_own_law():
    cert = certified("specverify.reference:make_decoder", "heads", scenarios=["temperature-1"])
    (result,) = cert.scenarios
    assert result.accepted_pvalue is not None and result.accepted_pvalue > 1e-6


def test_unknown_families_and_checkpoint_models_are_refused():
    with pytest.raises(InvalidArgument, match="drafts='head' must be one of .*Did you mean 'heads'"):
        matrix("toy", "head")
    with pytest.raises(InvalidArgument, match="toy models only"):
        matrix("checkpoint", "tree")


def test_the_cli_runs_a_familys_scenarios_and_keeps_the_flag(tmp_path):
    import io
    import json

    path = tmp_path / "cert.json"
    argv = ["certify", "specverify.reference:make_decoder", "--drafts", "ngram", "--level", "quick"]
    argv += ["--scenario", "temperature-1", "--isolation", "none", "--json", str(path)]
    main(argv, out=io.StringIO(), err=io.StringIO())
    doc = json.loads(path.read_text())
    assert "--drafts ngram" in doc["command"] and doc["scenarios"][0]["name"] == "temperature-1"
    listing = io.StringIO()
    assert main(["scenarios", "--drafts", "tree"], out=listing, err=io.StringIO()) == 0
    assert "tree-top-k" in listing.getvalue() and "tree-padded" in listing.getvalue()
