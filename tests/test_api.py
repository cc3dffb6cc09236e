"""The public surface: __all__, lazy heavy imports, the CLI, the pytest plugin."""

import json
import subprocess
import sys

import pytest

import specverify
from specverify.cli import ExitCode
from tests.helpers import cli

PUBLIC = {
    "certify",
    "RunConfig",
    "Certificate",
    "Verdict",
    "Level",
    "SamplingParams",
    "Request",
    "Completion",
    "SampleCounts",
    "Decoder",
    "exact_law",
    "greedy_outcome",
    "make_decoder",
    "draw_seeds",
    "certify_configurations",
    "EngineConfig",
    "ToyGrammar",
    "SpecverifyError",
    "InvalidArgument",
    "ProtocolViolation",
    "__version__",
}
SAMPLING_MATH = ("verify_candidate", "residual_probs", "next_token_probs", "sample_from_uniforms", "decode_plain")


def test_top_level_exports_exactly_the_public_api():
    assert set(specverify.__all__) == PUBLIC
    for name in PUBLIC - {"__version__"}:
        value = getattr(specverify, name)
        assert not isinstance(value, type(specverify)), f"{name} is a module"
        assert value.__module__.startswith("specverify."), name
    for name in SAMPLING_MATH:  # one home for the sampling math: specverify.sampling
        assert not hasattr(specverify, name), name
    assert isinstance(specverify.Verdict.EXACT, str) and specverify.Verdict("greedy-only").rank == 2
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        specverify.nope


def test_no_subpackage_shares_a_name_with_a_public_function():
    import pkgutil

    subpackages = {m.name for m in pkgutil.iter_modules(specverify.__path__) if m.ispkg}
    assert subpackages and not subpackages & PUBLIC


def test_exceptions_form_one_hierarchy():
    from specverify.certification import DecoderFailure

    for exc in (specverify.InvalidArgument, specverify.ProtocolViolation, DecoderFailure):
        assert issubclass(exc, specverify.SpecverifyError)
    assert issubclass(DecoderFailure, specverify.ProtocolViolation)


@pytest.mark.parametrize(
    "code",
    [
        "import specverify as sv; print(sv.certify, sv.Verdict.EXACT, sv.Certificate, sv.Level.QUICK)",
        "import specverify, specverify.pytest_plugin, specverify.params, specverify.errors, specverify.enums",
    ],
)
def test_import_and_plugin_load_stay_light(code):
    probe = code + "; import sys; print('HEAVY', *[m for m in ('torch', 'triton', 'hypothesis') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1].strip() == "HEAVY", out


def test_cli_certify_json_and_exit_codes(tmp_path):
    code, out, _ = cli(
        "certify",
        "specverify.reference:make_decoder",
        "--level",
        "quick",
        "--isolation",
        "none",
        "--scenario",
        "temperature-1",
        "--json",
        "-",
    )
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
    assert code == ExitCode.MEETS and "greedy" in out and "(core)" not in out
    head, *rows = out.splitlines()
    assert head.split()[:3] == ["scenario", "kind", "core"] and "needs" in head
    row = {line.split()[0]: line.split() for line in rows}
    assert row["temperature-1"][2] == "yes" and row["top-k"][2] == "no" and row["top-k"][3].startswith("top_k")


def test_help_documents_exit_codes(capsys):
    with pytest.raises(SystemExit):
        from specverify.cli import _parser

        _parser().parse_args(["certify", "--help"])
    assert "exit codes: 0 meets" in capsys.readouterr().out


def test_pytest_plugin_options_and_header(pytester):
    pytester.makepyfile("""
        def test_options(specverify_options):
            assert (specverify_options["level"], specverify_options["seed"]) == ("thorough", 7)
    """)
    result = pytester.runpytest("--specverify-level", "thorough", "--specverify-seed", "7", "-p", "specverify")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "specverify: level=thorough seed=7 * (reproduce: --specverify-seed=7 --specverify-level=thorough "
            "--specverify-sequential)"
        ]
    )
