"""The public surface: __all__, lazy heavy imports, the CLI, the pytest plugin."""

import json
import subprocess
import sys

import pytest

import specverify
from specverify.cli import ExitCode, main


def test_all_names_resolve():
    for name in specverify.__all__:
        assert getattr(specverify, name) is not None, name
    assert sorted(dir(specverify)) == sorted(specverify.__all__)


def test_import_and_plugin_load_stay_light():
    code = ("import sys, specverify, specverify.pytest_plugin, specverify.params, specverify.errors; "
            "print(' '.join(m for m in ('torch', 'triton', 'hypothesis') if m in sys.modules))")
    heavy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert heavy == ""


def test_stats_never_imports_torch():
    code = "import sys, specverify.stats; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def cli(*argv):
    import io
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_certify_json_and_exit_codes(tmp_path):
    code, out, _ = cli("certify", "specverify.reference:make_decoder", "--level", "quick", "--isolation", "none",
                       "--scenario", "temperature-1", "--json", "-")
    doc = json.loads(out)
    assert code == ExitCode.FALLS_SHORT  # one scenario: the core is not covered -> inconclusive never meets
    assert doc["verdict"] == "inconclusive"
    for key in ("verdict", "level", "seed", "alpha", "elapsed_s", "version", "scenarios"):
        assert key in doc
    s = doc["scenarios"][0]
    for key in ("name", "kind", "passed", "n", "pvalue", "tv_estimate", "detectable_tv"):
        assert key in s
    assert s["name"] == "temperature-1" and s["passed"] is True and s["n"] > 1000


def test_cli_usage_errors_suggest_close_matches():
    code, _, err = cli("certify", "specverify.reference:make_decodr", "--isolation", "none")
    assert code == ExitCode.USAGE and "Did you mean 'specverify.reference:make_decoder'" in err
    code, _, err = cli("certify", "no_such_module_xyz:f")
    assert code == ExitCode.USAGE and "cannot import" in err
    code, _, err = cli("certify", "specverify.reference:make_decoder", "--scenario", "greedi", "--isolation", "none")
    assert code == ExitCode.USAGE and "Did you mean 'greedy'" in err
    assert cli("frobnicate")[0] == ExitCode.USAGE


def test_cli_plan_and_scenarios():
    code, out, _ = cli("plan", "--outcomes", "256", "--epsilon", "0.02")
    assert code == ExitCode.MEETS and int(out.split()[0]) > 10_000
    code, out, _ = cli("scenarios")
    assert code == ExitCode.MEETS and "greedy" in out and "(core)" in out


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit):
        from specverify.cli import _parser
        _parser().parse_args(["certify", "--help"])
    assert "exit codes: 0 meets" in capsys.readouterr().out


def test_pytest_plugin_options_and_header(pytester):
    pytester.makepyfile("""
        def test_options(specverify_options):
            assert specverify_options == {"level": "thorough", "seed": 7}
    """)
    result = pytester.runpytest("--specverify-level", "thorough", "--specverify-seed", "7", "-p", "specverify")
    result.assert_outcomes(passed=1)
