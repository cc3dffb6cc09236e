"""The certifier gives every zoo entry exactly its tag (test the tester).

Each entry runs at the cheapest level whose detectable TV is at most half the entry's estimated TV (``ZooEntry.tv``;
no TV: quick; TV below twice thorough's 0.01 — detected through outcomes of exact probability 0 — thorough). The
full scenario matrix runs under ``@pytest.mark.slow``; thorough runs use the core scenarios plus those where the
entry's mechanism shows.

The fast suite certifies one entry per verdict tag and per draft family (greedy plus the one scenario that decides its
tag: ~1 s each), the invalid entries on the scenario that shows them, and a metrics entry per rule. Every other
entry's certification runs under ``-m slow``; its mechanism stays in the fast suite through ``test_zoo_direct.py``,
which checks what the verdict rules look at for its tag without certifying. ``fast_checks()`` names, for every
entry, the fast test that keeps it, and ``test_every_entry_is_checked_in_the_fast_suite`` fails when an entry has
none, or when the fast certifications miss a tag or a family.

An entry whose mechanism no scenario of the matrix reaches (``BLIND_SPOTS``) gets the reference's verdict there: its
slow certifications are strict xfails, and its fast check is the direct one.
"""

import pytest

from specverify import Level, certify
from specverify.certification import CORE, SCENARIOS
from specverify.certification.config.run_config import RunConfig
from specverify.enums import DraftFamily, Verdict
from specverify.zoo import ZOO, zoo_entries

SHOWS_IN = {  # the certifier scenario where an invalid entry breaks the protocol
    "stop_state_not_rolled_back": "stop-spanning",
    "eos_leaks_in_round": "eos-in-block",
    "eos_mid_block_continues": "eos-in-block",
    "length_before_stop": "eos-in-block",
    "stop_string_tokens_kept": "stop-spanning",
    "stream_repeats_token": "greedy",
    "drafts_charged_to_max_tokens": "temperature-1",
    "stop_window_shorter_than_block": "stop-spanning",
}
THOROUGH_EXTRA = ("target-zero", "top-k", "top-p", "min-p", "min-tokens", "greedy-processors")


def level_for(entry) -> str:
    if entry.tv is None:
        return "quick"
    fits = [level for level in sorted(Level, key=lambda lv: -lv.epsilon) if level.epsilon <= entry.tv / 2]
    return fits[0] if fits else "thorough"


def certified(name, level, scenarios=None):
    drafts = ZOO[name].drafts  # draft-family entries run on their family's matrix
    return certify(
        f"specverify.zoo:{name}", level=level, seed=0, alpha=1e-6, scenarios=scenarios, isolation="none", drafts=drafts
    )


def test_levels_follow_the_entries_tv():
    assert level_for(ZOO["reference"]) == "quick" and level_for(ZOO["argmax_verify"]) == "quick"
    assert level_for(ZOO["shared_uniform"]) == "standard" and level_for(ZOO["inclusive_accept"]) == "thorough"


def test_reference_is_exact():
    cert = certified("reference", "quick", list(CORE))
    assert cert.verdict == "exact", cert.reason
    assert cert.failed_checks == () and cert.metrics_ok is True, cert.metrics_note


