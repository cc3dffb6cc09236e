"""Sequential looks are the default look rule: the p-value floor, Holm's agreement, what a pass rules out, the flags."""

import specverify as sv
from specverify.certification import RunConfig
from specverify.certification.config.execution import run_from_command
from specverify.cli import main

CORE = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy"]


def test_no_early_pass_below_the_floor_and_no_rejected_scenario_called_a_pass():
    # the issue's example: at α 0.05 seed 70004's temperature-1 came inside a pass boundary at look 8 with p 0.013;
    # it was passed there, then failed by Holm while its note said "pass". Now the pass is held back. Since the
    # battery of five tests (issue 44) that seed's look passes Holm (p 0.022); seed 70035's eos-in-block is held back
    # and fails there (p 0.0047), found by a search of seeds 70000-70039
    cert = sv.certify(sv.make_decoder, level="quick", alpha=0.05, isolation="none", scenarios=CORE, seed=70035)
    got = {s.name: s for s in cert.scenarios}
    held = got["eos-in-block"]
    assert held.passed is False and "held back" in held.note and "reached the last look" in held.note, held.note
    assert "early pass" not in held.note and held.pvalue <= 0.05
    for s in cert.scenarios:
        if s.kind == "sampling" and "early pass" in s.note:
            assert s.passed and s.pvalue > 0.05 and s.detectable_tv == 0.05, (s.name, s.pvalue, s.note)
    assert "law rejected (p = " in cert.reason and "held back" in cert.reason


def test_the_fixed_plan_is_one_flag_away_and_every_reproduce_line_spells_the_rule():
    default = RunConfig.create("cli", factory="m:f", level="quick")
    fixed = RunConfig.create("cli", factory="m:f", level="quick", sequential=False)
    assert default.sequential and "--sequential" in default.reproduce() and "--fixed" not in default.reproduce()
    assert "--fixed" in fixed.reproduce() and "--sequential" not in fixed.reproduce()
    assert not run_from_command(fixed.reproduce())[0].sequential
    assert run_from_command(default.reproduce())[0].sequential
    assert run_from_command("specverify certify m:f --level quick")[0].sequential  # the default


def test_fixed_and_sequential_together_are_a_usage_error(capsys):
    assert main(["certify", "specverify.reference:make_decoder", "--fixed", "--sequential"]) == 2
    assert "argument --sequential: not allowed with argument --fixed" in capsys.readouterr().err


def test_fixed_draws_the_plan_in_full():
    cert = sv.certify(sv.make_decoder, level="quick", isolation="none", scenarios=["temperature-1"], sequential=False)
    (s,) = cert.scenarios
    assert s.n == s.planned_n and not s.note.startswith("sequential")
    assert "--fixed" in s.reproduce
