"""Set-up failures are `error`, never a verdict on the decoder; factories the worker cannot receive are usage
errors that say what to do."""

import pytest

import specverify as sv
from specverify.cli import ExitCode, main
from specverify.errors import InvalidArgument

HERE = "tests.certification.setup_factories"


def certify(factory, **kw):
    return sv.certify(factory, level="quick", scenarios=["greedy"], **kw)


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_a_factory_that_returns_no_decoder_is_error(isolation):
    cert = certify(f"{HERE}:returns_a_string", isolation=isolation)
    assert cert.verdict == "error" and "returned str, not a decoder" in cert.reason


def test_a_worker_that_dies_inside_the_factory_is_error_not_invalid():
    cert = certify(f"{HERE}:dies_inside")
    assert cert.verdict == "error", cert.reason
    assert "died while running the factory (exit code 7)" in cert.reason


def test_a_malformed_declaration_is_error():
    cert = certify(f"{HERE}:bad_prefill", isolation="none")
    assert cert.verdict == "error" and "decoder.prefill_tokens=-1 must be an int" in cert.reason


def test_a_lambda_factory_cannot_reach_the_worker_and_the_message_says_what_to_do():
    from specverify.reference import make_decoder

    with pytest.raises(InvalidArgument, match="use a module-level function .* or --isolation none"):
        certify(lambda target, draft: make_decoder(target, draft))
    assert certify(lambda target, draft: make_decoder(target, draft), isolation="none").verdict == "inconclusive"


def test_the_cli_exit_code_of_a_set_up_failure(capsys):
    code = main(["certify", f"{HERE}:returns_a_string", "--level", "quick", "--scenario", "greedy"])
    assert code == ExitCode.ERROR and "set-up failed" in capsys.readouterr().out


def test_the_engine_description_is_read_again_after_the_run():
    cert = certify(f"{HERE}:described", isolation="none")
    assert cert.engine == {"name": "toy-engine", "version": "1.0", "requested": {"mode": "fast"},
                           "effective": {"mode": "safe"}}  # fmt: skip
    from specverify.report import certificate_from_document, json_document

    assert certificate_from_document(json_document(cert)).engine == cert.engine
    bad = certify(f"{HERE}:bad_engine_info", isolation="none")
    assert bad.verdict == "error" and "decoder.engine_info=" in bad.reason