METRIC_ENTRIES = [n for n in ZOO if ZOO[n].checks and ZOO[n].factory.__module__ == "specverify.zoo.metrics"]
# entries outside specverify.zoo.metrics that fail a named check beside their verdict: an acceptance below its exact
# expectation (a worse draft context, fallback rounds) or a reproducibility that depends on the call's neighbours
OTHER_CHECK_ENTRIES = [n for n in ZOO if ZOO[n].checks and n not in METRIC_ENTRIES]
FAST_OTHER_CHECK_ENTRIES = ("first_seeded_seed_for_call",)
# ~3 s each: the fast suite decides one entry caught by the consistency rule, one caught by an interval and one by
# a counter identity (the counters check)
FAST_METRIC_ENTRIES = (
    "acceptance_counts_emitted_token",
    "acceptance_rate_mean_of_ratios",
    "acceptance_per_position_from_one_dp_engine",
)
METRIC_RULE = {  # the part of the metrics (or counters) check each entry fails (specverify/zoo/metrics.py)
    "acceptance_counts_emitted_token": "consistency",
    "acceptance_counts_drafts_after_eos": "consistency",
    "acceptance_over_reported_when_rejected": "consistency",
    "acceptance_rate_mean_of_ratios": "interval",
    "acceptance_partial_accept_restore_replay": "interval",
    "acceptance_point_mass_fallback": "interval",
    "acceptance_per_position_from_one_dp_engine": "identity",
    "acceptance_rate_denominator_steps_plus_one": "identity",
    "acceptance_counted_past_stop": "identity",
}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n in FAST_METRIC_ENTRIES else [pytest.mark.slow]) for n in METRIC_ENTRIES]
)
def test_metric_entry_keeps_its_verdict_and_fails_exactly_its_check(name):
    """Entries whose law is exact and whose reported acceptance is wrong (specverify.zoo.metrics): the core decides
    the verdict; the named check fails, and only it."""
    entry = ZOO[name]
    cert = certified(name, level_for(entry), list(CORE))
    assert cert.verdict == entry.verdict, f"{name}: {cert.verdict} ({cert.reason})"
    assert cert.failed_checks == entry.checks, f"{name}: {cert.failed_checks} ({cert.metrics_note})"
    assert cert.meets(entry.verdict) and not cert.meets(entry.verdict, require_metrics=True)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[] if n in FAST_OTHER_CHECK_ENTRIES else [pytest.mark.slow]) for n in OTHER_CHECK_ENTRIES],
)
def test_check_entry_keeps_its_verdict_and_fails_exactly_its_check(name):
    """Entries outside the metrics module tagged with a failed check: on the core, exactly their verdict and check."""
    entry = ZOO[name]
    cert = certified(name, level_for(entry), list(CORE))
    assert cert.verdict == entry.verdict, f"{name}: {cert.verdict} ({cert.reason})"
    assert cert.failed_checks == entry.checks, f"{name}: {cert.failed_checks} ({cert.metrics_note})"
    required = {"reproducible": dict(require_reproducible=True), "metrics": dict(require_metrics=True)}
    assert cert.meets(entry.verdict) and not cert.meets(entry.verdict, **required[entry.checks[0]])


def test_the_metric_entries_are_the_metrics_modules():
    from specverify.zoo.metrics import __all__ as metric_entries

    assert set(METRIC_ENTRIES) == set(metric_entries)
    for name in metric_entries:  # an entry caught by a counter identity fails the counters check, the rest metrics
        assert ZOO[name].checks == (("counters",) if METRIC_RULE[name] == "identity" else ("metrics",)), name


@pytest.mark.parametrize("name", sorted(SHOWS_IN))
def test_invalid_entry_is_invalid_on_its_scenario(name):
    assert ZOO[name].verdict == "invalid"
    cert = certified(name, level_for(ZOO[name]), [SHOWS_IN[name]])
    assert cert.verdict == "invalid", cert.reason


GREEDY = tuple(name for name, s in SCENARIOS.items() if s.kind == "greedy")
SHOWS_LAW = {  # sampling scenarios (beyond the core) where a greedy-only entry's law breaks
    "temperature_not_in_rejection": ("temperature-0.5",),
    "min_p_bonus_row_only": ("min-p",),
    "first_request_params_for_batch": ("mixed-batch",),
    "finishing_token_not_in_history": ("multi-turn",),
    "padding_drafts_accepted": ("one-token-prompt",),
    "grammar_cut_drafts_resampled": ("grammar-dead-end",),
    "raw_q_processed_draft": ("top-k",),
    "unset_temperature_greedy_with_top_k": ("top-k",),  # top-k with the temperature unset
    "unseeded_shared_stream": ("unseeded-collision",),
    "inclusive_accept": ("top-k",),
    "last_index_fallback": ("top-k",),
    "rng_keyed_by_batch_position": ("batch-composition",),
    "corrupts_beyond_two_sequences": ("batch-composition",),
    "any_greedy_request_greedy_call": ("mixed-kinds",),
    "sampled_call_samples_greedy_rows": ("mixed-kinds",),  # approximate: its greedy member's outputs (rule 2)
}


