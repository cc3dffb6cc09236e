"""Logits processors the scenarios send (``SamplingParams.logits_processors``): module-level, so they pickle.

A processor is ``processor(histories, logits) -> logits``: ``histories`` one tuple of token ids per row (prompt +
generated so far), ``logits`` a float64 ``[B, V]`` tensor after the masks and penalties (docs/design.md, canonical
semantics, step 6). Nothing here imports torch: the tensor's own methods are enough.
"""

from __future__ import annotations

__all__ = ["parity_processor", "BOOSTED", "BOOST", "MASKED"]

BOOSTED, BOOST, MASKED = 0, 3.0, 1  # token ids 0 and 1 are strings in every toy and checkpoint vocabulary


def parity_processor(histories, logits) -> object:  # B tuples, [B, V] -> [B, V] (a torch tensor)
    """After an even number of tokens (prompt + generated) token 0's logit gains 3.0; after an odd number token 1
    is masked (-inf).

    Both depend on the history, so a decoder that skips the processor, or hands it the wrong history (the committed
    tokens without this round's drafts), samples another law: the mask alone gives outcomes of probability 0, and
    the boost moves the greedy argmax.

    Examples
    --------
    >>> import torch
    >>> parity_processor([(0, 1), (0,)], torch.zeros((2, 3), dtype=torch.float64)).tolist()
    [[3.0, 0.0, 0.0], [0.0, -inf, 0.0]]
    """
    odd = logits.new_tensor([len(history) % 2 for history in histories]) > 0  # bool [B]
    out = logits.clone()
    out[~odd, BOOSTED] += BOOST
    out[odd, MASKED] = float("-inf")
    return out
