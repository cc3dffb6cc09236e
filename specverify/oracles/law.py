"""Exact law of complete outputs under plain target sampling, by enumeration (docs/design.md, canonical semantics).

This module shares no code with the decoders beyond ``specverify.sampling``'s pipeline: it rebuilds penalty state,
grammar state and stop-string detection from the token lists at every node, naively, so that a bug in a decoder's
incremental state cannot hide behind the same bug here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import torch

from specverify.errors import InvalidArgument, check
from specverify.params import SamplingParams
from specverify.sampling import grammar_mask, next_token_probs, process_logits

__all__ = ["Outcome", "ExactLaw", "exact_law", "greedy_outcome", "greedy_outcomes", "first_finish", "boundary_margin"]

Outcome = tuple  # (tokens: tuple[int, ...], finish_reason: str)
MAX_OUTCOMES = 2_000_000


@dataclass(frozen=True)
class ExactLaw:
    """Every outcome of positive probability with its exact probability (float64, sums to 1 within 1e-12)."""

    outcomes: tuple
    probs: np.ndarray
    vocab: object
    prompt: tuple
    params: SamplingParams

    def __post_init__(self):
        object.__setattr__(self, "_index", {o: i for i, o in enumerate(self.outcomes)})

    def __len__(self) -> int:
        return len(self.outcomes)

    def index(self, outcome) -> int:
        """Position of ``outcome`` or -1 when its exact probability is 0."""
        return self._index.get(outcome, -1)

    def prob(self, outcome) -> float:
        i = self.index(outcome)
        return 0.0 if i < 0 else float(self.probs[i])

    def align(self, counts: Mapping) -> tuple[np.ndarray, list]:
        """Observed ``counts`` ({outcome: count}) as an int64 [K] vector aligned with ``outcomes``, and the observed
        outcomes of exact probability 0 as ``(outcome, count)`` pairs, most frequent first."""
        vec = np.zeros(len(self.outcomes), dtype=np.int64)
        impossible = []
        for outcome, count in counts.items():
            i = self._index.get(outcome, -1)
            if i < 0:
                impossible.append((outcome, int(count)))
            else:
                vec[i] += count
        impossible.sort(key=lambda pair: -pair[1])
        return vec, impossible

    def text(self, outcome) -> str:
        """The outcome's text: token strings concatenated, cut at the earliest start of a stop string."""
        return visible_text(self.vocab, outcome, self.params)


def visible_text(vocab, outcome, params: SamplingParams) -> str:
    tokens, reason = outcome
    text = vocab.text(tokens)
    if reason == "stop":
        starts = [text.find(s) for s in params.stop if s in text]
        text = text[: min(starts)] if starts else text
    return text


def _stop_completed(params, prev_text: str, new_text: str, num_generated: int) -> bool:
    """Whether the last token completed an occurrence of a stop string (searched naively in the full text)."""
    if not params.stop or (params.stop_after_min_tokens and num_generated < params.min_tokens):
        return False
    return any(new_text.find(s, max(0, len(prev_text) - len(s) + 1)) != -1 for s in params.stop)


def first_finish(vocab: object, tokens: Sequence[int], params: SamplingParams) -> tuple[int, str] | None:
    """``(index, reason)`` of the first token after which plain sampling would have finished, or None.

    Recomputed from the tokens alone (EOS, stop string, ``max_tokens``); ``no_token`` needs the model and is
    never returned here.
    """
    text = ""
    for i, tok in enumerate(tokens):
        new_text = text + vocab.strings[tok]
        if tok == vocab.eos_token_id and not params.ignore_eos:
            return i, "eos"
        if _stop_completed(params, text, new_text, i + 1):
            return i, "stop"
        if i + 1 >= params.max_tokens:
            return i, "length"
        text = new_text
    return None