# entries of specverify.zoo.drafts: the fewest scenarios that decide their tag (greedy-only: greedy passes and one
# sampling scenario fails; approximate: greedy fails; exact: the core), on their draft family's matrix
DECIDED_BY = {
    "medusa_padding_as_token_0": ("greedy", "tree-padded"),
    "medusa_independent_paths": ("greedy", "tree-top-k"),
    "tree_slot_not_reordered": ("greedy", "temperature-1"),
    "block_token_wise_rule": ("greedy", "temperature-1"),
    "block_draft_probs_none": ("greedy", "temperature-1"),
    "block_draws_keyed_by_position": ("greedy", "temperature-0.5"),
    "bf16_draft_fp32_ratio": ("greedy", "large-logits"),
    "draft_sampler_without_temperature": ("greedy", "temperature-1"),
    "sampled_silently_greedy": ("greedy", "temperature-1"),
    "silent_plain_fallback": CORE,
    "recurrent_state_from_first_block": ("greedy",),
    "typical_acceptance": ("greedy", "temperature-1"),
    "threshold_acceptance": ("greedy", "temperature-1"),
    "relaxed_top_k_acceptance": ("greedy", "temperature-1"),
    "synthetic_acceptance": ("greedy",),
    "tree_logits_slice_shifted": ("greedy",),
    "tree_nodes_at_span_index": ("greedy", "greedy-tree-positional"),
}


# the fast suite certifies one entry per draft family (greedy-only, approximate: the tags the tests above leave out;
# exact and invalid are certified above): ~1 s each, greedy plus the scenario that decides the tag; every other entry
# is certified under -m slow, its mechanism checked by test_zoo_direct.py (fast_checks() below)
FAST_TAG_ENTRIES = {
    "synthetic_acceptance",  # approximate, ar (greedy only)
    "tree_slot_not_reordered",  # greedy-only, tree
    "block_token_wise_rule",  # greedy-only, mtp
    "recurrent_state_from_first_block",  # approximate, ngram (greedy only)
    "draft_sampler_without_temperature",  # greedy-only, heads
    "bf16_draft_fp32_ratio",  # greedy-only, markov
    "sampled_call_samples_greedy_rows",  # approximate through a mixed scenario's greedy member, not greedy-only
}


def test_every_draft_family_entry_has_its_deciding_scenarios():
    from specverify.zoo.drafts import __all__ as drafts_entries

    assert set(DECIDED_BY) == set(drafts_entries)


# entries whose mechanism no scenario of the matrix reaches: certify gives them the reference's verdict (exact)
# until one does; strict, so a scenario that starts catching one fails here and the mark comes off
# (padding_drafts_accepted was one until the toy matrix got one-token-prompt)
BLIND_SPOTS: dict[str, str] = {}


def slow_marks(name) -> list:
    blind = [pytest.mark.xfail(strict=True, reason=BLIND_SPOTS[name])] if name in BLIND_SPOTS else []
    return [pytest.mark.slow] + blind


TAG_PARAMS = [
    pytest.param(n, marks=[] if n in FAST_TAG_ENTRIES else slow_marks(n))
    for n in ZOO
    if ZOO[n].verdict != "invalid" and not ZOO[n].checks  # those: test_metric_entry_keeps_its_verdict_...
]


@pytest.mark.parametrize("name", TAG_PARAMS)
def test_entry_gets_exactly_its_tag_on_the_scenarios_that_show_it(name):
    """Core + every greedy scenario + where the entry's law breaks: enough to decide exactly its tag."""
    entry = ZOO[name]
    scenarios = list(CORE) + [g for g in GREEDY if g not in CORE] + list(SHOWS_LAW.get(name, ()))
    scenarios = list(DECIDED_BY.get(name, scenarios))
    cert = certified(name, level_for(entry), scenarios)
    assert cert.verdict == entry.verdict, f"{name} at {level_for(entry)}: {cert.verdict} ({cert.reason})"


def test_every_entry_resolves_its_draft_family_without_drafts():
    """``specverify certify specverify.zoo:NAME`` picks the entry's family by itself (``RunConfig.drafts`` None)."""
    for entry in zoo_entries():
        config = RunConfig(factory=f"specverify.zoo:{entry.name}").with_factory_drafts(entry.factory)
        assert config.draft_family == entry.drafts, f"{entry.name}: {config.draft_family}, tagged {entry.drafts}"


