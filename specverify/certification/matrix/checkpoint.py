"""The scenario matrix on the checkpoint family: the toy matrix's scenarios on at most three checkpoint pairs.

Each toy knob maps onto the checkpoint spec (docs/design.md, model families):

==================  ==========================================================================================
toy knob            checkpoint
==================  ==========================================================================================
``vocab_size``      6 for every pair (5 strings and EOS), so each scenario keeps ≤ 4 new tokens
``target_scale``    ``init_scale`` (0.2; 0.35 for the sharp pair: near-deterministic rows)
``draft_distance``  ``draft_sigma`` (0.05 ≈ TV 0.33 per position; 0.005 ≈ TV 0.03; 0.1 ≈ TV 0.53)
``eos_bias``        ``eos_scale`` (-1 flips the EOS row: EOS ends about half the outputs of 4 tokens)
``*_zero``          none: a softmax has no exact zeros (``target-zero`` and ``draft-zero`` are toy-only)
==================  ==========================================================================================

``long-prompt`` is about the toy paged pool and ``multi-turn``'s prompt holds a toy output, so neither is in the
default checkpoint matrix; both have checkpoint versions that an engine configuration adds to its own matrix
(:data:`CONFIGURATION_SCENARIOS`, ``EngineConfig.scenarios``, below). Engines pay a start-up per pair, so every
scenario runs on one of three pairs; laws stay small (``max_tokens`` 3–4) and every scenario keeps ≥ 1e-3 between
its probabilities and the processor cut points (checked by a test and again before the scenario runs).

**Configuration scenarios** (``configuration_scenarios``): scenarios that create an engine state, run only by the
configurations that name them, so the default matrix and its α plan stay as they are. The six below run on the
main pair at γ 3 and ``max_tokens`` 3, in this order (the run order keeps it: same pair, same γ, so one engine runs
them):

- ``one-token-prompt``: the prompt ``(0,)`` at temperature 1. A scheduler that pads a new request with a single
  token to compute to a uniform decode step (vLLM: ``-1`` drafts, finding 13) does so for such requests admitted
  while others run; no scenario of the default matrices has a one-token prompt.

- ``second-block``: the first 28 tokens of :data:`TURN_1_PROMPT`. A scheduler that admits a request with its prompt
  and γ lookahead slots (31: one block) must find a second block for the first round (28 + 1 + γ + γ lookahead): with
  few blocks and many requests, that is where running requests are preempted, then resumed by recomputation.
- ``long-prompt``: :data:`TURN_1_PROMPT`, 31 tokens, one short of a 32-token KV block (vLLM's CPU block size), so the
  first token is sampled at position 31 and the first round's drafts straddle the block boundary; the first block
  fills during decoding, with the drafts' KV written by the verification step. It is turn 1 of ``multi-turn``.
- ``multi-turn``: turn 2 of that conversation, :data:`TURN_1_PROMPT` plus :data:`TURN_1_OUTPUT`, turn 1's likeliest
  output that ends in EOS, the EOS included (33 tokens: it shares all 33 with turn 1's prompt and output). Its first
  32 tokens are a whole block, which an engine with a prefix cache serves from the block turn 1's decoding wrote (or,
  run alone, from its own earlier requests): a hit of 32 cached tokens per request.
- ``long-prompt-63`` and ``multi-turn-65``: the same pair of turns one block longer, :data:`LONG_TURN_1_PROMPT` (63
  tokens) and turn 2, it plus :data:`LONG_TURN_1_OUTPUT` (65 tokens), which shares two whole blocks. A drafter that
  needs the hidden states of a hit's last block drops that block from the hit (vLLM's EAGLE-family drafters), so
  only a turn 2 sharing two blocks is served one; only the prefix-cache configurations add these two.

**Pair sets.** ``CHECKPOINT_PAIRS`` are the Llama pairs every engine loads. A method whose drafts live inside the
target (vLLM's ``mtp``) needs a target of another architecture, so the design allows one more pair:
``MIMO_PAIRS`` holds the MiMo target (Qwen2 with MTP layers, its own float64 forward:
``specverify.oracles.checkpoint_mimo``), whose draft is the target itself. :data:`PAIR_SETS` names both sets; a
factory picks one by declaring ``checkpoint_pairs = "mimo"`` (default ``"llama"``, read by :func:`pair_set_of`), and
``checkpoint_matrix(toy, pairs="mimo")`` runs every scenario on that one pair, with the same parameter changes
(the MiMo pair's margins are checked like the Llama pairs'). A pair spec names its set (``pair_set``), so a
scenario's own matrix is found from its pair.
"""

