"""The plain-path control (``--control``, ``certification/execution/control.py``) on stand-in servers: a deployment
whose plain path serves a law a little off the exact one (``fault="hot"``, as a bf16 deployment does) gets a
certificate that records the control's failure and whose verdict comes from the two-sample comparison with that
plain path, never ``exact``; a deployment whose plain path is exact is certified as without the control. Each
factory below starts a stand-in server for the pair it is given (the reference decoder behind the OpenAI dialect)
and attaches the server adapter to it; the run is the core of the toy matrix at the quick level."""

import json

import pytest

from specverify.adapters.server import DIALECTS, ServerDecoder
from specverify.certification.execution.certify import certify
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.report import certificate_from_document, render_json
from specverify.report.schema import validate_document
from tests.adapters.server.standin import StandIn

HERE = __name__
CORE = ["greedy", "temperature-1", "eos-in-block", "max-tokens-not-multiple"]


class _Served:
    """A stand-in server for ``target``/``draft`` and the server adapter attached to it (closed together)."""

    def __init__(self, target, draft, fault, method):
        self.standin = StandIn(target, draft, fault=fault)
        try:  # no honour probes (the stand-in honours its fields: test_client.py), identical draws in one body
            self.decoder = ServerDecoder(target, draft, dialect=DIALECTS["openai"], method=method,
                                         url=self.standin.url, honour=False, parallel_n=True,
                                         declare_seed=False)  # fmt: skip
        except BaseException:
            self.standin.close()
            raise
        self.capabilities = self.decoder.capabilities

    @property
    def engine_info(self) -> dict:
        return self.decoder.engine_info

    def __call__(self, requests):
        return self.decoder(requests)

    def close(self):
        self.decoder.close()
        self.standin.close()


def exact_speculative(target, draft):
    return _Served(target, draft, None, "exact_speculative")


def exact_plain(target, draft):
    return _Served(target, draft, None, "exact_plain")


def hot_speculative(target, draft):
    return _Served(target, draft, "hot", "hot_speculative")


def hot_plain(target, draft):
    return _Served(target, draft, "hot", "hot_plain")


def _certify(speculative, plain, scenarios=CORE):
    return certify(f"{HERE}:{speculative}", control=f"{HERE}:{plain}", models="toy", level="quick", seed=3,
                   scenarios=scenarios, isolation="none")  # fmt: skip


def test_a_plain_path_off_the_exact_law_falls_back_to_two_sample():
    """The control's scenario alone after the fall-back (fast): two-sample, recorded, and not exact."""
    cert = _certify("hot_speculative", "hot_plain", ["temperature-1"])
    control = cert.engine["control"]
    assert control["passed"] is False and control["scenario"] == "temperature-1", control
    assert control["alpha"] == pytest.approx(1e-7) and control["run_alpha"] == pytest.approx(9e-7)
    assert control["factory"] == f"{HERE}:hot_plain" and control["pvalue"] < control["alpha"]
    (result,) = cert.scenarios
    assert result.covered and result.passed and "two-sample against" in result.note, result.note
    assert cert.verdict == "inconclusive" and cert.reason.startswith("the plain control failed"), cert.reason
    assert cert.alpha == 1e-6 and "--control" in cert.command
    doc = json.loads(render_json(cert))  # the certificate's JSON: valid, the control in its run and engine record
    assert validate_document(doc) == "specverify-certificate" and doc["run"]["control"] == f"{HERE}:hot_plain"
    assert certificate_from_document(doc).engine["control"] == control


@pytest.mark.slow  # ~100 s on 2 shared cores: the core matrix two-sample through HTTP
def test_a_plain_path_off_the_exact_law_is_never_exact_on_the_whole_core():
    cert = _certify("hot_speculative", "hot_plain")
    control = cert.engine["control"]
    assert control["passed"] is False and control["scenario"] == "temperature-1", control
    assert control["alpha"] == pytest.approx(1e-7) and control["run_alpha"] == pytest.approx(9e-7)
    assert control["factory"] == f"{HERE}:hot_plain" and control["pvalue"] < control["alpha"]
    sampling = [r for r in cert.scenarios if r.name != "greedy"]
    assert sampling and all(r.covered and "two-sample against" in r.note for r in sampling), [r.note for r in sampling]
    assert all(r.passed for r in cert.scenarios)  # the speculative path matches its (equally hot) plain path
    assert cert.verdict == "inconclusive" and cert.reason.startswith("never exact: the plain control failed")
    assert cert.alpha == 1e-6 and "--control" in cert.command


