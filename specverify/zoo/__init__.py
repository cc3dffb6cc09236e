"""The zoo: known speculative decoders, one per bug mechanism of docs/bugs.md (and the seed), plus exact controls.

Each entry is a factory ``NAME(target, draft, *, entropy=None) -> decoder``, usable as
``specverify certify specverify.zoo:NAME``; the decoder is the vectorized reference with one hook overridden (a few
lines), so it follows the protocol and differs from the exact decoder only by its mechanism. ``entropy`` seeds the
draws of unseeded requests (reproducible tests). ``ZOO`` maps names to :class:`ZooEntry` (verdict, mechanism id in
``specverify.mechanisms.MECHANISMS`` and through it the engines' issues, showcases, estimated TV); each factory's
docstring derives its verdict from docs/design.md's rules.
Importing the package is light: the entry modules (torch, the reference decoders) load on first use of any other
name than ``ZooEntry``; ``specverify.zoo.catalogue`` holds what ``specverify zoo`` lists as plain data.
Entries for draft families, trees and block verification (``specverify.zoo.drafts``) run on their family's
scenarios (``ZooEntry.drafts``, ``--drafts FAMILY``) and are not in the table below (no showcase TV measured);
neither are the entries of ``specverify.zoo.metrics``: the reference's law with wrong reported acceptance, exact
with the certificate's ``metrics`` check failed (``ZooEntry.checks``).

TV to the exact law (``benchmarks/zoo_tv.py``: 200k seeded draws, plug-in minus its null bias, ~95 % interval; "p=0"
counts draws whose outcome has exact probability 0; showcases in ``specverify.zoo.SHOWCASES``; the noise floor at
200k draws is an interval half-width of ~0.012, so TVs below ~0.01 show only through p=0 outcomes)::

 entry                           tag          bugs                         showcase       TV      interval        p=0
 reference                       exact        -                            plain          0.0000  [0.000, 0.024]       0
 never_speculate                 exact        -                            plain          0.0000  [0.000, 0.024]       0
 drop_bonus                      exact        seed                         plain          0.0000  [0.000, 0.024]       0
 draft_bonus_kv_missing          exact        vLLM 3951                    plain          0.0000  [0.000, 0.024]       0
 seed_ignored                    exact        vLLM 6038 6743               plain          0.0006  [0.000, 0.025]       0
 argmax_verify                   greedy-only  SGLang 31214 39253           temp_topk      0.8001  [0.799, 0.812]       0
 temperature_not_in_rejection    greedy-only  vLLM 10198                   temp_topk      0.3222  [0.320, 0.337]   55056
 min_p_bonus_row_only            greedy-only  vLLM 42744                   min_p          0.6093  [0.608, 0.620]  122731
 unset_temperature_greedy_with_top_k
                                 greedy-only  TensorRT-LLM PR 19390        topk_unset_t.  0.8867  [0.886, 0.900]       0
 shared_uniform                  greedy-only  FlashInfer 424               plain          0.0637  [0.063, 0.088]       0
                                                                           near_draft     0.0322  [0.031, 0.056]       0
 inclusive_accept                greedy-only  SGLang 35771                 temp_topk      0.0035  [0.002, 0.015]     714
 last_index_fallback             greedy-only  SGLang 22643                 temp_topk      0.0018  [0.001, 0.014]     431
 resample_from_target            greedy-only  seed                         plain          0.1399  [0.138, 0.165]       0
                                                                           near_draft     0.0491  [0.048, 0.073]       0
 greedy_draft_softmax_q          greedy-only  transformers 32867           plain          0.6161  [0.615, 0.640]       0
 raw_q_processed_draft           greedy-only  transformers 47932           temp_topk      0.2234  [0.222, 0.235]       0
 draft_probs_off_by_one          greedy-only  TensorRT-LLM 12588           plain          0.1633  [0.162, 0.187]       0
                                                                           near_draft     0.1271  [0.126, 0.151]       0
 residual_from_point_mass        greedy-only  xllm PR 2175                 plain          0.1128  [0.111, 0.137]       0
                                                                           near_draft     0.0388  [0.038, 0.063]       0
 argmax_verified_sampled_bonus   greedy-only  ATOM PR 2318                 plain          0.8976  [0.897, 0.922]       0
                                                                           temp_topk      0.7867  [0.786, 0.798]       0
 unseeded_shared_stream          greedy-only  TensorRT-LLM 19487           plain (seeded) 0.0000  [0.000, 0.024]       0
                                              (identical unseeded pairs collide at rate 1.000; Σp² = 0.022)
 padding_drafts_accepted         greedy-only  vLLM finding 13              one_token_p.   0.0483  [0.047, 0.069]       0
                                                                           plain          0.0000  [0.000, 0.024]       0
 grammar_cut_drafts_resampled    greedy-only  vLLM finding 12              grammar        0.0997  [0.098, 0.112]       0
                                                                           plain          0.0000  [0.000, 0.024]       0
 penalties_ignored_in_verify     approximate  SGLang 21258, vLLM 18902     penalties      0.4064  [0.403, 0.428]       0
 masks_dropped_in_verify         approximate  TensorRT-LLM 17955           masks          0.7737  [0.771, 0.805]  157625
 grammar_not_in_verify           approximate  SGLang 6441 (+5)             grammar        0.7684  [0.766, 0.795]  156093
 penalty_last_token_only         approximate  SGLang 33643                 penalties      0.0497  [0.048, 0.069]       0
 logits_processor_skipped_in_verify
                                 approximate  SGLang 26330 21724           logits_proc.   0.7373  [0.732, 0.756]   61784
 min_tokens_counts_rounds        approximate  SGLang 33643                 min_tokens     0.3525  [0.351, 0.376]       0
 residual_softmax                approximate  transformers 28508           plain          0.3184  [0.315, 0.345]       0
                                                                           near_draft     0.1345  [0.132, 0.159]       0
 row0_offset                     approximate  FlashInfer 425               plain          0.2722  [0.270, 0.297]       0
                                                                           near_draft     0.2987  [0.297, 0.323]       0
 bonus_from_draft                approximate  seed                         plain          0.0676  [0.066, 0.092]       0
                                                                           near_draft     0.0603  [0.059, 0.084]       0
 target_kv_not_cropped           approximate  seed                         plain          0.3908  [0.388, 0.416]       0
 penalty_history_keeps_rejected  approximate  seed                         penalties      0.2336  [0.232, 0.253]       0
 grammar_state_not_rolled_back   approximate  seed                         grammar        0.1843  [0.183, 0.198]   35619
 stop_state_not_rolled_back      invalid      seed                         stop           0.0437  [0.042, 0.061]    9242
 eos_leaks_in_round              invalid      SGLang 31599 31569           eos_in_block   0.4183  [0.414, 0.464]   85569
 eos_mid_block_continues         invalid      transformers 47912           eos_in_block   0.4183  [0.414, 0.464]   85569
 length_before_stop              invalid      SGLang 31569                 eos_in_block   0.1224  [0.121, 0.157]   25592
 stop_string_tokens_kept         invalid      vLLM 47616                   stop           0.4458  [0.444, 0.468]   90353
 stream_repeats_token            invalid      seed                         plain          0.0000  [0.000, 0.024]       0
 drafts_charged_to_max_tokens    invalid      LiteRT-LM 2816 ik_llama 2358 plain          0.2956  [0.294, 0.324]   61414
 stop_window_shorter_than_block  invalid      SGLang 23802 27637           stop           0.0722  [0.071, 0.090]   14847
 constant_accept_coin            greedy-only  vllm-ascend PR 13470         plain          0.5349  [0.534, 0.559]       0
 probs_mutated_in_place          greedy-only  vllm-ascend PR 2881, vLLM    plain          0.2054  [0.203, 0.231]       0
 probs_passed_as_logits          greedy-only  vllm-ascend PR 6685          plain          0.0686  [0.067, 0.093]       0
                                                                           temp_topk      0.0516  [0.051, 0.064]    8293
 later_rows_read_first_candidate approximate  ds4 PR 358                   plain          0.2116  [0.210, 0.236]       0
 verify_rows_capped_at_four      approximate  SGLang PR 32183              gamma_sweep    0.0732  [0.072, 0.145]       0
                                                                           plain          0.0000  [0.000, 0.024]       0
 stale_row_after_partial_accept  approximate  ds4 750                      plain          0.0791  [0.078, 0.103]       0
 boundary_token_duplicated       approximate  imp 667                      plain          0.1680  [0.166, 0.193]       0
 decode_before_chunked_prefill   approximate  model-serving-minefield 36   long_prompt    0.4823  [0.481, 0.505]       0
                                                                           plain          0.0000  [0.000, 0.024]       0
 confidence_fallback             exact        -                            plain          0.0000  [0.000, 0.023]       0
 stale_seed_after_fallback       approximate  vmlx PR 150 173              plain          0.6567  [0.655, 0.681]       0
 repetition_penalty_bonus_row_stale
                                 approximate  SGLang PR 28242              penalties      0.1512  [0.150, 0.174]       0
 confirmed_token_twice_in_verify approximate  mlx-lm 1175                  penalties      0.2562  [0.255, 0.279]       0
 drafter_kv_rewound_one_round    exact        mlxcel 994                   plain          0.0000  [0.000, 0.024]       0
 placeholder_fed_to_drafter      exact        TensorRT-LLM PR 15233        plain          0.0000  [0.000, 0.022]       0
 first_seeded_seed_for_call      exact        -                            plain          0.0000  [0.000, 0.024]       0
 greedy_ties_last_index          approximate  -                            ties           0.0000  [0.000, 0.023]       0
                                              (sampling untouched; greedy paths crossing a tie emit the other token)
 any_greedy_request_greedy_call  greedy-only  -                            plain          0.9206  (exact, behind
                                              a greedy request in the same call; alone its law is exact)
 window_ring_not_restored        approximate  -                            sliding-window 0.0696  [0.068, 0.086]       0
                                              (the matrix's scenario: showcases have no window; TV 0 there)
 recurrent_state_not_rolled_back approximate  llama.cpp 20075              recurrent      0.1279  (exact, on the
                                              matrix's scenario: benchmarks/recurrent_tv.py; 0 on KV targets)

The TVs are large where a showcase turns the mechanism on fully (a processor the bug drops, a far draft);
on the plain showcase most processor bugs are exactly 0 and residual bugs shrink with the rejection rate
(``near_draft``). The invalid entries' TV is mostly mass on outcomes of probability 0; ``length_before_stop`` and
``stream_repeats_token`` emit the exact token law with a wrong finish reason or stream. ``padding_drafts_accepted``
changes only the first round of a one-token prompt (``one_token_prompt``); on every longer prompt it is exact.
"""