from __future__ import annotations

from dataclasses import replace

from specverify.errors import InvalidArgument
from specverify.oracles.checkpoint_spec import CheckpointPairSpec, CheckpointSpec, MimoPairSpec, MimoSpec
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams

__all__ = [
    "CHECKPOINT_PAIRS",
    "MIMO_PAIRS",
    "PAIR_SETS",
    "DEFAULT_PAIR_SET",
    "TOY_ONLY",
    "CONFIGURATION_SCENARIOS",
    "TURN_1_PROMPT",
    "TURN_1_OUTPUT",
    "LONG_TURN_1_PROMPT",
    "LONG_TURN_1_OUTPUT",
    "checkpoint_matrix",
    "configuration_scenarios",
    "pair_set_of",
]

CHECKPOINT_PAIRS = {
    "main": CheckpointPairSpec(CheckpointSpec(seed=0), draft_sigma=0.05, draft_seed=2),
    "sharp-close": CheckpointPairSpec(CheckpointSpec(seed=0, init_scale=0.35), draft_sigma=0.005, draft_seed=1),
    "far-eos": CheckpointPairSpec(CheckpointSpec(seed=0, eos_scale=-1.0), draft_sigma=0.1, draft_seed=2),
}
MIMO_PAIRS = {"mimo": MimoPairSpec(MimoSpec(seed=1))}  # seed 1: EOS in 10-35 % of outputs, every margin >= 1e-3
#: The checkpoint pair sets by name: each scenario's pair name maps onto a pair of the set (``mimo``: the one pair).
PAIR_SETS = {
    "llama": {name: name for name in CHECKPOINT_PAIRS},
    "mimo": {name: "mimo" for name in CHECKPOINT_PAIRS},
}
DEFAULT_PAIR_SET = "llama"
_SPECS = {**CHECKPOINT_PAIRS, **MIMO_PAIRS}
TOY_ONLY = ("target-zero", "draft-zero", "one-token-prompt", "long-prompt", "multi-turn")  # last 3: configuration
# issue 45's axes the checkpoint engines here (vLLM CPU, llama.cpp, transformers on Llama checkpoints) cannot serve:
# a sliding window, a recurrent state; exact greedy ties would need tied lm_head rows, i.e. a fourth pair (DESIGN.md:
# at most three Llama pairs) or new laws for one of the three (every checkpoint scenario and finding moves)
TOY_ONLY += ("sliding-window", "greedy-ties", "greedy-sliding-window")
TOY_ONLY += ("recurrent", "greedy-recurrent")  # no checkpoint engine here serves a recurrent target
TURN_1_PROMPT = (0, 1, 2, 3, 4) * 6 + (0,)  # 31 tokens: one short of a 32-token KV block
TURN_1_OUTPUT = (1, 5)  # its likeliest output ending in EOS (5) at max_tokens 3 on the main pair (p 0.051; tested)
LONG_TURN_1_PROMPT = (0, 1, 2, 3, 4) * 12 + (0, 1, 2)  # 63 tokens: one short of two 32-token KV blocks
LONG_TURN_1_OUTPUT = (3, 5)  # its likeliest two-token output ending in EOS (p 0.017; (5,) alone, p 0.036, is shorter)

