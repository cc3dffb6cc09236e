"""The checkpoint family: tiny Llama checkpoints built deterministically from a spec (docs/design.md, model families).

A ``CheckpointSpec`` names a ``LlamaForCausalLM`` whose every parameter is drawn from
``numpy.random.default_rng(seed)``, parameter by parameter in sorted name order: 1-D parameters (the RMSNorm weights)
are ones and draw nothing, every matrix is N(0, ``init_scale``²); transformers' own initialisation is never used.
The draft of a ``CheckpointPairSpec`` is the stored target plus ``draft_sigma`` · N(0, 1) on every parameter, from
``default_rng(draft_seed)`` in the same order (σ = 0: an exact copy).

Each model is written once, with ``save_pretrained(safe_serialization=True)`` and the local tokenizer of
``checkpoint_tokenizer``, into ``<cache>/<kind>-<hash of spec and FORMAT_VERSION>``; ``<cache>`` is
``$SPECVERIFY_CHECKPOINT_CACHE`` or ``~/.cache/specverify/checkpoints``. Writing goes to a temporary directory next to
the target, renamed into place; if another process published first, its copy wins and ours is discarded.

The specs are plain data in ``specverify.oracles.checkpoint_spec`` (light: no torch, no transformers), which builds
through this module; this module reads a spec only through its fields and ``key()``, so the two import one way.

The law is defined by ``CheckpointModel.logits``: the stored float32 weights cast to float64 and run through
transformers' eager Llama forward in float64 (the rotary tables are computed in float32 by transformers and cast).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from specverify.errors import InvalidArgument, check
from specverify.oracles.checkpoint_tokenizer import MAX_POSITIONS, parameter_shapes, quiet_transformers
from specverify.oracles.checkpoint_tokenizer import write_checkpoint as _write_checkpoint
from specverify.oracles.models import make_vocab
from specverify.oracles.pairs import ModelPair

__all__ = [
    "CACHE_ENV",
    "CheckpointModel",
    "CheckpointBatchCache",
    "cache_root",
    "target_dir",
    "draft_dir",
    "describe_pair",
]

CACHE_ENV = "SPECVERIFY_CHECKPOINT_CACHE"
_CHUNK = 4096  # prefixes per forward call


def _is_spec(spec: object, *, pair: bool) -> bool:
    """Whether ``spec`` is a Llama checkpoint spec (a pair's when ``pair``): read through its fields, not its class
    (the MiMo specs have their own recipe, ``specverify.oracles.checkpoint_mimo``)."""
    target = getattr(spec, "target", spec)
    return (
        getattr(spec, "family", None) == "checkpoint"
        and hasattr(spec, "key")
        and hasattr(spec, "target") == pair
        and getattr(target, "architecture", "llama") == "llama"
    )


def _fields(spec) -> dict:
    return dataclasses.asdict(spec)


@lru_cache(maxsize=16)
def _build_pair(spec, root: str) -> ModelPair:
    target = CheckpointModel(target_dir(spec.target, root=root))
    draft = CheckpointModel(draft_dir(spec, root=root))
    return ModelPair(spec=spec, target=target, draft=draft)


# ------------------------------------------------------------------------------------------------- building


def cache_root() -> Path:
    """``$SPECVERIFY_CHECKPOINT_CACHE`` when set, else ``~/.cache/specverify/checkpoints``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specverify" / "checkpoints"


def target_dir(spec, *, root: str | Path | None = None) -> Path:
    """The directory holding ``spec``'s checkpoint and tokenizer (a ``CheckpointSpec``), written first if missing."""
    check(_is_spec(spec, pair=False), f"spec={spec!r} must be a CheckpointSpec.")
    final = Path(root if root is not None else cache_root()) / f"target-{spec.key()}"
    if not final.is_dir():
        _publish(final, spec, lambda: _target_state(spec), {"target": _fields(spec)})
    return final


def draft_dir(spec, *, root: str | Path | None = None) -> Path:
    """The directory holding the draft of ``spec`` (a ``CheckpointPairSpec``; its target is written first)."""
    check(_is_spec(spec, pair=True), f"spec={spec!r} must be a CheckpointPairSpec.")
    root = Path(root if root is not None else cache_root())
    final = root / f"draft-{spec.key()}"
    if not final.is_dir():
        source = target_dir(spec.target, root=root)
        meta = {"target": _fields(spec.target), "draft_sigma": spec.draft_sigma, "draft_seed": spec.draft_seed}
        _publish(final, spec.target, lambda: _draft_state(source, spec.draft_sigma, spec.draft_seed), meta)
    return final


def _target_state(spec) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    state = {}
    for name, shape in sorted(parameter_shapes(spec).items()):
        values = np.ones(shape) if len(shape) == 1 else rng.normal(0.0, spec.init_scale, shape)
        if name == "lm_head.weight":
            values[spec.vocab_size - 1] *= spec.eos_scale
        state[name] = values.astype(np.float32)
    return state


def _draft_state(source: Path, sigma: float, seed: int) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    rng = np.random.default_rng(seed)
    stored = load_file(str(source / "model.safetensors"))
    return {
        name: (stored[name].astype(np.float64) + sigma * rng.standard_normal(stored[name].shape)).astype(np.float32)
        for name in sorted(stored)
    }


def _publish(final: Path, spec, make_state, meta: dict) -> None:
    """Write the checkpoint into a temporary sibling of ``final`` and rename it into place (first writer wins)."""
    publish_directory(
        final, lambda tmp: _write_checkpoint(tmp, spec, make_state(), {"format": spec.format_version, **meta})
    )


def publish_directory(final: Path, write) -> None:
    """``write(tmp)`` fills a temporary sibling of ``final``, which is then renamed into place: concurrent writers of
    one cache entry never see a half-written directory, and the first to finish wins (the heads of
    ``specverify.adapters.vllm.heads`` are cached the same way)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        write(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------------------------- the model


class CheckpointModel:
    """A saved checkpoint as the oracle and the vectorized reference see it (docs/design.md, cache API table).

    ``logits(prefixes)`` is the float64 eager forward of the stored weights, no KV cache, memoised per prefix;
    ``new_batch_cache`` recomputes each row from its stored prefix. ``root_kv`` / ``step_kv`` / ``head`` are not
    provided (the transactional decoder and the paged pool stay toy-only).
    """

    def __init__(self, path: str | Path):
        import torch
        from transformers import LlamaForCausalLM

        self.path = Path(path)
        check((self.path / "config.json").is_file(), f"path={str(path)!r} must be a checkpoint directory.")
        with quiet_transformers():
            self._model = LlamaForCausalLM.from_pretrained(
                str(self.path), dtype=torch.float64, attn_implementation="eager"
            ).eval()
        self.vocab = make_vocab(int(self._model.config.vocab_size))
        self._memo: dict = {}

    def __repr__(self) -> str:
        return f"CheckpointModel({str(self.path)!r})"

    def logits(self, prefixes: Sequence[Sequence[int]]) -> object:
        """Float64 [B, V]: next-token logits after each full token history (pure; memoised)."""
        import torch

        check(len(prefixes) > 0, "prefixes must hold at least one history.")
        keys = [tuple(int(t) for t in p) for p in prefixes]
        by_length: dict[int, list] = {}
        for key in dict.fromkeys(k for k in keys if k not in self._memo):
            check(1 <= len(key) <= MAX_POSITIONS, f"len(prefix)={len(key)!r} must lie in [1, {MAX_POSITIONS}].")
            self.vocab.check_tokens(key, "prefix")
            by_length.setdefault(len(key), []).append(key)
        with torch.no_grad():
            for group in by_length.values():
                for at in range(0, len(group), _CHUNK):
                    chunk = group[at : at + _CHUNK]
                    ids = torch.tensor(chunk, dtype=torch.int64)  # [b, length]
                    out = self._forward_last(ids)  # [b, V]
                    self._memo.update(zip(chunk, out.to(torch.float64).unbind(0)))
        return torch.stack([self._memo[k] for k in keys])  # [B, V] float64

    def _forward_last(self, ids) -> object:  # [b, T] int64 -> [b, V] float64: logits after the last position
        return self._model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1]

    def new_batch_cache(self, batch: int, capacity: int) -> "CheckpointBatchCache":
        return CheckpointBatchCache(self, batch, capacity)


class CheckpointBatchCache:
    """``BatchCache``'s API over a checkpoint: it stores tokens [B, capacity] and ``lengths`` [B]; each logit row is
    computed from the stored prefix it follows."""

    def __init__(self, model: CheckpointModel, batch: int, capacity: int):
        check(isinstance(batch, int) and batch >= 1, f"batch={batch!r} must be an int >= 1.")
        check(isinstance(capacity, int) and capacity >= 1, f"capacity={capacity!r} must be an int >= 1.")
        self.model = model
        self.tokens = np.zeros((batch, capacity), dtype=np.int64)
        self.lengths = np.zeros(batch, dtype=np.int64)

    def forward(self, rows: np.ndarray, tokens: np.ndarray) -> object:  # [n], [n, k] -> [n, k, V]
        import torch

        rows, tokens = np.asarray(rows, dtype=np.int64), np.asarray(tokens, dtype=np.int64)
        n, k = tokens.shape
        start = self.lengths[rows]
        if int((start + k).max(initial=0)) > self.tokens.shape[1]:
            raise InvalidArgument(f"forward() past capacity={self.tokens.shape[1]!r}; open the cache with more room.")
        if n == 0 or k == 0:
            return torch.zeros((n, k, self.model.vocab.size), dtype=torch.float64)
        cols = start[:, None] + np.arange(k)
        self.tokens[rows[:, None], cols] = tokens
        self.lengths[rows] = start + k
        stored = self.tokens[rows].tolist()
        prefixes = [tuple(stored[i][: s + j + 1]) for i, s in enumerate(start.tolist()) for j in range(k)]
        return self.model.logits(prefixes).reshape(n, k, -1)

    def crop(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        check(
            bool(np.all(lengths <= self.lengths[rows])) and bool(np.all(lengths >= 0)),
            "crop() lengths must lie in [0, stored length] per row.",
        )
        self.lengths[rows] = lengths


# ------------------------------------------------------------------------------------------------- summaries


def describe_pair(pair: ModelPair, prompts: Sequence[Sequence[int]]) -> list[dict]:
    """Per prompt: the target's next-token ``entropy`` (nats), its largest probability ``max_prob`` and
    ``tv`` = TV(target, draft) of the next-token laws (raw softmax, no processors).

    Works for any pair whose models have ``logits(prefixes)`` (toy pairs too).
    """
    import torch

    prompts = [tuple(int(t) for t in p) for p in prompts]
    check(len(prompts) > 0, "prompts must hold at least one prompt.")
    target = torch.softmax(pair.target.logits(prompts), -1)  # [P, V]
    draft = torch.softmax(pair.draft.logits(prompts), -1)  # [P, V]
    entropy = -torch.special.xlogy(target, target).sum(-1)
    tv = 0.5 * (target - draft).abs().sum(-1)
    return [
        {"prompt": p, "entropy": float(h), "max_prob": float(m), "tv": float(d)}
        for p, h, m, d in zip(prompts, entropy, target.max(-1).values, tv)
    ]
