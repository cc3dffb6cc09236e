"""The exact law of the first round's accepted-draft count, for a decoder that drafts with the canonical pipeline.

Drafting x and accepting it has probability draft(x)·min(1, target(x)/draft(x)) = min(target(x), draft(x)), so
walking accepted paths gives P(m accepted) exactly. An engine whose draft uses another law is not wrong for that
(docs/design.md); this law is shown as evidence that the rejection paths were exercised, not used for the verdict.
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.oracles.law import first_finish
from specverify.sampling import next_token_probs

__all__ = ["first_round_acceptance_law"]


def first_round_acceptance_law(
    target: object, draft: object, prompt: tuple, params: object, num_draft_tokens: int
) -> np.ndarray:
    """P(m drafts accepted in the first round), m = 0..γ (float64 [γ+1]); a draft family other than AR (and a
    tree, by its own rule) goes through ``specverify.oracles.acceptance_rounds``."""
    if getattr(draft, "family", "ar") != "ar":
        from specverify.oracles.acceptance_rounds import first_round_law

        return first_round_law(target, draft, prompt, params, num_draft_tokens)
    gamma = num_draft_tokens
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
        target_probs = next_token_probs(target.logits([history])[0], params, **kw)
        draft_probs = next_token_probs(draft.logits([history])[0], params, **kw)
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
