"""The exact law of the first round's accepted-draft count, for a decoder that drafts with the canonical pipeline.

Drafting x and accepting it has probability q(x)·min(1, p(x)/q(x)) = min(p(x), q(x)), so walking accepted paths
gives P(m accepted) exactly. An engine whose draft uses another law is not wrong for that (DESIGN.md); this law is
shown as evidence that the rejection paths were exercised, not used for the verdict.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.oracles.law import first_finish
from specverify.sampling import next_token_probs

__all__ = ["first_round_acceptance_law"]


def first_round_acceptance_law(target, draft, prompt, params, gamma: int) -> np.ndarray:
    """P(m drafts accepted in the first round), m = 0..γ (float64 [γ+1])."""
    law = np.zeros(gamma + 1)
    vocab = target.vocab
    stack = [((), 1.0)]
    while stack:
        path, mass = stack.pop()
        k = len(path)
        if k == gamma:
            law[k] += mass
            continue
        history = tuple(prompt) + path
        kw = dict(prompt=prompt, generated=path, eos_token_id=vocab.eos_token_id)
        p = next_token_probs(target.logits([history])[0], params, **kw)
        q = next_token_probs(draft.logits([history])[0], params, **kw)
        if float(p.sum()) <= 0 or float(q.sum()) <= 0:  # no_token, or the draft cannot propose: 0 more accepted
            law[k] += mass
            continue
        overlap = torch.minimum(p, q)
        law[k] += mass * max(0.0, 1.0 - float(overlap.sum()))
        for tok in torch.nonzero(overlap > 0).flatten().tolist():
            weight = mass * float(overlap[tok])
            if first_finish(vocab, path + (tok,), params) is not None:
                law[k + 1] += weight  # the accepted draft ends the request: the round stops there
            else:
                stack.append((path + (tok,), weight))
    return law / law.sum()
