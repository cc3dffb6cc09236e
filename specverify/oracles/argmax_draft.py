"""The acceptance oracle's stand-ins for an engine's drafts: its greedy draft (``decoder.draft_law =
"model-argmax"``) and a sampled draft that sees only the temperature (``"model-temperature"``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import torch

__all__ = ["ArgmaxDraft", "TemperatureDraft"]


@dataclass(frozen=True, eq=False)
class ArgmaxDraft:
    """An engine's greedy draft as the acceptance oracle sees it: the AR draft ``model``'s argmax chain on its raw
    logits (the lowest index on ties), proposed whatever the request's processors (``unprocessed``), so its q is the
    point mass at that token even where the target's processors remove it (a draft the target then rejects). For
    expectations only (``decoder.draft_law = "model-argmax"``): it has no cache and decoders do not draft with it.

    >>> from specverify.oracles import make_vocab, random_target
    >>> model = random_target(make_vocab(4), seed=0)
    >>> q = ArgmaxDraft(model).proposal_logits((0,), ())
    >>> int(q.argmax()) == int(model.logits([(0,)])[0].argmax()), int(torch.isfinite(q).sum())
    (True, 1)
    """

    model: object
    unprocessed: ClassVar[bool] = True

    @property
    def vocab(self) -> object:
        return self.model.vocab

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        raw = self.model.logits([tuple(history) + tuple(drafted)])[0]
        logits = torch.full((self.model.vocab.size,), float("-inf"), dtype=torch.float64)
        logits[int(torch.argmax(raw))] = 0.0
        return logits


@dataclass(frozen=True, eq=False)
class TemperatureDraft:
    """An engine's sampled draft that sees only the request's temperature (``decoder.draft_law =
    "model-temperature"``): softmax(raw logits / temperature) of the AR draft ``model``, no penalty, mask, min-tokens
    or truncation applied (``unprocessed``), its argmax at temperature 0 (vLLM's ``draft_sample_method=
    "probabilistic"``, v1/spec_decode/llm_base_proposer.py:1822-1860). For expectations only, like ArgmaxDraft.

    >>> from specverify.oracles import make_vocab, random_target
    >>> model = random_target(make_vocab(4), seed=0)
    >>> q = torch.softmax(TemperatureDraft(model, 0.5).proposal_logits((0,), ()), -1)
    >>> bool(torch.allclose(q, torch.softmax(model.logits([(0,)])[0] / 0.5, -1)))
    True
    """

    model: object
    temperature: float
    unprocessed: ClassVar[bool] = True

    @property
    def vocab(self) -> object:
        return self.model.vocab

    def proposal_logits(self, history: Sequence[int], drafted: Sequence[int]) -> torch.Tensor:  # -> [V]
        if self.temperature <= 0:
            return ArgmaxDraft(self.model).proposal_logits(history, drafted)
        raw = self.model.logits([tuple(history) + tuple(drafted)])[0].to(torch.float64)
        return raw / float(self.temperature)
