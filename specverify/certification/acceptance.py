"""The exact law of the first round's accepted-draft count, for a decoder that drafts with the canonical pipeline.

Drafting x and accepting it has probability draft(x)·min(1, target(x)/draft(x)) = min(target(x), draft(x)), so
walking accepted paths gives P(m accepted) exactly. An engine whose draft uses another law is not wrong for that
(docs/design.md); this law is shown as evidence that the rejection paths were exercised, not used for the verdict.
``acceptance_evidence`` sets it beside a scenario's observed counts, for the drafts the decoder says it makes
(``decoder.draft_law``: samples of the draft, its argmax chain, or unmodelled — then the counts stand alone).
"""

from __future__ import annotations

import numpy as np
import torch

from specverify.certification.metrics_check import acceptance_draft, first_round_after
from specverify.oracles.law import first_finish
from specverify.sampling import next_token_probs
from specverify.stats import goodness_of_fit

__all__ = ["acceptance_evidence", "first_round_acceptance_law"]


def first_round_acceptance_law(
    target: object, draft: object, prompt: tuple, params: object, num_draft_tokens: int
) -> np.ndarray:
    """P(m drafts accepted in the first round), m = 0..γ (float64 [γ+1]); a draft family other than AR (and a
    tree, by its own rule) goes through ``specverify.oracles.acceptance_rounds``."""
    if getattr(draft, "family", "ar") != "ar" or hasattr(draft, "proposal_logits"):
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


def acceptance_evidence(scenario, accepted, law, draft_law, prefill=0) -> dict:
    """The first round's accepted counts beside their exact law: from the prompt, or after the ``prefill`` plain
    tokens an engine emits before its first round (inferred from the slow path's counts, docs/metrics.md), for the
    drafts the decoder makes (``draft_law``); JSON-ready fields of ``ScenarioResult``."""
    pair = scenario.models()
    gamma = scenario.num_draft_tokens
    observed = np.array([accepted.get(m, 0) for m in range(gamma + 1)])
    draft = acceptance_draft(pair.draft, draft_law)
    if draft is None:  # unmodelled drafts: the counts are shown, with nothing to compare them with
        return dict(accepted_observed={int(m): int(c) for m, c in enumerate(observed)})
    if prefill:
        expected = first_round_after(scenario, pair, law, prefill, draft_law)
    else:
        expected = first_round_acceptance_law(pair.target, draft, law.prompt, law.params, gamma)
    support = expected > 0
    pvalue = None
    if observed[~support].sum() == 0 and support.sum() > 1:
        pvalue = float(goodness_of_fit(observed[support], expected[support]).pvalue)
    return dict(
        accepted_observed={int(m): int(c) for m, c in enumerate(observed)},
        accepted_expected=tuple(float(e) for e in expected),
        accepted_pvalue=pvalue,
    )
