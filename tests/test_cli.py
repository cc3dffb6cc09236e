"""The CLI and certify() as a new user meets them: progress, verdict lines, set-up errors, flags, output paths."""

import json
import os
import sys
import time

import pytest

from specverify import certify
from specverify.certification import CORE
from specverify.cli import ExitCode, main
from specverify.report import render_text
from tests.helpers import cli

REF = "specverify.reference:make_decoder"
BAD = "tests.certification.bad_decoders"
FAST = list(CORE)


def quick(factory, *flags):
    return cli("certify", factory, "--level", "quick", "--isolation", "none", *flags)


def run(factory, scenarios=FAST, **kw):
    kw.setdefault("level", "quick")
    return certify(factory, scenarios=scenarios, isolation="none", **kw)


# 1 ------------------------------------------------------------------------------------------------------------------
def test_progress_is_printed_on_stderr_without_a_tty_with_an_eta():
    code, _, err = quick(REF, "--scenario", "greedy", "--scenario", "max-tokens-not-multiple")
    lines = [line for line in err.splitlines() if line.startswith("specverify: [")]
    assert len(lines) == 3 and "[1/3] greedy" in lines[0] and "ETA" in lines[1], err
    assert lines[2].startswith("specverify: [3/3] the reproducibility check (elapsed "), err


# 2 ------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def never_speculates():
    """zoo:never_speculate over the core, through the CLI: (code with --require-speculation, code without, text)."""
    code, out, _ = quick("specverify.zoo:never_speculate", *sum((["--scenario", n] for n in FAST), []))
    again = quick(
        "specverify.zoo:never_speculate", "--require-speculation", *sum((["--scenario", n] for n in FAST), [])
    )
    return code, again[0], out


def test_a_decoder_that_never_speculates_says_so_in_the_verdict_line(never_speculates):
    code, code_required, out = never_speculates
    verdict = next(line for line in out.splitlines() if line.startswith("VERDICT"))
    assert verdict.startswith("VERDICT: EXACT") and code == ExitCode.MEETS
    assert "speculation not observed: the decoder never reported an accepted draft" in verdict
    assert code_required == ExitCode.FALLS_SHORT


def test_greedy_only_runs_do_not_claim_speculation_was_not_observed():
    code, out, _ = quick(REF, "--scenario", "greedy")
    assert "speculation not measured: only greedy scenarios ran" in out
    assert "speculation not observed" not in out


# 3, 7 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("isolation", ["none", "process"])
def test_a_raising_factory_is_a_set_up_error_shown_once(isolation):
    code, out, err = cli(
        "certify", f"{BAD}:factory_raises", "--level", "quick", "--scenario", "greedy", "--isolation", isolation
    )
    assert code == ExitCode.ERROR == 4
    assert "VERDICT: ERROR — set-up failed: the factory raised RuntimeError: no GPU here" in out
    assert (out + err).count("RuntimeError: no GPU here") == 1
    assert "runner.py" not in out + err and "_Host" not in out + err


def test_a_module_that_raises_on_import_is_an_error_and_a_typo_stays_usage():
    code, out, _ = quick("tests.certification.raises_on_import:factory", "--scenario", "greedy")
    assert code == ExitCode.ERROR and "engine library is not configured" in out
    assert quick("tests.certification.no_such_module:factory")[0] == ExitCode.USAGE


def test_a_call_that_raises_stays_invalid():
    code, out, _ = quick(f"{BAD}:raises", "--scenario", "greedy")
    assert code == ExitCode.FALLS_SHORT and "VERDICT: INVALID" in out


def test_a_capability_typo_is_a_set_up_error_with_a_suggestion():
    code, out, _ = quick(f"{BAD}:capability_typo", "--scenario", "greedy")
    assert code == ExitCode.ERROR and "did you mean `top_k`?" in out and "Traceback" not in out


