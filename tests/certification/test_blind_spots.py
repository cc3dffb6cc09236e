"""Blind spots of the matrix, each closed by a scenario that a decoder with only that defect fails.

- ``min-tokens`` has γ ≥ ``min_tokens``, so the first round's bonus row never lies before ``min_tokens`` and a
  decoder that lets EOS through there passed it; ``min-tokens-short-gamma`` (γ 1 < ``min_tokens`` 3) fails it. (The
  greedy scenarios send γ 1 to 4 whatever the scenario's γ, so ``greedy-masks`` already saw it.)
- ``greedy-masks`` bundles ``min_tokens`` with ``bad_token_ids``: a decoder declaring only ``min_tokens`` lost its
  greedy check of the mask; ``greedy-min-tokens`` needs ``min_tokens`` alone.
"""

import pytest

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


# issue 45's blind spots: each zoo entry passes the scenarios the old matrix had and fails the one that closes it
CLOSED_BY = {
    # greedy requests travelled only with greedy ones: mixed-batch (sampled members only) passes it
    "any_greedy_request_greedy_call": (["mixed-batch", "greedy"], "mixed-kinds"),
    # no exact tie in any greedy scenario
    "greedy_ties_last_index": (["greedy", "greedy-processors"], "greedy-ties"),
    # greedy prompts of 1-5 tokens: only long-prompt's law saw it (greedy-only instead of approximate)
    "decode_before_chunked_prefill": (["greedy"], "greedy-long-prompts"),
    # γ ≤ 4 in greedy, γ 5 with 4 tokens in sampling: rows past the cap never judged a draft
    "verify_rows_capped_at_four": (["greedy", "gamma-5", "temperature-1"], "greedy-gamma-sweep"),
}


# the fast suite keeps one (~1 s); tests/quality/test_zoo_axes.py shows each entry latent on the old shapes and
# shown on the new ones without certifying
FAST_CLOSED = ("greedy_ties_last_index",)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n in FAST_CLOSED else [pytest.mark.slow]) for n in sorted(CLOSED_BY)]
)
def test_the_old_scenarios_pass_the_entry_and_the_new_one_refuses_it(name):
    old, new = CLOSED_BY[name]
    cert = certify(f"specverify.zoo:{name}", level="quick", seed=0, scenarios=old + [new], isolation="none")
    failed = {s.scenario for s in cert.scenarios if s.covered and not s.passed}
    assert failed == {new}, f"{name}: failing {sorted(failed)} ({cert.reason})"


@pytest.mark.slow
def test_the_chunked_prefill_entry_is_greedy_only_on_the_old_matrix_and_approximate_on_the_new():
    """The old matrix saw the early decode only through ``long-prompt``'s law; greedy prompts of 10-30 tokens give it
    its tag."""
    name, old = "specverify.zoo:decode_before_chunked_prefill", ["greedy", "long-prompt"]
    core = ["temperature-1", "eos-in-block", "max-tokens-not-multiple"]
    before = certify(name, level="quick", seed=0, scenarios=core + old, isolation="none")
    after = certify(name, level="quick", seed=0, scenarios=core + old + ["greedy-long-prompts"], isolation="none")
    assert (before.verdict, after.verdict) == ("greedy-only", "approximate"), (before.reason, after.reason)


def test_require_reproducible_fails_a_decoder_seeded_by_its_calls_first_seed():
    """The reproducibility check puts a seeded neighbour ahead of the request: a call whose generator is seeded by
    its first seed answers otherwise than alone (the unseeded neighbours it had could not show it)."""
    cert = certify(
        "specverify.zoo:first_seeded_seed_for_call", level="quick", seed=0, scenarios=["temperature-1"],
        isolation="none",
    )  # fmt: skip
    assert cert.reproducible is False and "outputs differ" in cert.reproducibility_note, cert.reproducibility_note
    assert all(s.passed for s in cert.scenarios), cert.reason  # its law is exact
    reference = certify(
        "specverify.zoo:reference", level="quick", seed=0, scenarios=["temperature-1"], isolation="none"
    )
    assert reference.reproducible is True, reference.reproducibility_note
