"""A user's own checkpoints as a model pair: loaded by the engine, never enumerated (no exact law).

``specverify certify FACTORY --target DIR --draft DIR`` runs the two-sample mode only (the speculative path
against the same engine's plain path, ``specverify.certification.user_pair``): a model far too large to enumerate
has no exact law, so nothing here computes logits. The pair carries what adapters and protocol validation need —
each directory's ``path`` and a ``Vocab`` read from the target's tokenizer (strings by id, EOS) — and the spec is
hashable so the certifier keeps one engine per pair as it does for the other families.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

from specverify.errors import InvalidArgument
from specverify.oracles.models import Vocab
from specverify.oracles.pairs import ModelPair

__all__ = ["UserCheckpoint", "UserPairSpec", "user_vocab"]


def _checked_dir(path: object, flag: str) -> Path:
    if not isinstance(path, (str, Path)) or not (Path(path) / "config.json").is_file():
        raise InvalidArgument(
            f"{flag}={str(path)!r}: expected a checkpoint directory holding config.json (what "
            "`save_pretrained` writes, with its tokenizer files); pass the directory your engine loads"
        )
    return Path(path).resolve()


def user_vocab(path: Path) -> Vocab:
    """Token strings by id from the tokenizer in ``path`` (special tokens as ""), EOS from the config."""
    import json

    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise InvalidArgument(
            f"--target={str(path)!r}: reading a checkpoint's tokenizer needs transformers; install the hf extra "
            "(pip install -e '.[hf]')"
        ) from None

    from specverify.oracles.checkpoint_tokenizer import quiet_transformers

    config = json.loads((path / "config.json").read_text())
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    size = int(config.get("vocab_size") or len(tokenizer))
    eos = config.get("eos_token_id", tokenizer.eos_token_id)
    eos = eos[0] if isinstance(eos, list) else eos
    if not isinstance(eos, int) or not 0 <= eos < size:
        raise InvalidArgument(
            f"eos_token_id={eos!r} in {str(path / 'config.json')!r}: expected an id in [0, {size}); set it in the "
            "config (engines stop on it, and the certifier checks finish reasons against it)"
        )
    strings = [tokenizer.decode([i], skip_special_tokens=True) if i < len(tokenizer) else "" for i in range(size)]
    strings[eos] = ""
    return Vocab(strings=tuple(strings), eos_token_id=eos)


@dataclass(frozen=True, eq=False)
class UserCheckpoint:
    """One user checkpoint directory: ``path`` for the engine, ``vocab`` for the certifier; no logits."""

    path: Path
    vocab: Vocab

    def __repr__(self) -> str:
        return f"UserCheckpoint({str(self.path)!r})"

    def logits(self, prefixes: object) -> object:
        raise InvalidArgument(
            f"{self!r} has no exact law (a user checkpoint is never enumerated); certify it with --against "
            "(two-sample against the engine's plain path)"
        )


@dataclass(frozen=True)
class UserPairSpec:
    """``target`` and ``draft`` checkpoint directories (their vocabularies must have the same size and EOS)."""

    family: ClassVar[str] = "user"
    target: str
    draft: str

    def build(self) -> ModelPair:
        return _build_user(self)


@lru_cache(maxsize=8)
def _build_user(spec: UserPairSpec) -> ModelPair:
    target_dir, draft_dir = _checked_dir(spec.target, "--target"), _checked_dir(spec.draft, "--draft")
    target, draft = UserCheckpoint(target_dir, user_vocab(target_dir)), UserCheckpoint(draft_dir, user_vocab(draft_dir))
    if (target.vocab.size, target.vocab.eos_token_id) != (draft.vocab.size, draft.vocab.eos_token_id):
        raise InvalidArgument(
            f"--draft={spec.draft!r}: its vocabulary (size {draft.vocab.size}, EOS {draft.vocab.eos_token_id}) "
            f"differs from --target's (size {target.vocab.size}, EOS {target.vocab.eos_token_id}); speculative "
            "decoding needs one vocabulary: pass a draft trained with the target's tokenizer"
        )
    return ModelPair(spec=spec, target=target, draft=draft)
