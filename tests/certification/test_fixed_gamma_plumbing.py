"""``decoder.fixed_gamma`` reaches the checks through the runner (DecoderHandle.fixed_gamma): through the whole
certifier, batch composition gives a fixed-γ decoder same-γ neighbours and its greedy calls hold one γ each, and a
decoder without the declaration keeps the mixed-γ neighbours (the declaration changes the plan, never the law)."""

import pytest

from specverify import certify
from specverify.reference import VectorizedDecoder

CALLS = {}


class _Recording(VectorizedDecoder):
    def __call__(self, requests):
        CALLS.setdefault(type(self).__name__, []).append({r.num_draft_tokens for r in requests})
        return super().__call__(requests)


class FixedGamma(_Recording):
    fixed_gamma = True


class AnyGamma(_Recording):
    pass


def fixed(target, draft):
    return FixedGamma(target, draft)


def any_gamma(target, draft):
    return AnyGamma(target, draft)


def _mixed_calls(factory, name, scenarios, isolation="none"):
    CALLS.pop(name, None)
    cert = certify(factory, level="quick", isolation=isolation, scenarios=scenarios)
    assert all(s.passed for s in cert.scenarios), cert.reason
    return [c for c in CALLS[name] if len(c) > 1], len(CALLS[name])


def test_fixed_gamma_reaches_the_greedy_calls_and_the_reproducibility_batch():
    mixed, total = _mixed_calls(fixed, "FixedGamma", ["greedy", "greedy-penalties"])
    assert total > 0 and not mixed, f"{len(mixed)} of {total} calls mix γ: {mixed[:3]}"
    mixed, _ = _mixed_calls(any_gamma, "AnyGamma", ["greedy", "greedy-penalties"])
    assert mixed  # without the declaration each scenario's requests keep their interleaved γ in one call


@pytest.mark.slow
@pytest.mark.parametrize("factory, name", [(fixed, "FixedGamma"), (any_gamma, "AnyGamma")])
def test_fixed_gamma_reaches_batch_composition(factory, name):
    mixed, total = _mixed_calls(factory, name, ["batch-composition", "greedy"])
    if name == "FixedGamma":
        assert not mixed, f"{len(mixed)} of {total} calls mix γ: {mixed[:3]}"
    else:
        assert mixed, "composition's neighbours of other γ were expected in some call"
