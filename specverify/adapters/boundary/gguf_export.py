"""Checkpoint models as GGUF files for llama.cpp: the same float32 weights, a tokenizer llama.cpp can load.

``gguf_file(model, pieces)`` writes (once) and returns ``<cache>/gguf/<checkpoint dir name>.<pieces>.v<N>.gguf``
next to the checkpoint directory of a ``CheckpointModel`` (``<cache>`` is that directory's parent, so
``$SPECVERIFY_CHECKPOINT_CACHE`` decides both). The file is written to a temporary name and renamed into place.

**Weights** (architecture ``llama``, every tensor F32, ``general.file_type`` ALL_F32): ``token_embd``,
``blk.i.attn_norm`` / ``attn_q`` / ``attn_k`` / ``attn_v`` / ``attn_output``, ``blk.i.ffn_norm`` / ``ffn_gate`` /
``ffn_up`` / ``ffn_down``, ``output_norm``, ``output``, each the HF tensor as stored (gguf reverses the shape, so an
HF ``[out, in]`` matrix is ggml's ``[in, out]``). transformers rotates the pairs (i, i + d/2) of every head
(``rotate_half``), llama.cpp's ``llama`` architecture rotates adjacent pairs (2i, 2i + 1): ``rope_rows`` reorders
the rows of ``q_proj`` and ``k_proj`` head by head so that HF row i goes to 2i and row i + d/2 to 2i + 1. No other
tensor sees the rotation. Hyper-parameters come from the checkpoint's ``config.json`` (RMS eps, rope theta, context).

**Tokenizer** (type ``llama``, i.e. SentencePiece-style, no BOS or EOS added, no space prefix; BOS = EOS = UNK = PAD
= the toy EOS id, a CONTROL token ``</s>``; every other id a NORMAL token of score 0):

- ``pieces="toy"``: the toy strings themselves, with a space written as ``▁`` (llama.cpp's SentencePiece escape), so
  llama.cpp detokenises every id to its toy string and matches stop strings on the toy text. Text does not
  tokenise one to one ("ab" is one token and also "a" + "b"): engines are given token ids.
- ``pieces="char"``: one distinct capital letter per id (``A`` for id 0, ``B`` for 1, ...). No piece is a
  concatenation of others, so a text of those letters tokenises one to one, for engines that only take text
  (``llama-speculative``); ``char_text`` / ``char_tokens`` convert. Stop strings must then be matched on the toy
  text by the adapter.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from specverify.adapters.boundary.checkpoints import checkpoint_source
from specverify.errors import InvalidArgument, check

__all__ = ["GGUF_VERSION", "PIECES", "EOS_PIECE", "gguf_file", "export_gguf", "rope_rows", "char_text", "char_tokens"]

GGUF_VERSION = 1  # bump when the export changes: it is part of every file name
PIECES = ("toy", "char")
EOS_PIECE = "</s>"
_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def rope_rows(weight: np.ndarray, n_head: int) -> np.ndarray:
    """The rows of an HF q/k projection ``[n_head * d, in]`` in llama.cpp's rotary order (per head: HF row i -> 2i,
    row i + d/2 -> 2i + 1).

    >>> w = np.arange(8).reshape(8, 1)  # one head, d = 8: rotary pairs (0, 4), (1, 5), (2, 6), (3, 7)
    >>> rope_rows(w, 1)[:, 0].tolist()
    [0, 4, 1, 5, 2, 6, 3, 7]
    """
    check(isinstance(n_head, int) and n_head >= 1, f"n_head={n_head!r} must be an int >= 1.")
    out = weight.shape[0]
    check(out % (2 * n_head) == 0, f"weight rows={out!r} must split into {n_head!r} heads of even size.")
    d = out // n_head
    return weight.reshape(n_head, 2, d // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _pieces(strings: Sequence[str], eos: int, pieces: str) -> list[str]:
    if pieces == "char":
        check(len(strings) - 1 <= len(_CHARS), f"vocab size {len(strings)!r} is too large for char pieces.")
        return [EOS_PIECE if i == eos else _CHARS[i] for i in range(len(strings))]
    out = [EOS_PIECE if i == eos else s.replace(" ", "\u2581") for i, s in enumerate(strings)]
    check(len(set(out)) == len(out), f"toy strings {list(strings)!r} must be distinct.")
    return out


def char_text(tokens: Sequence[int], eos: int) -> str:
    """The ``pieces="char"`` text of ``tokens`` (EOS as ``</s>``, which llama.cpp parses as the special token).

    >>> char_text([0, 1, 2], eos=5), char_text([5, 0], eos=5)
    ('ABC', '</s>A')
    """
    out = []
    for t in tokens:
        t = int(t)
        check(t == eos or 0 <= t < min(eos, len(_CHARS)), f"token {t!r} has no char piece (EOS = {eos!r}).")
        out.append(EOS_PIECE if t == eos else _CHARS[t])
    return "".join(out)


def char_tokens(text: str, eos: int) -> list[int]:
    """The ids of a ``pieces="char"`` text (inverse of ``char_text``); raises ``ValueError`` on any other text.

    >>> char_tokens("AB</s>", eos=5)
    [0, 1, 5]
    """
    out, i = [], 0
    while i < len(text):
        if text.startswith(EOS_PIECE, i):
            out.append(eos)
            i += len(EOS_PIECE)
            continue
        k = _CHARS.find(text[i])
        if not 0 <= k < eos:
            raise ValueError(f"text {text!r} holds {text[i]!r} at {i}, which is no char piece")
        out.append(k)
        i += 1
    return out


def gguf_file(model: object, pieces: str = "toy") -> Path:
    """The GGUF file of a ``CheckpointModel`` (anything with ``.path`` to a checkpoint directory), written if
    missing; see the module docstring for the layout and the two tokenizers."""
    check(pieces in PIECES, f"pieces={pieces!r} must be one of {PIECES!r}.")
    source = checkpoint_source(model, "the GGUF export (llama.cpp's adapter)")
    final = source.parent / "gguf" / f"{source.name}.{pieces}.v{GGUF_VERSION}.gguf"
    if not final.is_file():
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent)
        os.close(fd)
        try:
            export_gguf(source, tmp, pieces=pieces)
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return final


def export_gguf(checkpoint: str | Path, out: str | Path, *, pieces: str = "toy") -> None:
    """Write the checkpoint directory ``checkpoint`` as the GGUF file ``out`` (see the module docstring)."""
    import gguf
    from safetensors.numpy import load_file

    check(pieces in PIECES, f"pieces={pieces!r} must be one of {PIECES!r}.")
    checkpoint = Path(checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    meta_file = checkpoint / "specverify.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    state = load_file(str(checkpoint / "model.safetensors"))
    n_head, n_kv = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // n_head)
    rope = config.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default" or config.get("tie_word_embeddings"):
        raise InvalidArgument(f"config {config!r}: only default rope and untied embeddings are exported.")
    from specverify.oracles.models import make_vocab

    vocab = make_vocab(int(config["vocab_size"]))
    eos = int(vocab.eos_token_id)

    writer = gguf.GGUFWriter(str(out), arch="llama")
    writer.add_name(f"specverify {checkpoint.name}")
    writer.add_description(json.dumps({"specverify": meta, "pieces": pieces, "gguf_version": GGUF_VERSION}))
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_block_count(int(config["num_hidden_layers"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(rope.get("rope_theta", config.get("rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(vocab.size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    names = _pieces(vocab.strings, eos, pieces)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(names)
    writer.add_token_scores([0.0] * vocab.size)
    normal, control = int(gguf.TokenType.NORMAL), int(gguf.TokenType.CONTROL)
    writer.add_token_types([control if i == eos else normal for i in range(vocab.size)])
    for add in (writer.add_bos_token_id, writer.add_eos_token_id, writer.add_unk_token_id, writer.add_pad_token_id):
        add(eos)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)

    def put(name: str, array: np.ndarray) -> None:
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    put("token_embd.weight", state["model.embed_tokens.weight"])
    for i in range(int(config["num_hidden_layers"])):
        hf = f"model.layers.{i}."
        put(f"blk.{i}.attn_norm.weight", state[hf + "input_layernorm.weight"])
        put(f"blk.{i}.attn_q.weight", rope_rows(state[hf + "self_attn.q_proj.weight"], n_head))
        put(f"blk.{i}.attn_k.weight", rope_rows(state[hf + "self_attn.k_proj.weight"], n_kv))
        put(f"blk.{i}.attn_v.weight", state[hf + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", state[hf + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_norm.weight", state[hf + "post_attention_layernorm.weight"])
        put(f"blk.{i}.ffn_gate.weight", state[hf + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", state[hf + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", state[hf + "mlp.down_proj.weight"])
    put("output_norm.weight", state["model.norm.weight"])
    put("output.weight", state["lm_head.weight"])

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
