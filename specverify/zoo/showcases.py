"""The zoo's showcases: small toy models and sampling parameters where each mechanism shows.

A ``ShowcaseScenario`` is one request shape used by the zoo's own tests and ``benchmarks/zoo_tv.py``; the
certifier's scenario matrix is another thing (``specverify.certify``). Every showcase uses a 5-token vocabulary
(4 strings and EOS), the target ``random_target(seed=3)`` and the draft ``draft_near(target, distance=0.6,
seed=7)``, prompt ``(0, 1)`` and ``num_draft_tokens=3`` unless it says otherwise: ``near_draft`` has a closer draft
(distance 0.25: fewer rejections, so residual bugs are subtler), and showcases with EOS inside blocks raise the
target's EOS logit (``eos_bias=0.8``) so that EOS is common.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

from specverify.errors import check
from specverify.grammar import ToyGrammar
from specverify.oracles import ToyModel, draft_near, make_vocab, random_target
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams
from specverify.protocol import Request

__all__ = ["ShowcaseScenario", "SHOWCASES", "VOCAB", "GRAMMAR", "models"]

VOCAB = make_vocab(5)
# state 0 allows "a", "b", " "; state 1 allows "a", "ab"; state 2 allows "a", "b", "ab" and EOS (accepting)
GRAMMAR = ToyGrammar(transitions=({0: 1, 1: 2, 3: 0}, {0: 0, 2: 2}, {0: 2, 1: 1, 2: 0}), accepting={2})


@dataclass(frozen=True)
class ShowcaseScenario:
    """One request shape: ``params``, the target's EOS bias, the draft's distance, the drafts per round and the
    prompt."""

    params: SamplingParams
    eos_bias: float = -1.0
    distance: float = 0.6
    num_draft_tokens: int = 3
    prompt: tuple = (0, 1)
    tie_rate: float = 0.0
    recurrent: bool = False

    def models(self) -> tuple[ToyModel, ToyModel]:
        """``(target, draft)`` toy models of this showcase."""
        return models(self.eos_bias, distance=self.distance, tie_rate=self.tie_rate, recurrent=self.recurrent)

    def request(self, *, seed: Optional[int] = None) -> Request:
        """The showcase's request, seeded with ``seed`` (None: unseeded)."""
        return Request(self.prompt, self.params, self.num_draft_tokens, seed=seed)


@lru_cache(maxsize=8)
def models(
    eos_bias: float = -1.0,
    *,
    target_seed: int = 3,
    draft_seed: int = 7,
    distance: float = 0.6,
    tie_rate: float = 0.0,
    recurrent: bool = False,
) -> tuple[ToyModel, ToyModel]:
    """The zoo's toy ``(target, draft)`` pair (cached: building a model tables 4096 rows); ``recurrent``: the target
    is the same law behind a recurrent state (``specverify.oracles.recurrent``)."""
    if recurrent:
        from specverify.oracles.recurrent import recurrent_target

        check(not tie_rate, f"tie_rate={tie_rate!r} must be 0 on a recurrent showcase target.")
        target = recurrent_target(VOCAB, seed=target_seed, eos_bias=eos_bias)
        return target, draft_near(target, distance=distance, seed=draft_seed)
    target = random_target(VOCAB, seed=target_seed, eos_bias=eos_bias, tie_rate=tie_rate)
    return target, draft_near(target, distance=distance, seed=draft_seed)


SHOWCASES = {
    "plain": ShowcaseScenario(SamplingParams(max_tokens=4)),
    "near_draft": ShowcaseScenario(SamplingParams(max_tokens=4), distance=0.25),  # fewer rejections: subtler bugs
    "temp_topk": ShowcaseScenario(SamplingParams(max_tokens=4, temperature=0.7, top_k=3)),
    "min_p": ShowcaseScenario(SamplingParams(max_tokens=4, min_p=0.3)),
    "penalties": ShowcaseScenario(
        SamplingParams(max_tokens=4, repetition_penalty=1.6, frequency_penalty=0.8, presence_penalty=0.5)
    ),
    "masks": ShowcaseScenario(SamplingParams(max_tokens=4, min_tokens=2, bad_token_ids=(1,)), eos_bias=0.8),
    "min_tokens": ShowcaseScenario(SamplingParams(max_tokens=4, min_tokens=2), eos_bias=0.8),
    "grammar": ShowcaseScenario(SamplingParams(max_tokens=4, grammar=GRAMMAR)),
    "eos_in_block": ShowcaseScenario(SamplingParams(max_tokens=5), eos_bias=0.8),
    "stop": ShowcaseScenario(SamplingParams(max_tokens=5, stop=("ab", " b"))),
    # γ 1 < min_tokens 3: the bonus row of an early round lies before min_tokens
    "min_tokens_short_gamma": ShowcaseScenario(
        SamplingParams(max_tokens=4, min_tokens=3), eos_bias=0.8, num_draft_tokens=1
    ),
    # turn 2: turn 1's prompt (0, 1), its output (1, 0) and the EOS (4) that finished it
    "multi_turn": ShowcaseScenario(SamplingParams(max_tokens=4), prompt=(0, 1, 1, 0, 4)),
    # top-k with the temperature left unset (it reads as 1): what an engine does with a missing field shows
    "topk_unset_temperature": ShowcaseScenario(SamplingParams(max_tokens=4, top_k=3)),
    "logits_processor": ShowcaseScenario(SamplingParams(max_tokens=4, logits_processors=(parity_processor,))),
    # a one-token prompt: its first round computes one token (what vLLM pads with placeholder drafts); EOS common,
    # since a placeholder is kept with the probability of the last id, EOS
    "one_token_prompt": ShowcaseScenario(SamplingParams(max_tokens=4), eos_bias=0.8, prompt=(0,)),
    # γ 6 with a close draft and outputs of 7 tokens: rounds that accept five drafts reach verify rows past 4 and 5
    "gamma_sweep": ShowcaseScenario(SamplingParams(max_tokens=7), eos_bias=0.8, distance=0.15, num_draft_tokens=6),
    # an 18-token prompt: longer than a prefill chunk of 8
    "long_prompt": ShowcaseScenario(SamplingParams(max_tokens=4), prompt=(0, 1, 2, 3) * 4 + (0, 2)),
    # half the target's rows with an exact tie at the top: greedy paths cross them
    "ties": ShowcaseScenario(SamplingParams(max_tokens=4), tie_rate=0.5),
    # the plain shape on a recurrent target: its state must be put back after each rejection
    "recurrent": ShowcaseScenario(SamplingParams(max_tokens=4), recurrent=True),
}
