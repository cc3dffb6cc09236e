"""specverify certifies my_engine's speculative decoding. Copy this file; point the factory at your adapter."""

import pytest

from specverify.testing import assert_greedy_equal

SPECULATIVE = "my_engine.adapter:speculative"


@pytest.mark.specverify(factory=SPECULATIVE, require="exact")
def test_speculative_decoding_is_exact(specverify_result):
    # one item per scenario (pytest -n auto spreads them); each fails on its own rejection, and the plugin
    # decides the decoder's verdict once: terminal summary, exit status, --specverify-baseline comparison
    assert specverify_result.status == "pass"


def test_greedy_output_is_the_targets(specverify_certify):
    # the same decoder through the fixture: a Certificate with this session's options
    assert_greedy_equal(specverify_certify(SPECULATIVE, scenarios=["greedy-processors"]))