def test_help_documents_the_error_exit_code_and_the_current_directory(capsys):
    from specverify.cli import _parser

    with pytest.raises(SystemExit):
        _parser().parse_args(["certify", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "4 error" in text and "current directory" in text


# 4 ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--json", "--report", "--plots", "--counts-out"])
def test_unwritable_output_paths_are_usage_errors_before_the_run(tmp_path, flag):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    extra = ["--shard", "1/2"] if flag == "--counts-out" else []
    started = time.perf_counter()
    code, _, err = quick(REF, "--scenario", "temperature-1", flag, str(blocker / "sub" / "out"), *extra)
    assert code == ExitCode.USAGE and f"error: {flag} " in err and "[1/" not in err, err
    assert time.perf_counter() - started < 5


# 5 ------------------------------------------------------------------------------------------------------------------
def test_the_command_and_reproduce_lines_keep_every_flag(tmp_path):
    flags = ["--scenario", "greedy", "--scenario", "eos-in-block", "--timeout", "30", "--budget", "500"]
    flags += ["--max-samples", "100000", "--sequential", "--alpha", "1e-05", "--require", "greedy-only"]
    flags += ["--require-reproducible", "--require-speculation", "--seed", "7", "--json", "-"]
    _, out, _ = quick(REF, *flags)
    doc = json.loads(out)
    for part in ("--scenario greedy", "--scenario eos-in-block", "--timeout 30", "--budget 500", "--isolation none"):
        assert part in doc["command"], doc["command"]
    for part in ("--max-samples 100000", "--sequential", "--alpha 1e-05", "--require greedy-only", "--seed 7"):
        assert part in doc["command"], doc["command"]
    assert "--require-reproducible" in doc["command"] and "--require-speculation" in doc["command"]
    reproduce = doc["scenarios"][1]["reproduce"] or doc["reason"]
    for s in doc["scenarios"]:
        if s["reproduce"]:
            assert "--isolation none --timeout 30" in s["reproduce"] and "--alpha 1e-05" in s["reproduce"]
    assert reproduce
    counts = tmp_path / "part.json"
    _, out, _ = quick(REF, "--scenario", "greedy", "--shard", "1/2", "--counts-out", str(counts), "--json", "-")
    command = json.loads(out)["command"]
    assert "--shard 1/2" in command and f"--counts-out {counts}" in command and "--scenario greedy" in command


def test_models_and_against_are_in_the_command():
    from specverify.certification import RunConfig

    config = RunConfig.create("cli", factory="m:f", models="checkpoint", against="plain", level="quick")
    assert config.reproduce() == (
        "specverify certify m:f --level quick --models checkpoint --sequential --against plain --seed 0"
    )


# 6 ------------------------------------------------------------------------------------------------------------------
def test_after_a_violation_one_line_says_the_rest_was_not_run():
    from tests.certification import bad_decoders

    text = render_text(run(bad_decoders.raises, scenarios=FAST + ["top-k", "penalties"]))
    assert text.count("not run: the decoder already broke the protocol") == 1  # one line, not one row each
    assert "… the other 5 scenarios were not run: the decoder already broke the protocol" in text
    assert "not checked — not checked" not in text


# 8 ------------------------------------------------------------------------------------------------------------------
def test_numpy_integer_tokens_are_accepted_bools_are_not():
    from tests.certification import bad_decoders

    cert = run(bad_decoders.numpy_tokens, scenarios=["greedy", "eos-in-block"])
    assert all(s.passed for s in cert.scenarios) and cert.verdict != "invalid", cert.reason
    assert run(bad_decoders.bool_tokens, scenarios=["greedy"]).verdict == "invalid"


# 9 ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, message",
    [
        (["plan", "--outcomes", "1"], "--outcomes 1 must be >= 2"),
        (["certify", REF, "--timeout", "0"], "--timeout='0' must be seconds > 0"),
        (["certify", REF, "--budget", "-1"], "--budget='-1' must be seconds > 0"),
        (["certify", REF, "--alpha", "0.7"], "--alpha='0.7' must be a number in (0, 0.5)"),
        (["certify", REF, "--seed", str(2**62)], f"--seed='{2**62}' must be an int in [0, 2**62)"),
        (["certify", REF, "--seed", "-1"], "--seed='-1' must be an int in [0, 2**62)"),
        (["certify", REF, "--seed", "x"], "--seed='x' must be an int in [0, 2**62)"),
        (["certify", REF, "--max-samples", "0"], "--max-samples='0' must be an int >= 1"),
        (["certify", REF, "--power", "1"], "--power='1' must be a number in [0.5, 1)"),
        (["certify", REF, "--models", "checkpiont"], "--models='checkpiont' must be one of 'toy', 'checkpoint'"),
        (["certify", REF, "--drafts", "tree", "--models", "checkpoint"], "--drafts runs on the toy models only"),
        (["certify", REF, "--engine-option", "novalue"], "--engine-option=['novalue'] must be KEY=VALUE"),
        (["certify", REF, "--target", "x"], "--target and --draft go together, with --against"),
    ],
)
def test_bad_flags_are_reported_with_their_cli_names(argv, message):
    code, _, err = cli(*argv)
    assert code == ExitCode.USAGE and message in err, err
    assert "timeout_s" not in err and "budget_s" not in err


# 10 -----------------------------------------------------------------------------------------------------------------
def test_a_subset_run_says_what_it_covered():
    code, out, _ = quick("specverify.zoo:argmax_verify", "--scenario", "temperature-1", "--require", "greedy-only")
    assert code == ExitCode.FALLS_SHORT
    assert "VERDICT: INCONCLUSIVE — not exact (greedy not checked): temperature-1" in out


def test_an_exact_verdict_names_its_coverage(never_speculates):
    from specverify.certification import SCENARIOS

    out = never_speculates[2]
    assert f"exact on {len(FAST)} of {len(SCENARIOS)} scenarios: {', '.join(FAST)}" in out


# 11 -----------------------------------------------------------------------------------------------------------------
def test_in_process_budget_is_enforced_between_calls():
    from tests.certification import bad_decoders

    started = time.perf_counter()
    cert = run(bad_decoders.slows_down, scenarios=FAST, budget_s=4.0)
    assert time.perf_counter() - started < 20, cert.reason
    assert cert.verdict == "inconclusive" and any("budget exhausted" in s.note for s in cert.scenarios)


# 12 -----------------------------------------------------------------------------------------------------------------
def test_pvalues_evidence_and_a_legend_are_explained():
    from specverify.report.text import format_pvalue

    assert [format_pvalue(p) for p in (1.0, 0.35, 0.00375, 0.0)] == ["1.00", "0.35", "0.0037", "<1e-300"]
    _, out, _ = quick(REF, "--scenario", "temperature-1", "--scenario", "greedy")
    assert "legend:" in out and "TV null" in out.split("legend:")[1] and "detect" in out.split("legend:")[1]
    assert "needs ≥ 30% to exercise rejections: ok" in out
    assert "≥ α: consistent with the exact law" in out


# 14 -----------------------------------------------------------------------------------------------------------------
def test_a_factory_module_in_the_current_directory_imports(tmp_path, monkeypatch):
    (tmp_path / "my_adapter_xyz.py").write_text("from specverify.reference import make_decoder as factory\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path), os.getcwd())])
    code, out, err = quick("my_adapter_xyz:factory", "--scenario", "greedy")
    assert code != ExitCode.USAGE and "greedy" in out, err
    sys.modules.pop("my_adapter_xyz", None)


# 15 -----------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [None, 2])
def test_the_worker_runs_one_thread_unless_told(monkeypatch, threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("SPECVERIFY_TEST_THREADS", str(threads or 1))
    cert = certify(f"{BAD}:thread_checked", level="quick", scenarios=["greedy"], threads=threads, isolation="process")
    assert cert.verdict != "error" and cert.scenarios[0].passed, cert.reason


def test_a_slow_decoder_gets_a_note():
    from specverify.certification.results.evidence import ScenarioResult
    from specverify.certification.results.verdict import slow_note

    slow = ScenarioResult("temperature-1", "sampling", "", covered=True, n=5000, elapsed_s=10.0)
    assert "slow (500 outcomes/s < 1,000)" in slow_note([slow])
    assert slow_note([ScenarioResult("temperature-1", "sampling", "", covered=True, n=10**6, elapsed_s=10.0)]) == ""


# 16 -----------------------------------------------------------------------------------------------------------------
def test_a_seeded_decoder_without_batch_is_never_sent_a_batch():
    from tests.certification import bad_decoders

    cert = run(bad_decoders.seed_no_batch, scenarios=["greedy"])
    assert cert.verdict != "invalid", cert.reason
    assert cert.reproducible is True and "alone and on a second call" in cert.reproducibility_note


def test_a_failing_reproducibility_check_is_not_invalid(monkeypatch):
    from specverify.certification import checks
    from specverify.errors import ProtocolViolation

    def broken(*args):
        raise ProtocolViolation("wrong count: 2 completions for 3 requests")

    monkeypatch.setattr(checks, "check_reproducible", broken)
    cert = run(REF, scenarios=["greedy"])
    assert cert.verdict != "invalid" and cert.reproducible is False and "wrong count" in cert.reproducibility_note


def test_one_seed_range_for_the_cli_and_certify():
    """Certification seeds are [0, 2**62) everywhere (one validator); request seeds, derived, are 63-bit."""
    from specverify import InvalidArgument
    from specverify.certification.config.options import SEED_LIMIT

    assert SEED_LIMIT == 2**62
    with pytest.raises(InvalidArgument, match=rf"seed={2**62} must be an int in \[0, 2\*\*62\)"):
        run(REF, seed=2**62)
    code, _, err = cli("certify", REF, "--seed", str(2**62))
    assert code == ExitCode.USAGE and f"--seed='{2**62}' must be an int in [0, 2**62)" in err


def test_the_slow_note_follows_the_verdict_line():
    import dataclasses

    cert = run(REF, scenarios=["greedy"])
    noted = dataclasses.replace(cert, reason=cert.reason + "\nnote: the decoder is slow (5 outcomes/s < 1,000)")
    lines = render_text(noted).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("VERDICT"))
    assert lines[at].endswith("only greedy scenarios ran") and lines[at + 1].startswith("note: the decoder is slow")


def test_bad_options_and_factories_are_usage_errors_before_any_work(capsys):
    """What can be refused is refused before a worker starts or a model is built (issue 41: in seconds): a value, a
    combination, an option the factory cannot take, a factory path that does not resolve."""
    cases = [
        (["--block-draws", "0"], "--block-draws='0' must be an int >= 1"),
        (["--block-draws", "5", "--budget", "9"], "--block-draws=5 cannot be used with --budget"),
        (["--engine-option", "foo=1"], "--engine-option foo=1: make_decoder takes"),
        (["--engine-config", "x"], "declares no engine configurations"),
        (["--executor", "ray", "--shard", "1/2", "--counts-out", "p.json"], "with --executor ray"),
    ]
    for extra, message in cases:
        assert main(["certify", REF, "--level", "quick", *extra]) == ExitCode.USAGE, extra
        assert message in capsys.readouterr().err, extra
    assert main(["certify", "specverify.reference:make_decodr"]) == ExitCode.USAGE
    assert "Did you mean 'specverify.reference:make_decoder'" in capsys.readouterr().err