def _node_tensors(nodes, prompts, params, vocab):
    """seen / counts / allowed for each frontier node ``(prompt index, generated, mass, state)``, rebuilt from its
    prompt and token list."""
    size = vocab.size
    seen = torch.zeros((len(nodes), size), dtype=torch.bool)
    counts = torch.zeros((len(nodes), size), dtype=torch.float64)
    for row, (which, generated, _, _) in enumerate(nodes):
        seen[row, list(prompts[which])] = True
        if generated:
            ids = torch.as_tensor(generated)
            seen[row, ids] = True
            counts[row] += torch.bincount(ids, minlength=size).to(torch.float64)
    allowed = None
    if params.grammar is not None:
        allowed = grammar_mask(params.grammar, [state for _, _, _, state in nodes], size, vocab.eos_token_id)
    return seen, counts, allowed


def _checked_prompt(vocab, prompt) -> tuple:
    prompt = tuple(int(t) for t in prompt)
    check(len(prompt) >= 1, f"prompt={prompt!r} must hold at least one token.")
    vocab.check_tokens(prompt, "prompt")
    return prompt


def exact_law(target, prompt: Sequence[int], params: SamplingParams) -> ExactLaw:
    """Enumerate every complete outcome of plain target sampling with its exact probability.

    Breadth-first over token positions, pruning zero-probability branches. Finish reasons follow docs/design.md:
    EOS (unless ``ignore_eos``) -> ``eos``; a stop string completed by the token -> ``stop``; ``max_tokens`` ->
    ``length``; no token of positive probability -> ``no_token`` (nothing emitted).

    Examples
    --------
    >>> from specverify.oracles import make_vocab, random_target
    >>> law = exact_law(random_target(make_vocab(4), seed=0), (0,), SamplingParams(max_tokens=2))
    >>> bool(abs(law.probs.sum() - 1) < 1e-12)
    True
    """
    check(isinstance(params, SamplingParams), f"params={params!r} must be a SamplingParams.")
    prompt = _checked_prompt(target.vocab, prompt)
    ((outcomes, probs),) = _enumerate(target, [prompt], params)
    probs = np.asarray(probs, dtype=np.float64)
    total = probs.sum()
    if abs(total - 1.0) > 1e-9:
        raise InvalidArgument(f"enumerated mass {total!r} differs from 1: the target's rows are not normalised.")
    return ExactLaw(outcomes=tuple(outcomes), probs=probs, vocab=target.vocab, prompt=prompt, params=params)


def _enumerate(target, prompts: list, params: SamplingParams) -> list:
    """``[(outcomes, probs)]`` per prompt: the breadth-first enumeration of :func:`exact_law` over every prompt at
    once (one ``target.logits`` call per depth for all of them; each row's law is its own)."""
    vocab, grammar = target.vocab, params.grammar
    start = grammar.initial_state if grammar is not None else None
    frontier = [(which, (), 1.0, start) for which in range(len(prompts))]
    texts = {(which, ()): "" for which in range(len(prompts))}
    found = [([], []) for _ in prompts]
    while frontier:
        histories = [prompts[which] + gen for which, gen, _, _ in frontier]
        logits = target.logits(histories)
        seen, counts, allowed = _node_tensors(frontier, prompts, params, vocab)
        law = process_logits(
            logits,
            params,
            seen=seen,
            counts=counts,
            num_generated=len(frontier[0][1]),
            allowed=allowed,
            eos_token_id=vocab.eos_token_id,
            histories=histories if params.logits_processors else None,
        ).numpy()
        frontier = _expand(frontier, law, params, vocab, texts, found)
        if sum(len(o) for o, _ in found) + len(frontier) > MAX_OUTCOMES * len(prompts):
            raise InvalidArgument(f"the law has more than {MAX_OUTCOMES} outcomes: lower max_tokens or the vocab size.")
    return found


