"""Blind spots of the matrix, each closed by a scenario that a decoder with only that defect fails.

- ``min-tokens`` has γ ≥ ``min_tokens``, so the first round's bonus row never lies before ``min_tokens`` and a
  decoder that lets EOS through there passed it; ``min-tokens-short-gamma`` (γ 1 < ``min_tokens`` 3) fails it. (The
  greedy scenarios send γ 1 to 4 whatever the scenario's γ, so ``greedy-masks`` already saw it.)
- ``greedy-masks`` bundles ``min_tokens`` with ``bad_token_ids``: a decoder declaring only ``min_tokens`` lost its
  greedy check of the mask; ``greedy-min-tokens`` needs ``min_tokens`` alone.
"""

from specverify import certify
from specverify.zoo import min_tokens_bonus_unmasked

SCENARIOS = ["min-tokens", "greedy-masks", "min-tokens-short-gamma", "greedy-min-tokens"]


def results(factory):
    cert = certify(factory, level="quick", seed=0, scenarios=SCENARIOS, isolation="none")
    return cert, {s.name: s for s in cert.scenarios}


def test_the_bonus_row_unmasked_passes_min_tokens_and_fails_the_short_gamma_shape():
    cert, got = results("specverify.zoo:min_tokens_bonus_unmasked")
    assert got["min-tokens"].passed, "the blind spot: γ ≥ min_tokens cannot show it"
    assert not got["min-tokens-short-gamma"].passed, cert.reason
    assert not got["greedy-masks"].passed and not got["greedy-min-tokens"].passed  # greedy: γ 1..4
    assert cert.verdict == "approximate", cert.reason  # greedy output differs: docs/design.md's rules


def without_bad_tokens(target, draft):
    """The zoo entry, declaring every capability but ``bad_token_ids``."""
    decoder = min_tokens_bonus_unmasked(target, draft, entropy=0)
    decoder.capabilities = frozenset(decoder.capabilities) - {"bad_token_ids"}
    return decoder


def test_a_decoder_without_bad_token_ids_keeps_its_greedy_min_tokens_check():
    cert, got = results(without_bad_tokens)
    assert not got["greedy-masks"].covered  # needs bad_token_ids, not declared
    assert got["greedy-min-tokens"].covered and not got["greedy-min-tokens"].passed, cert.reason
