"""The marker over several engine configurations: one decoder per configuration (its own items, α and decision),
a state not reached fails its decision, one that cannot run here is skipped when listed and fails when named."""

import pytest

from tests.plugin.test_marker import CORE

CONFIGS = f"""
import pytest

@pytest.mark.specverify(factory="tests.certification.config_decoders:configured", scenarios={CORE!r},
                        engine_config={{names!r}})
def test_configs(specverify_result):
    assert specverify_result.covered
"""


def test_all_runs_each_configuration_as_its_own_decoder(run_suite):
    result = run_suite(CONFIGS.format(names="all"), "--specverify-seed", "3", "--specverify-fixed", "-rA")
    out = result.stdout.str()
    result.assert_outcomes(passed=12, skipped=1, failed=1)  # the failure: cold-cache's decision
    result.stdout.fnmatch_lines(
        [
            "PASSED test_engine.py::test_configs[[]default/temperature-1[]]",
            "PASSED test_engine.py::test_configs[[]warm-cache/temperature-1[]]",
            "PASSED test_engine.py::test_configs[[]cold-cache/temperature-1[]]",
            "SKIPPED * engine configuration 'async' is not reachable here: async scheduling is GPU-only",
        ]
    )
    for name in ("default", "warm-cache", "cold-cache"):  # three decisions, each at its own family alpha
        assert f"tests.certification.config_decoders:configured · engine config {name} — " in out
    assert "meets: exact meets require=exact" in out  # default and warm-cache
    assert "FAILS: engine configuration 'cold-cache' not covered: its state was not reached" in out
    assert "cached_tokens = 0 (needs >= 33)" in out
    assert "specverify: 2 of 3 decoder certification(s) meet their requirement; failing: " in out
    assert "failing: tests.certification.config_decoders:configured · engine config cold-cache" in out
    assert result.ret != pytest.ExitCode.OK  # a configuration not covered fails the session


def test_named_configurations_only_and_a_named_unreachable_one_fails(run_suite):
    result = run_suite(CONFIGS.format(names=["warm-cache", "async"]), "--specverify-fixed", "-rA")
    result.assert_outcomes(passed=4, failed=1)
    out = result.stdout.str()
    assert "default/" not in out and "cold-cache/" not in out
    assert "engine configuration 'async' is not reachable here" in out and "it is named, so it is not covered" in out
    assert "specverify: 1 of 1 decoder certification(s) meet their requirement" in out


def test_bad_configuration_names_fail_collection_with_the_marker_spelling(run_suite):
    result = run_suite(CONFIGS.format(names=["warm-cache", "nope"]))
    out = result.stdout.str()
    assert "@pytest.mark.specverify: engine_config='nope' is not a configuration of" in out
    assert "['async', 'cold-cache', 'default', 'warm-cache']" in out
    result = run_suite(CONFIGS.format(names=[]))
    assert "expected a configuration name, a list of names or 'all'" in result.stdout.str()


def test_several_configurations_refuse_a_baseline(run_suite, tmp_path):
    result = run_suite(CONFIGS.format(names="all"), "--specverify-baseline", str(tmp_path))
    assert "--specverify-baseline with @pytest.mark.specverify(engine_config='all')" in result.stdout.str()
    assert result.ret != pytest.ExitCode.OK
