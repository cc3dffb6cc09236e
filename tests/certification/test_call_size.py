"""``decoder.call_size`` reaches the certifier's calls: the first call of a loop takes the preferred size, none
takes more than the maximum, and a malformed declaration is a set-up failure naming the attribute."""

import pytest

from specverify import certify
from specverify.errors import InvalidArgument
from specverify.protocol import call_size_of
from specverify.reference import make_decoder

SIZES = {}


class SlowPath:
    """The reference through ``__call__`` only (no ``sample``): every draw a request of a call."""

    def __init__(self, target, draft, call_size=None):
        self._inner = make_decoder(target, draft)
        self.capabilities = self._inner.capabilities
        if call_size is not None:
            self.call_size = call_size

    def __call__(self, requests):
        SIZES.setdefault(getattr(self, "call_size", None), []).append(len(requests))
        return self._inner(requests)


def declared(target, draft):
    return SlowPath(target, draft, (600, 1000))


def undeclared(target, draft):
    return SlowPath(target, draft)


def malformed(target, draft):
    return SlowPath(target, draft, (1000, 600))


def test_the_first_call_takes_the_preferred_size_and_none_exceeds_the_maximum():
    SIZES.clear()
    for factory in (declared, undeclared):
        cert = certify(factory, level="quick", isolation="none", scenarios=["temperature-1"], seed=3, sequential=False)
        assert cert.verdict in ("exact", "inconclusive"), cert.reason  # core scenarios left out: inconclusive
        assert all(s.passed for s in cert.scenarios), cert.reason
    assert SIZES[(600, 1000)][0] == 600 and max(SIZES[(600, 1000)]) <= 1000
    assert SIZES[None][0] == 256 and max(SIZES[None]) > 1000  # the certifier's own ramp, up to 8,192


def test_a_malformed_call_size_is_a_set_up_failure():
    cert = certify(malformed, level="quick", isolation="none", scenarios=["temperature-1"])
    assert cert.verdict == "error" and "decoder.call_size=(1000, 600)" in cert.reason


@pytest.mark.parametrize("value", [(0, 5), (5, 4), (1, 1 << 20), [4, 8], (True, 8), (4.0, 8)])
def test_call_size_of_refuses_what_is_not_a_pair_of_sizes(value):
    class Decoder:
        call_size = value

    with pytest.raises(InvalidArgument, match="decoder.call_size="):
        call_size_of(Decoder())
