"""A server certificate produced by the pytest plugin: ``@pytest.mark.specverify`` on a factory of the server adapter
in a test module run by a real pytest (``pytester``), with ``--specverify-json`` writing the decoder's certificate.
Here the server is a stand-in (``test_control``'s factory: a stand-in per pair, the server adapter attached to it
over HTTP); test_vllm_serve_engine.py runs the same path on ``vllm serve``."""

import json

MODULE = """
import pytest

@pytest.mark.specverify(factory="tests.adapters.server.test_control:exact_speculative", level="quick",
                        scenarios=["temperature-1"], isolation="none", allow_inconclusive=True)
def test_server():
    pass
"""


def test_the_plugin_writes_a_server_certificate(pytester):
    path = pytester.path / "cert.json"
    pytester.makepyfile(test_server_plugin=MODULE)
    result = pytester.runpytest("-p", "no:randomly", "--specverify-json", str(path))
    result.assert_outcomes(passed=1)
    cert = json.loads(path.read_text())
    assert cert["factory"] == "tests.adapters.server.test_control:exact_speculative"
    assert cert["engine"]["requested"]["mode"] == "attached" and cert["engine"]["requested"]["dialect"] == "openai"
    assert cert["engine"]["state"]["requests"] > 0  # the draws went through HTTP
    (scenario,) = [s for s in cert["scenarios"] if s["name"] == "temperature-1"]
    assert scenario["covered"] and scenario["passed"] and scenario["n"] > 0, scenario