from __future__ import annotations

import importlib

from specverify.zoo._registry import ZooEntry, registered  # noqa: F401 -- ZooEntry: public (__all__)

# the modules that register entries, in catalogue order (the order of ``ZOO``), and the order of their names in
# ``__all__``
_MODULES = (
    "batch",
    "controls",
    "drafts",
    "metrics",
    "processors",
    "recurrent",
    "rows",
    "rule",
    "sampler",
    "schedule",
    "state",
    "window",
)
_ALL_ORDER = (
    "controls",
    "processors",
    "rule",
    "sampler",
    "rows",
    "state",
    "schedule",
    "window",
    "recurrent",
    "batch",
    "drafts",
    "metrics",
)


def _load() -> None:
    """Import the entry modules (torch, the reference decoders) and bind their factories, ``ZOO``, ``SHOWCASES`` and
    ``__all__`` here. Done on first use, so that ``specverify.zoo.catalogue`` (what ``specverify zoo`` lists) is
    light."""
    bound, exported = globals(), {}
    for short in _MODULES:
        module = importlib.import_module(f"{__name__}.{short}")
        exported[short] = list(module.__all__)
        bound.update({name: getattr(module, name) for name in module.__all__})
    from specverify.zoo.showcases import SHOWCASES, ShowcaseScenario

    rank = {f"{__name__}.{short}": i for i, short in enumerate(_MODULES)}
    # by module, then in each module's own order: the same whichever zoo module was imported first
    entries = sorted(registered().values(), key=lambda e: rank.get(e.factory.__module__, len(rank)))
    bound.update(SHOWCASES=SHOWCASES, ShowcaseScenario=ShowcaseScenario)
    bound["__all__"] = ["ZOO", "ZooEntry", "SHOWCASES", "ShowcaseScenario", "zoo_entries"]
    bound["__all__"] += [name for short in _ALL_ORDER for name in exported[short]]
    bound["ZOO"] = {e.name: e for e in entries}  # last: its presence says the zoo is loaded


def __getattr__(name: str) -> object:
    if name.startswith("__") and name != "__all__":  # probed by tools (__wrapped__, ...): never worth a load
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if "ZOO" not in globals():
        _load()
    if name not in globals():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[name]


def __dir__() -> list:
    return sorted(set(globals()) | set(__getattr__("__all__")))


def zoo_entries() -> list:
    """Every zoo entry, in catalogue order (``specverify.zoo.catalogue`` lists them without importing any)."""
    return list(__getattr__("ZOO").values())
