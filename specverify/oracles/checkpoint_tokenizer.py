"""The files of a checkpoint directory, in transformers' formats: the Llama config, the weights and the tokenizer.

``checkpoint`` decides what the weights are; this module only writes them. The tokenizer holds the toy vocabulary's
strings, fused without separators: an engine loads it with ``transformers.AutoTokenizer.from_pretrained(directory)``
and no network. Ids are the toy ids; EOS (text "") is the special token ``</s>``, so
``decode(ids, skip_special_tokens=True)`` equals ``vocab.text(ids)`` exactly, spaces included. Encoding text is not
part of the contract: toy strings overlap ("ab" is both one token and "a" + "b"), so engines are given token ids.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from specverify.errors import check
from specverify.oracles.models import Vocab

__all__ = [
    "EOS_TOKEN",
    "MAX_POSITIONS",
    "llama_config",
    "parameter_shapes",
    "write_checkpoint",
    "build_tokenizer",
    "save_tokenizer",
    "quiet_transformers",
]

EOS_TOKEN = "</s>"
MAX_POSITIONS = 128  # position 64 onwards: a prompt sharing two 32-token KV blocks (EAGLE drops a hit's last)


def llama_config(spec: object) -> object:
    """The ``LlamaConfig`` of a ``CheckpointSpec``: untied embeddings, float32, eager attention, default rope, and
    BOS = EOS = PAD = the toy EOS id (``vocab_size - 1``)."""
    from transformers import LlamaConfig

    eos = spec.vocab_size - 1
    heads = spec.hidden_size // spec.head_dim
    config = LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=spec.head_dim,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        dtype="float32",
    )
    config._attn_implementation = "eager"
    return config


def parameter_shapes(spec: object) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of every parameter of ``LlamaForCausalLM(llama_config(spec))`` (built on the meta device)."""
    import torch
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(llama_config(spec))
    return {name: tuple(p.shape) for name, p in model.named_parameters()}


def write_checkpoint(directory: Path, spec: object, state: dict[str, np.ndarray], meta: dict) -> None:
    """Write ``state`` (float32 arrays by parameter name) with ``save_pretrained(safe_serialization=True)``, the
    tokenizer of ``spec.vocab`` and ``meta`` as ``specverify.json`` into the existing ``directory``."""
    import torch
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(llama_config(spec))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True, assign=True)
    with quiet_transformers():
        model.save_pretrained(str(directory), safe_serialization=True)
    save_tokenizer(spec.vocab, directory)
    (Path(directory) / "specverify.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def build_tokenizer(vocab: Vocab, *, model_max_length: int = MAX_POSITIONS) -> object:
    """A ``transformers`` fast tokenizer over ``vocab``: a word-level table with explicit ids and a fusing decoder.

    Parameters
    ----------
    vocab : Vocab
        The toy vocabulary; its EOS id becomes the special token ``</s>`` (also BOS and PAD).
    model_max_length : int
        Recorded in the tokenizer config (the checkpoint's ``max_position_embeddings``).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    check(isinstance(vocab, Vocab), f"vocab={vocab!r} must be a specverify Vocab (see oracles.models.make_vocab).")
    table = {text: i for i, text in enumerate(vocab.strings) if i != vocab.eos_token_id}
    check(
        len(table) == vocab.size - 1 and EOS_TOKEN not in table,
        f"vocab.strings={vocab.strings!r} must be distinct and must not contain {EOS_TOKEN!r}.",
    )
    table[EOS_TOKEN] = vocab.eos_token_id
    backend = Tokenizer(models.WordLevel(vocab=table, unk_token=None))
    backend.decoder = decoders.Fuse()  # concatenate the token strings: no separator, spaces kept as they are
    backend.add_special_tokens([AddedToken(EOS_TOKEN, special=True, normalized=False)])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=EOS_TOKEN,
        bos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=model_max_length,
    )


def save_tokenizer(vocab: Vocab, directory: str | Path, *, model_max_length: int = MAX_POSITIONS) -> None:
    """Write ``build_tokenizer(vocab)`` into ``directory`` (``tokenizer.json`` and ``tokenizer_config.json``)."""
    with quiet_transformers():
        build_tokenizer(vocab, model_max_length=model_max_length).save_pretrained(str(directory))


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and warnings inside the block; the previous settings come back after."""
    from transformers.utils import logging as hf_logging

    bars, level = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()
        hf_logging.set_verbosity(level)