P = SamplingParams
_GAMMA_8 = "γ = 8, top-p 0.7, 7-token outputs on the close pair: verify rows past 4 and 5 judge drafts after 5 kept"
_GREEDY_SWEEP = "greedy at γ 5 and 8 with outputs of 12 tokens: verify rows past 4 and 5 (the γ sweep)"
# name: (pair, changes to the toy scenario)
_OVERRIDES = {
    "temperature-1": ("main", dict(params=P(max_tokens=3))),
    "temperature-0.5": ("main", dict(params=P(temperature=0.5, max_tokens=3))),
    "temperature-1.5": ("main", dict(params=P(temperature=1.5, max_tokens=3))),
    "first-token-rejection": ("far-eos", dict(params=P(max_tokens=3))),
    "full-acceptance-bonus": ("sharp-close", dict(params=P(max_tokens=3))),
    "near-deterministic": ("sharp-close", dict(params=P(max_tokens=4))),
    "top-k": ("main", dict(params=P(top_k=2, max_tokens=4))),
    "top-p": ("main", dict(params=P(top_p=0.9, max_tokens=3))),
    "min-p": ("main", dict(params=P(min_p=0.1, max_tokens=3))),
    "penalties": (
        "main",
        dict(params=P(repetition_penalty=1.8, frequency_penalty=0.6, presence_penalty=0.4, max_tokens=3)),
    ),
    "bad-tokens": ("main", dict(params=P(bad_token_ids=(0,), max_tokens=3))),
    "min-tokens": ("far-eos", dict(params=P(min_tokens=2, max_tokens=3))),
    "min-tokens-short-gamma": ("far-eos", dict(params=P(min_tokens=2, max_tokens=3))),  # γ 1 stays
    "eos-in-block": ("far-eos", dict(params=P(max_tokens=4))),
    "stop-spanning": ("main", dict(params=P(stop=("ab", " b"), max_tokens=4))),
    "max-tokens-not-multiple": ("main", dict(params=P(max_tokens=4), num_draft_tokens=2)),
    "grammar-dead-end": ("main", None),  # the toy grammar and max_tokens as they are
    "logits-processor": ("main", dict(params=P(logits_processors=(parity_processor,), max_tokens=3))),
    "gamma-1": ("main", dict(params=P(max_tokens=3))),
    "gamma-5": ("main", dict(params=P(max_tokens=3))),
    "mixed-batch": ("main", {}),
    "batch-composition": ("main", dict(params=P(max_tokens=3))),
    "unseeded-law": ("main", dict(params=P(max_tokens=3))),
    "unseeded-collision": ("main", {}),
    "greedy": ("main", {}),
    "greedy-processors": ("main", {}),
    "greedy-penalties": ("main", {}),
    "greedy-masks": ("far-eos", {}),
    "greedy-min-tokens": ("far-eos", {}),
    "greedy-logits-processor": ("main", {}),
    "greedy-grammar": ("main", {}),
    # issue 45's axes: γ 8 (top-p 0.7 keeps 7-token outputs to 11 outcomes, margin 0.049; on the mimo pair 72, 0.0017),
    # γ 5 and 8 in greedy (an engine per γ), greedy prompts of 10-30 tokens, greedy/sampled/seeded/unseeded and γ 1 in
    # one call
    "gamma-8": ("sharp-close", dict(params=P(top_p=0.7, max_tokens=7), exercises=_GAMMA_8)),
    "greedy-gamma-sweep": ("main", dict(gammas=(5, 8), exercises=_GREEDY_SWEEP)),
    "greedy-long-prompts": ("main", {}),
    "mixed-kinds": ("main", {}),
}


def checkpoint_matrix(toy: dict, pairs: str = DEFAULT_PAIR_SET) -> dict:
    """The checkpoint version of every toy scenario that has one (``TOY_ONLY`` have none), in the toy order, on the
    pair set ``pairs`` (a name of :data:`PAIR_SETS`)."""
    chosen = _pair_set(pairs, "pairs")
    out = {}
    for name, scenario in toy.items():
        if name in TOY_ONLY:
            continue
        pair, changes = _OVERRIDES[name]
        out[name] = replace(scenario, pair=_SPECS[chosen[pair]], **(changes or {}))
    return out


#: The structured scenarios' regex over the main pair's strings ("a", "b", "ab", " ", "ba"; EOS 5): words "ab" or "b"
#: separated by one space. It forbids " " and "ba" first and allows only " " (and EOS) after a word, so the unmasked
#: draft (vLLM's draft sees no grammar) often proposes a token the grammar cuts.
STRUCTURED_PATTERN = "(ab|b)( (ab|b))*"
_GRAMMAR = None


def structured_grammar():
    """The ``RegexGrammar`` of :data:`STRUCTURED_PATTERN` over the checkpoint vocabulary of the main pair."""
    global _GRAMMAR
    if _GRAMMAR is None:
        from specverify.grammar_regex import RegexGrammar

        vocab = CHECKPOINT_PAIRS["main"].target.vocab
        _GRAMMAR = RegexGrammar(STRUCTURED_PATTERN, vocab.strings, vocab.eos_token_id)
    return _GRAMMAR


