"""The first round's acceptance law: from the prompt, and after the plain tokens an engine emits before its first
verification round (docs/metrics.md); and the draft object whose law fits what a decoder says it drafts.

:func:`first_round_acceptance_law` walks the accepted paths of an AR draft: drafting x and accepting it has
probability draft(x)·min(1, target(x)/draft(x)) = min(target(x), draft(x)), so P(m accepted) is exact; other draft
families (and trees, by their own rule) go through ``acceptance_rounds.first_round_law``.

vLLM emits the prefill's token (``decoder.prefill_tokens`` = 1 on its draft-model paths) before its first
round. Its rounds then start from those plain target draws, so its acceptance statistics have another exact
expectation than a decoder speculating from the first token. :func:`acceptance_law_after` is
``acceptance_law`` started from the law of the first ``prefill`` plain draws (requests that finish inside them have
no rounds); the tokens counted include them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import torch

from specverify.errors import check
from specverify.oracles.acceptance_rounds import (
    AcceptanceLaw,
    _setup,
    acceptance_law,
    first_round_law,
    law_from_moments,
    round_moments,
)
from specverify.oracles.law import first_finish
from specverify.oracles.round_rules import RoundContext
from specverify.params import SamplingParams

__all__ = ["first_round_acceptance_law", "acceptance_law_after", "draft_for_law"]


def draft_for_law(draft: object, draft_law: str, params: SamplingParams | None = None) -> object:
    """The draft object whose exact acceptance expectation fits a decoder of this ``draft_law``
    (``specverify.protocol.draft_law_of``): the pair's draft, its argmax chain, its law at the request's temperature
    and nothing else (``params`` needed), or None (not modelled)."""
    if draft_law == "model":
        return draft
    if draft_law == "model-argmax":
        from specverify.oracles.argmax_draft import ArgmaxDraft

        return ArgmaxDraft(draft)
    if draft_law == "model-temperature":
        from specverify.oracles.argmax_draft import TemperatureDraft

        check(params is not None, "draft_law='model-temperature' needs the request's params (its temperature).")
        return TemperatureDraft(draft, float(params.temperature))
    return None


def first_round_acceptance_law(
    target: object, draft: object, prompt: tuple, params: object, num_draft_tokens: int
) -> np.ndarray:
    """P(m drafts accepted in the first round), m = 0..γ (float64 [γ+1]); a draft family other than AR (and a
    tree, by its own rule) goes through ``specverify.oracles.acceptance_rounds``."""
    if getattr(draft, "family", "ar") != "ar" or hasattr(draft, "proposal_logits"):
        return first_round_law(target, draft, prompt, params, num_draft_tokens)
    gamma = num_draft_tokens
    law = np.zeros(gamma + 1)
    vocab = target.vocab
    ctx = RoundContext(target, draft, tuple(prompt), params, gamma)  # the rows every law of this shape shares
    stack = [((), 1.0)]
    while stack:
        path, mass = stack.pop()
        k = len(path)
        if k == gamma:
            law[k] += mass
            continue
        target_probs = torch.from_numpy(ctx.target_row(path))  # next_token_probs after prompt + path
        draft_probs = torch.from_numpy(ctx.draft_row((), path))
        if float(target_probs.sum()) <= 0 or float(draft_probs.sum()) <= 0:  # no_token, or no draft: 0 more
            law[k] += mass
            continue
        overlap = torch.minimum(target_probs, draft_probs)
        law[k] += mass * max(0.0, 1.0 - float(overlap.sum()))
        for tok in torch.nonzero(overlap > 0).flatten().tolist():
            weight = mass * float(overlap[tok])
            if first_finish(vocab, path + (tok,), params) is not None:
                law[k + 1] += weight  # the accepted draft ends the request: the round stops there
            else:
                stack.append((path + (tok,), weight))
    return law / law.sum()


def acceptance_law_after(
    target: object,
    draft: object,
    prompt: Sequence[int],
    params: SamplingParams,
    num_draft_tokens: int,
    *,
    prefill: int = 0,
    rule: str | None = None,
) -> AcceptanceLaw:
    """:func:`~specverify.oracles.acceptance_rounds.acceptance_law` when ``prefill`` plain target tokens precede the
    first round (0: the same law). ``first_round`` is the first *verification* round's law, over the requests that
    reach one; ``outcome_law`` is empty (the complete outcomes are the target's law: ``exact_law``).

    Examples
    --------
    >>> from specverify.oracles import draft_near, make_vocab, random_target
    >>> target = random_target(make_vocab(4), seed=0)
    >>> draft, p = draft_near(target, distance=0.5, seed=1), SamplingParams(max_tokens=3)
    >>> law = acceptance_law_after(target, draft, (0,), p, 2, prefill=1)
    >>> bool(law.expected_rounds < acceptance_law(target, draft, (0,), p, 2).expected_rounds)
    True
    """
    check(isinstance(prefill, int) and 0 <= prefill <= 4, f"prefill={prefill!r} must be an int in [0, 4].")
    if prefill == 0:
        return acceptance_law(target, draft, prompt, params, num_draft_tokens, rule=rule)
    ctx, round_law, rule = _setup(target, draft, tuple(prompt), params, num_draft_tokens, rule, None)
    gamma = ctx.gamma
    size = 3 * gamma + 2
    roots, finished = {(): 1.0}, defaultdict(float)  # finished: {tokens emitted: probability}
    for _ in range(prefill):
        nxt: dict = defaultdict(float)
        for g, mass in roots.items():
            p = ctx.target_row(g)
            if p.sum() <= 0:
                finished[len(g)] += mass
                continue
            for t in np.flatnonzero(p > 0).tolist():
                kind, value = ctx.after(g + (t,))
                if kind == "done":
                    finished[len(value[0])] += mass * float(p[t])
                else:
                    nxt[value] += mass * float(p[t])
        roots = dict(nxt)
    mean, second = _moments(ctx, round_law, gamma, list(roots))
    mu, s2 = np.zeros(size), np.zeros((size, size))
    tok = np.zeros(size)
    tok[gamma + 1] = 1.0
    for tokens, mass in finished.items():
        mu += mass * tokens * tok
        s2 += mass * tokens**2 * np.outer(tok, tok)
    first = np.zeros(gamma + 1)
    for g, mass in roots.items():
        c = float(len(g))
        mu += mass * (c * tok + mean[g])
        s2 += mass * (c**2 * np.outer(tok, tok) + c * (np.outer(tok, mean[g]) + np.outer(mean[g], tok)) + second[g])
        for (_, m, _, _), prob in round_law(g).items():
            first[m] += mass * prob
    cov = s2 - np.outer(mu, mu)
    # the outcome law of rounds started from the prompt does not apply after a prefill: left empty
    return law_from_moments(gamma, rule, first / first.sum() if first.sum() > 0 else first, mu, cov, {})


def _moments(ctx, round_law, gamma: int, roots: list) -> tuple[dict, dict]:
    """Per reachable round start: the mean and second moment of the rest of the request's vector."""
    transitions: dict = {}
    todo = list(roots)
    while todo:
        g = todo.pop()
        if g in transitions:
            continue
        transitions[g] = round_law(g)
        todo += [nxt[1] for (nxt, _, _, _) in transitions[g] if nxt[0] == "next" and nxt[1] not in transitions]
    mean, second = {}, {}
    for g in sorted(transitions, key=len, reverse=True):  # every round commits >= 1 token or ends the request
        mean[g], second[g] = round_moments(gamma, transitions[g], mean, second)
    return mean, second