def test_a_tree_entry_gets_its_tag_without_drafts():
    """A tree entry certified as a user would name it, no ``drafts=``, on the scenarios that decide its tag: its
    family's matrix, its tag (this was ``error`` before the factory's family was resolved: "must be a tree draft")."""
    name = "medusa_padding_as_token_0"
    cert = certify(
        f"specverify.zoo:{name}", level="quick", seed=0, alpha=1e-6, scenarios=list(DECIDED_BY[name]), isolation="none"
    )
    assert cert.config.draft_family == "tree" and cert.verdict == ZOO[name].verdict, cert.reason


def fast_certified() -> dict:
    """Entries the fast suite certifies, each with the test here that does."""
    tests = {
        "reference": "test_reference_is_exact",
        "medusa_padding_as_token_0": "test_a_tree_entry_gets_its_tag_without_drafts",
    }
    tests |= {n: "test_invalid_entry_is_invalid_on_its_scenario" for n in SHOWS_IN}
    tests |= {n: "test_metric_entry_keeps_its_verdict_and_fails_exactly_its_check" for n in FAST_METRIC_ENTRIES}
    tests |= {n: "test_check_entry_keeps_its_verdict_and_fails_exactly_its_check" for n in FAST_OTHER_CHECK_ENTRIES}
    return tests | {n: "test_entry_gets_exactly_its_tag_on_the_scenarios_that_show_it" for n in FAST_TAG_ENTRIES}


def fast_checks() -> dict:
    """Every entry, with the fast test that keeps its mechanism: its certification here, else its direct check in
    test_zoo_direct.py (for a metrics entry: its law there, its wrong acceptance through a certified entry failing the
    same rule of the metrics check)."""
    from tests.quality.test_zoo_direct import DIRECT

    checks = {n: f"test_zoo_direct.py::{test}[{n}]" for test, names in DIRECT.items() for n in names}
    checks["unseeded_shared_stream"] += " and test_collision_test_over_identical_unseeded_pairs[unseeded_shared_stream]"
    for name in set(METRIC_ENTRIES) - set(FAST_METRIC_ENTRIES):
        (twin,) = [n for n in FAST_METRIC_ENTRIES if METRIC_RULE[n] == METRIC_RULE[name]]
        checks[name] += f" and test_metric_entry_keeps_its_verdict_and_fails_exactly_its_check[{twin}]"
    return checks | {n: f"test_zoo_certify.py::{test}[{n}]" for n, test in fast_certified().items()}


def test_every_entry_is_checked_in_the_fast_suite():
    from tests.quality import test_zoo_direct

    checks = fast_checks()
    assert set(checks) == set(ZOO), f"no fast test keeps {sorted(set(ZOO) - set(checks))}"
    assert set(METRIC_RULE) == set(METRIC_ENTRIES)
    assert all(callable(getattr(test_zoo_direct, test)) for test in test_zoo_direct.DIRECT)
    certified = fast_certified()
    assert {ZOO[n].verdict for n in certified} == set(Verdict.decoder_verdicts())
    assert {ZOO[n].drafts for n in certified} == set(DraftFamily) == {e.drafts for e in ZOO.values()}
    fast_params = {p.values[0] for p in TAG_PARAMS if not p.marks}
    assert fast_params == FAST_TAG_ENTRIES, "FAST_TAG_ENTRIES are exactly the fast parameters"
    assert not set(BLIND_SPOTS) & set(certified), "a blind spot cannot be certified in the fast suite"


@pytest.mark.parametrize("name", [pytest.param(n, marks=slow_marks(n)) for n in ZOO])
def test_entry_gets_exactly_its_tag(name):
    entry = ZOO[name]
    level = level_for(entry)
    scenarios = list(CORE) + list(THOROUGH_EXTRA) if level == "thorough" and entry.drafts == "ar" else None
    cert = certified(name, level, scenarios)
    assert cert.verdict == entry.verdict, f"{name} at {level}: {cert.verdict} ({cert.reason})"