_ONE = "a one-token prompt: a new request with one token to compute, admitted while others run (padded by vLLM)"
_GROW = "a 28-token prompt: the first round needs a second 32-token KV block after admission (preempted there)"
_LONG = "a 31-token prompt: the first round's drafts straddle a 32-token KV block, filled while decoding (turn 1)"
_TURN_2 = "turn 2: turn 1's prompt and whole output, EOS included (33 tokens), its first block cached by turn 1"
_LONG_2 = "a 63-token prompt: one short of two 32-token KV blocks, the second filled while decoding (long turn 1)"
_LONG_TURN_2 = "turn 2 of the 63-token turn 1 (65 tokens): two whole blocks cached, one kept when the drafter drops one"
# name: (the toy scenario it is made from, pair, changes); the order is the run order (turn 1 just before turn 2)
_CONFIGURATION_OVERRIDES = {
    "one-token-prompt": ("one-token-prompt", "main", dict(num_draft_tokens=3, params=P(max_tokens=3), exercises=_ONE)),
    "second-block": (
        "long-prompt",
        "main",
        dict(
            name="second-block", prompt=TURN_1_PROMPT[:28], num_draft_tokens=3, params=P(max_tokens=3), exercises=_GROW
        ),
    ),  # fmt: skip
    "long-prompt": (
        "long-prompt",
        "main",
        dict(prompt=TURN_1_PROMPT, num_draft_tokens=3, params=P(max_tokens=3), exercises=_LONG),
    ),
    "multi-turn": (
        "multi-turn",
        "main",
        dict(prompt=TURN_1_PROMPT + TURN_1_OUTPUT, params=P(max_tokens=3), exercises=_TURN_2),
    ),
    "long-prompt-63": (
        "long-prompt",
        "main",
        dict(
            name="long-prompt-63",
            prompt=LONG_TURN_1_PROMPT,
            num_draft_tokens=3,
            params=P(max_tokens=3),
            exercises=_LONG_2,
        ),
    ),
    "multi-turn-65": (
        "multi-turn",
        "main",
        dict(
            name="multi-turn-65",
            prompt=LONG_TURN_1_PROMPT + LONG_TURN_1_OUTPUT,
            params=P(max_tokens=3),
            exercises=_LONG_TURN_2,
        ),
    ),
}
_STRUCTURED = "temperature 1 under a text-level regex the unmasked draft often violates: drafts cut by the grammar"
_GREEDY_STRUCTURED = "greedy under the same regex: the cut drafts' positions decided by the masked argmax"


def _structured_overrides() -> dict:
    g = structured_grammar()
    return {
        "structured": (
            "temperature-1",
            "main",
            dict(name="structured", params=P(max_tokens=3, grammar=g), num_draft_tokens=3, exercises=_STRUCTURED),
        ),
        "greedy-structured": (
            "greedy",
            "main",
            dict(
                name="greedy-structured",
                params=P(temperature=0.0, max_tokens=4, grammar=g),
                exercises=_GREEDY_STRUCTURED,
            ),
        ),
    }  # fmt: skip


#: The scenarios an engine configuration may add to the checkpoint matrix (``EngineConfig.scenarios``).
CONFIGURATION_SCENARIOS = (*_CONFIGURATION_OVERRIDES, "structured", "greedy-structured")


def configuration_scenarios(toy: dict, pairs: str = DEFAULT_PAIR_SET) -> dict:
    """The checkpoint versions of :data:`CONFIGURATION_SCENARIOS` (from the toy scenarios of the same names), on the
    pair set ``pairs``, in their run order."""
    chosen = _pair_set(pairs, "pairs")
    return {
        name: replace(toy[base], pair=_SPECS[chosen[pair]], **changes)
        for name, (base, pair, changes) in {**_CONFIGURATION_OVERRIDES, **_structured_overrides()}.items()
    }


def pair_set_of(factory: object) -> str:
    """The pair set a factory declares (its ``checkpoint_pairs`` attribute; ``"llama"`` when it has none)."""
    declared = getattr(factory, "checkpoint_pairs", None)
    if declared is None:
        return DEFAULT_PAIR_SET
    _pair_set(declared, f"{getattr(factory, '__name__', factory)!s}.checkpoint_pairs")
    return declared


def _pair_set(name: object, label: str) -> dict:
    if name not in PAIR_SETS:
        raise InvalidArgument(
            f"{label}={name!r} must be one of {sorted(PAIR_SETS)!r}: the checkpoint pair sets "
            "(specverify.certification.matrix.checkpoint.PAIR_SETS)."
        )
    return PAIR_SETS[name]
