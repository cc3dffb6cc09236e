"""Every private transformers detail the transformers adapter relies on, and the version check, in one place.

Line numbers refer to transformers 5.24.0 as installed (``generation/utils.py``, ``generation/candidate_generator.py``,
``cache_utils.py``). When transformers changes one of these, ``check_transformers_version`` names what broke.

- **Per-round acceptance.** No public hook reports it: ``_assisted_decoding`` (utils.py:4036-4185) keeps
  ``n_matches`` local, and a streamer only sees each round's committed chunk, which cannot tell an accepted EOS
  draft from a recovered one. ``record_rounds`` wraps the private ``GenerationMixin._get_candidate_generator``
  (utils.py:1293) on the model *instance*, so that each ``get_candidates(input_ids)`` call, one per round and per
  target verification call, records the committed length and the proposed candidates. A round's accepted count
  is the number of leading committed tokens equal to its candidates. This is exact: a rejected candidate cannot
  come back as the recovered token, because sampled rejection implies p(x) < q(x), so the residual at x is 0
  (``_speculative_sampling``, utils.py:4444), and a greedy or prompt-lookup mismatch differs by definition.
- **Draft length.** ``AssistedCandidateGenerator.__init__`` (candidate_generator.py:115-119) reads
  ``num_assistant_tokens``, its schedule and ``assistant_confidence_threshold`` from the *assistant model's*
  ``generation_config``, not from the config passed to ``generate``. The "heuristic" schedule writes back into it
  after each call (utils.py:4244-4252). ``set_draft_length`` sets γ, a constant schedule and threshold 0 there.
- **Cache.** ``generate`` builds a ``DynamicCache`` of ``DynamicLayer`` s (cache_utils.py:2009, 104). Rollback is
  ``cache.crop(-n)`` after each round, with n = 0 included (utils.py:4181). ``DynamicLayer.crop`` raises on a
  positive argument (cache_utils.py:164-181). The toy wrapper stores its entries in that very cache.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator

__all__ = [
    "MIN_VERSION",
    "TESTED_VERSION",
    "check_transformers_version",
    "RoundLog",
    "record_rounds",
    "set_draft_length",
    "cache_class_names",
]

MIN_VERSION = (5, 0)  # the `cache` keyword and `outputs.cache` (4.x used `past_key_values`)
TESTED_VERSION = "5.24.0"


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def check_transformers_version() -> str:
    """The installed transformers version; raises ``RuntimeError`` naming every incompatibility found."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - the hf extra is missing
        raise RuntimeError(
            "transformers is not installed: pip install -e '.[hf]' (the adapter needs transformers >= 5.0)."
        ) from exc
    from transformers import DynamicCache, GenerationConfig, GenerationMixin
    from transformers.cache_utils import Cache, DynamicLayer
    from transformers.generation import candidate_generator as cg

    problems = []
    if _version_tuple(transformers.__version__) < MIN_VERSION:
        problems.append(f"version {transformers.__version__} < {'.'.join(map(str, MIN_VERSION))}")
    for owner, name in (
        (GenerationMixin, "_get_candidate_generator"),
        (GenerationMixin, "_assisted_decoding"),
        (cg.CandidateGenerator, "get_candidates"),
        (cg.AssistedCandidateGenerator, "_calculate_new_tokens"),
        (Cache, "crop"),
        (Cache, "activate_past_recording"),
        (DynamicLayer, "crop"),
        (DynamicCache, "get_seq_length"),
    ):
        if not callable(getattr(owner, name, None)):
            problems.append(f"{owner.__name__}.{name} is missing")
    config = GenerationConfig()
    for field in (
        "num_assistant_tokens",
        "num_assistant_tokens_schedule",
        "assistant_confidence_threshold",
        "prompt_lookup_num_tokens",
        "min_p",
        "stop_strings",
        "suppress_tokens",
        "bad_words_ids",
        "min_new_tokens",
    ):
        if not hasattr(config, field):
            problems.append(f"GenerationConfig has no field {field!r}")
    if problems:
        raise RuntimeError(
            f"transformers {transformers.__version__} is incompatible with specverify.adapters.transformers "
            f"(tested with {TESTED_VERSION}): " + "; ".join(problems) + ". Install transformers 5.x, or update "
            "specverify/adapters/transformers/hooks.py."
        )
    return transformers.__version__


class RoundLog:
    """What ``record_rounds`` saw in one ``generate`` call: ``(committed length, candidate ids)`` per round."""

    def __init__(self):
        self.rounds: list[tuple[int, tuple[int, ...]]] = []
        self.generator: "str | None" = None  # the class of the candidate generator generate() built

    def accepted(self, prompt_len: int, tokens: tuple[int, ...]) -> tuple[int, ...]:
        """Accepted drafts per round, for the generated ``tokens`` the adapter keeps (rounds past them dropped)."""
        out = []
        for start, candidates in self.rounds:
            at = start - prompt_len  # index into tokens of the round's first committed token
            if at >= len(tokens):
                break
            committed = tokens[at:]
            n = 0
            while n < len(candidates) and n < len(committed) and committed[n] == candidates[n]:
                n += 1
            out.append(n)
        return tuple(out)


def _wrap_generator(generator, log_holder: list) -> object:
    original = generator.get_candidates

    @functools.wraps(original)
    def get_candidates(input_ids, *args, **kwargs):
        candidate_ids, candidate_logits = original(input_ids, *args, **kwargs)
        log = log_holder[0]
        if log is not None:
            log.generator = type(generator).__name__
            start = int(input_ids.shape[-1])
            log.rounds.append((start, tuple(int(t) for t in candidate_ids[0, start:].tolist())))
        return candidate_ids, candidate_logits

    generator.get_candidates = get_candidates
    return generator


def install_round_hook(model) -> list:
    """Wrap ``model._get_candidate_generator`` once; returns the one-slot holder ``record_rounds`` fills."""
    holder = getattr(model, "_specverify_round_holder", None)
    if holder is not None:
        return holder
    holder = [None]
    original = type(model)._get_candidate_generator

    def _get_candidate_generator(*args, **kwargs):
        return _wrap_generator(original(model, *args, **kwargs), holder)

    object.__setattr__(model, "_get_candidate_generator", _get_candidate_generator)
    object.__setattr__(model, "_specverify_round_holder", holder)
    return holder


@contextmanager
def record_rounds(model) -> Iterator[RoundLog]:
    """Within the block, every round of ``model.generate`` is recorded into the yielded ``RoundLog``."""
    holder = install_round_hook(model)
    log = RoundLog()
    holder[0] = log
    try:
        yield log
    finally:
        holder[0] = None


def set_draft_length(assistant, gamma: int) -> None:
    """γ drafts per round from ``assistant``: constant schedule, no confidence early stop (see module docstring)."""
    config = assistant.generation_config
    config.num_assistant_tokens = int(gamma)
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0


def cache_class_names() -> tuple[str, str]:
    """The cache and layer classes ``generate`` builds for a decoder-only model without sliding windows."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    return DynamicCache.__name__, DynamicLayer.__name__