def _expand(frontier, law, params, vocab, texts, found):
    nxt = []
    for (which, generated, mass, state), row in zip(frontier, law):
        outcomes, probs = found[which]
        positive = np.flatnonzero(row > 0)
        if positive.size == 0:
            outcomes.append((generated, "no_token"))
            probs.append(mass)
            continue
        text = texts[which, generated]
        for tok in positive.tolist():
            tokens = generated + (tok,)
            new_text = text + vocab.strings[tok]
            weight = mass * float(row[tok])
            if tok == vocab.eos_token_id and not params.ignore_eos:
                reason = "eos"
            elif _stop_completed(params, text, new_text, len(tokens)):
                reason = "stop"
            elif len(tokens) >= params.max_tokens:
                reason = "length"
            else:
                texts[which, tokens] = new_text
                new_state = params.grammar.advance(state, tok) if params.grammar is not None else None
                nxt.append((which, tokens, weight, new_state))
                continue
            outcomes.append((tokens, reason))
            probs.append(weight)
    return nxt


def greedy_outcome(target: object, prompt: Sequence[int], params: SamplingParams) -> Outcome:
    """The single outcome of greedy (temperature 0) plain decoding under ``params``' other processors."""
    law = exact_law(target, prompt, replace(params, temperature=0.0))
    return law.outcomes[int(np.argmax(law.probs))]


def greedy_outcomes(target: object, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list:
    """:func:`greedy_outcome` of each prompt, enumerated for all prompts at once (one ``target.logits`` call per
    position): the same outcomes, since a greedy row is one-hot at the argmax whatever rows share its batch.

    Examples
    --------
    >>> from specverify.oracles import make_vocab, random_target
    >>> target = random_target(make_vocab(4), seed=0)
    >>> greedy_outcomes(target, [(0,), (1, 2)], SamplingParams()) == [
    ...     greedy_outcome(target, (0,), SamplingParams()), greedy_outcome(target, (1, 2), SamplingParams())]
    True
    """
    check(isinstance(params, SamplingParams), f"params={params!r} must be a SamplingParams.")
    check(len(prompts) >= 1, f"prompts={prompts!r} must hold at least one prompt.")
    greedy = replace(params, temperature=0.0)
    found = _enumerate(target, [_checked_prompt(target.vocab, p) for p in prompts], greedy)
    return [outcomes[int(np.argmax(probs))] for outcomes, probs in found]


def boundary_margin(target, prompt: Sequence[int], params: SamplingParams) -> float:
    """Smallest distance, in probability, from a processor boundary over every prefix plain sampling reaches.

    Boundaries: the greedy argmax (gap between the two largest probabilities), the top-k cut (gap between the
    k-th and (k+1)-th), the top-p cut (cumulative mass before the cut token vs ``top_p``, for the tokens on both
    sides) and the min-p cut (each probability vs ``min_p * max``). docs/design.md asks toy scenarios for ≥ 1e-3 so
    float32 engines are not failed for rounding. Returns ``inf`` when no boundary applies.
    """
    raw = replace(params, temperature=params.temperature or 1.0, top_k=0, top_p=1.0, min_p=0.0)
    law = exact_law(target, prompt, params)
    prefixes = {tokens[:i] for tokens, _ in law.outcomes for i in range(len(tokens) + (_ == "no_token"))}
    margin = float("inf")
    for gen in prefixes:
        logits = target.logits([tuple(prompt) + gen])[0]
        probs = np.sort(
            next_token_probs(
                logits, raw, prompt=tuple(prompt), generated=gen, eos_token_id=target.vocab.eos_token_id
            ).numpy()
        )[::-1]
        probs = probs[probs > 0]
        margin = min(margin, _row_margin(probs, params))
    return margin


def _row_margin(probs: np.ndarray, params: SamplingParams) -> float:
    gaps = [float("inf")]
    if params.temperature == 0 and probs.size > 1:
        gaps.append(probs[0] - probs[1])
    if params.top_k and probs.size > params.top_k:
        gaps.append(probs[params.top_k - 1] - probs[params.top_k])
    if params.top_p < 1.0:
        before = np.cumsum(probs) - probs
        gaps.append(float(np.min(np.abs(before - params.top_p))))
    if params.min_p > 0.0:
        gaps.append(float(np.min(np.abs(probs - params.min_p * probs[0]))))
    return min(gaps)