@pytest.mark.slow  # ~6 s: kept out of the fast suite's budget for the stand-in server tests
def test_a_speculative_path_that_differs_from_its_plain_path_is_caught_after_the_fall_back():
    cert = _certify("exact_speculative", "hot_plain", ["temperature-1"])  # the plain path is hot, not this one
    assert cert.engine["control"]["passed"] is False
    (result,) = cert.scenarios
    assert result.passed is False and "two-sample against" in result.note  # the comparison rejects the difference
    assert cert.verdict == "inconclusive" and cert.reason.startswith("the plain control failed"), cert.reason
    assert "not exact (greedy not checked): temperature-1" in cert.reason


@pytest.mark.slow  # ~4-8 s: the core matrix against the exact law through HTTP
def test_an_exact_plain_path_certifies_as_without_the_control():
    cert = _certify("exact_speculative", "exact_plain")
    control = cert.engine["control"]
    assert control["passed"] is True and control["pvalue"] > control["alpha"]
    assert not any("two-sample" in r.note for r in cert.scenarios)
    assert cert.verdict == "exact", cert.reason
    assert cert.engine["requested"]["method"] == "exact_speculative"


def test_the_control_goes_without_against():
    with pytest.raises(InvalidArgument, match="control cannot be used with against"):
        certify(f"{HERE}:exact_speculative", control="plain", against="plain")


def test_a_run_planned_without_certify_refuses_the_control_rather_than_dropping_it():
    """The marker's items and shards plan a run directly: there the control would not run, so it is refused."""
    from specverify.certification.config.execution import create_run
    from specverify.certification.execution.plan import plan

    config, execution = create_run(factory=f"{HERE}:exact_speculative", control=f"{HERE}:exact_plain")
    with pytest.raises(InvalidArgument, match="runs before a run is planned"):
        plan(config, execution)


def test_plain_template_names_the_plain_server_for_the_control(tmp_path):
    """``managed_plain`` starts ``plain_template`` where given (``managed`` takes it and uses ``template``): one set
    of engine options for the speculative server and its control."""
    import sys
    from pathlib import Path

    from specverify.adapters.server import managed, managed_plain
    from specverify.oracles.pairs import ToyPairSpec

    pair = ToyPairSpec(vocab_size=6).build()
    server = StandIn(pair.target, pair.draft)
    proxy = Path(__file__).with_name("proxy.py")
    plain = f"{sys.executable} -I {proxy} --to {server.url} --port {{port}}"
    try:
        decoder = managed_plain(pair.target, pair.draft, template="no-such-server --port {port}",
                                plain_template=plain, honour=False, startup_timeout_s=30.0)  # fmt: skip
        try:
            assert "proxy.py" in decoder.engine_info["requested"]["launch"]
            assert len(decoder([Request((0, 1), SamplingParams(max_tokens=3), 3, seed=1)])[0].tokens) <= 3
        finally:
            decoder.close()
        with pytest.raises(InvalidArgument, match="plain_template=''"):
            managed(pair.target, pair.draft, template=plain, plain_template="")
    finally:
        server.close()


def hot_declared(target, draft, precision: str = "bf16"):
    """A speculative deployment that declares its control: its own plain path unless it is served in float32."""
    return _Served(target, draft, "hot", "hot_declared")


def hot_plain_any(target, draft, **_options):
    return _Served(target, draft, "hot", "hot_plain")


hot_declared.default_control = lambda options: None if options.get("precision") == "f32" else f"{HERE}:hot_plain_any"


def test_a_factory_that_declares_its_control_gets_it_without_the_flag(monkeypatch):
    """``factory.default_control(options)`` sets the run's control without ``--control`` (what the control then does
    is the tests above)."""
    from specverify.certification.execution import certify as certify_module
    from specverify.certification.execution import control

    seen = []
    monkeypatch.setattr(control, "run_with_control", lambda config, *a: seen.append(config.control) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        certify_module.execute(certify_module.create_run(factory=f"{HERE}:hot_declared", isolation="none")[0])
    assert seen == [f"{HERE}:hot_plain_any"]


def test_the_declared_control_follows_the_engine_options():
    from specverify.adapters.server import vllm_serve_draft_model, vllm_serve_ngram, vllm_serve_plain
    from specverify.certification.config.execution import create_run
    from specverify.certification.execution.certify import declared_control

    config, _ = create_run(factory=f"{HERE}:hot_declared", engine_options={"precision": "f32"})
    assert declared_control(config) is None
    config, _ = create_run(factory=f"{HERE}:hot_declared", against="plain")
    assert declared_control(config) == f"{HERE}:hot_plain_any"  # certify() skips it beside --against
    for factory in (vllm_serve_draft_model, vllm_serve_ngram):
        assert factory.default_control({}) is None and factory.default_control({"dtype": "float32"}) is None
        assert factory.default_control({"dtype": "bfloat16"}) == "specverify.adapters.server:vllm_serve_plain"
    assert not hasattr(vllm_serve_plain, "default_control")  # the plain deployment is the control itself
