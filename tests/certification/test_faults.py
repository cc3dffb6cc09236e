"""Faults in the worker process (isolation "process", the default): a decoder whose engine dies inside a call —
a segfault, ``os._exit``, a SIGKILL as the OOM killer sends — is ``invalid``, naming the call and the exit code, and
the scenarios finished before it keep their results; a death inside the factory is ``error`` (nothing is said of
the decoder); an engine that hangs inside a call is killed at the timeout and named."""

import pytest

from specverify import certify

F = "tests.certification.fault_decoders"
SCENARIOS = ["greedy", "temperature-1"]  # greedy never triggers the fault: it finishes first


@pytest.mark.parametrize("factory, code", [("segfault", -11), ("exits", 7), ("sigkill", -9)])
def test_a_worker_that_dies_in_a_call_is_invalid_and_keeps_what_finished(factory, code):
    cert = certify(f"{F}:{factory}", level="quick", scenarios=SCENARIOS, timeout_s=60)
    assert cert.verdict == "invalid", cert.reason
    assert "the worker process died while running decoder.sample(request, n=" in cert.reason
    assert f"(exit code {code})" in cert.reason and "Reproduce: specverify certify" in cert.reason
    results = {s.name: s for s in cert.scenarios}
    assert results["greedy"].passed is True  # finished before the fault: kept
    assert results["temperature-1"].passed is False and f"exit code {code}" in results["temperature-1"].violation


@pytest.mark.parametrize("factory, code", [("factory_exits", 3), ("factory_segfaults", -11)])
def test_a_death_inside_the_factory_is_error(factory, code):
    cert = certify(f"{F}:{factory}", level="quick", scenarios=SCENARIOS, timeout_s=60)
    assert cert.verdict == "error", cert.reason
    assert f"the worker process died while running the factory (exit code {code})" in cert.reason


def test_an_engine_that_hangs_in_a_call_is_killed_at_the_timeout_and_named():
    cert = certify(f"{F}:hangs", level="quick", scenarios=SCENARIOS, timeout_s=2.0)
    assert cert.verdict == "invalid", cert.reason
    reason = cert.reason
    assert "temperature-1" in reason and "hang" in reason and "decoder.sample(request, n=" in reason, reason
    assert {s.name: s.passed for s in cert.scenarios}["greedy"] is True
