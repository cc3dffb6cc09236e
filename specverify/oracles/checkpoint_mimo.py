"""The MiMo checkpoint: a tiny Qwen2 target with multi-token-prediction (MTP) layers, and its own float64 forward.

vLLM's ``mtp`` method drafts with layers that live inside the target, and no Llama type is among vLLM's MTP model
types, so the checkpoint family has one pair of this second architecture (docs/design.md, model families). A
``MimoSpec`` (``specverify.oracles.checkpoint_spec``) names a directory ``<cache>/mimo-<hash of spec and
MIMO_FORMAT_VERSION>`` (the cache root of ``specverify.oracles.checkpoint``) holding:

- ``config.json``: ``architectures`` ["MiMoForCausalLM"], ``model_type`` "qwen2", ``num_nextn_predict_layers``, rope
  theta 1e4, RMSNorm eps 1e-6, untied LM head, BOS = EOS = PAD = the toy EOS id (written here, not by transformers);
- ``model.safetensors`` (float32). The main model: 1-D parameters whose name ends in ``norm.weight`` are ones, every
  other parameter (matrices and the q/k/v biases) N(0, ``init_scale``²), drawn from ``default_rng(seed)`` parameter by
  parameter in sorted name order; the LM head's EOS row times ``eos_scale``. Each MTP layer ``model.mtp_layers.N`` is
  derived, not drawn: its decoder block is a copy of the last main layer, its norms are ones, and ``input_proj``
  ([H, 2H], applied to [hidden_layernorm(previous hidden), token_layernorm(next token's embedding)], vLLM's
  mimo_mtp.py:66-88) is [0 | ``init_scale`` · I]: the block sees the next token's embedding at about the scale of the
  main layer's input, so the MTP layer's drafts follow the target without a fit. It ignores the hidden state, and
  vLLM zeroes the embedding at position 0, so it never sees the context's first two tokens: its first drafts after
  a short prompt are accepted less often (docs/findings/vllm.md, MTP);
- the toy tokenizer (``checkpoint_tokenizer.save_tokenizer``) and ``specverify.json``.

**The law** is :class:`MimoModel`'s forward, written here in torch float64 throughout (rotary tables, RMSNorm and
the attention softmax too), the MTP layers ignored: embedding, per layer x += attention(rms(x)) and x += SwiGLU
MLP(rms(x)) with q/k/v biases, neox rotary halves and grouped key/value heads, then rms and the LM head. transformers'
``Qwen2ForCausalLM`` loads the same directory (it ignores ``mtp_layers``); in float64 it still computes its rotary
tables, RMSNorm and eager softmax in float32, so the two differ by float32 rounding (< 1e-5 in the logits), and by
< 1e-9 once those three steps run in float64 (tests/oracles/test_checkpoint_mimo.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from specverify.errors import check
from specverify.oracles.checkpoint import CheckpointModel, cache_root, publish_directory
from specverify.oracles.checkpoint_tokenizer import MAX_POSITIONS, save_tokenizer
from specverify.oracles.models import make_vocab
from specverify.oracles.pairs import ModelPair

__all__ = ["EPS", "ROPE_THETA", "MimoModel", "mimo_dir", "mimo_config", "parameter_shapes"]

EPS = 1e-6  # rms_norm_eps
ROPE_THETA = 10000.0


def _is_mimo(spec: object) -> bool:
    return getattr(spec, "architecture", None) == "mimo" and hasattr(spec, "key") and not hasattr(spec, "target")


@lru_cache(maxsize=8)
def _build_pair(spec, root: str) -> ModelPair:
    target = MimoModel(mimo_dir(spec.target, root=root))
    return ModelPair(spec=spec, target=target, draft=target)  # the drafts live inside the target


# ------------------------------------------------------------------------------------------------- building


def mimo_config(spec) -> dict:
    """The ``config.json`` of a ``MimoSpec`` (plain JSON, sorted keys when written)."""
    check(_is_mimo(spec), f"spec={spec!r} must be a MimoSpec.")
    eos = spec.vocab_size - 1
    return {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": EPS,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "use_sliding_window": False,
        "attention_dropout": 0.0,
        "bos_token_id": eos,
        "eos_token_id": eos,
        "pad_token_id": eos,
        "tie_word_embeddings": False,
        "dtype": "float32",
        "num_nextn_predict_layers": spec.mtp_layers,
    }


def _layer_shapes(prefix: str, hidden: int, kv: int, inter: int) -> dict:
    return {
        f"{prefix}self_attn.q_proj.weight": (hidden, hidden),
        f"{prefix}self_attn.q_proj.bias": (hidden,),
        f"{prefix}self_attn.k_proj.weight": (kv, hidden),
        f"{prefix}self_attn.k_proj.bias": (kv,),
        f"{prefix}self_attn.v_proj.weight": (kv, hidden),
        f"{prefix}self_attn.v_proj.bias": (kv,),
        f"{prefix}self_attn.o_proj.weight": (hidden, hidden),
        f"{prefix}mlp.gate_proj.weight": (inter, hidden),
        f"{prefix}mlp.up_proj.weight": (inter, hidden),
        f"{prefix}mlp.down_proj.weight": (hidden, inter),
        f"{prefix}input_layernorm.weight": (hidden,),
        f"{prefix}post_attention_layernorm.weight": (hidden,),
    }


def parameter_shapes(spec) -> dict[str, tuple[int, ...]]:
    """``{name: shape}`` of the main model's parameters (the MTP layers are derived from them)."""
    h, kv = spec.hidden_size, spec.kv_heads * spec.head_dim
    shapes = {
        "model.embed_tokens.weight": (spec.vocab_size, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (spec.vocab_size, h),
    }
    for i in range(spec.num_layers):
        shapes.update(_layer_shapes(f"model.layers.{i}.", h, kv, spec.intermediate_size))
    return shapes


def _state(spec) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    state = {}
    for name, shape in sorted(parameter_shapes(spec).items()):
        values = np.ones(shape) if name.endswith("norm.weight") else rng.normal(0.0, spec.init_scale, shape)
        if name == "lm_head.weight":
            values[spec.vocab_size - 1] *= spec.eos_scale
        state[name] = values.astype(np.float32)
    last, h = f"model.layers.{spec.num_layers - 1}.", spec.hidden_size
    for n in range(spec.mtp_layers):
        mtp = f"model.mtp_layers.{n}."
        state.update({mtp + name[len(last) :]: state[name].copy() for name in list(state) if name.startswith(last)})
        for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
            state[f"{mtp}{norm}.weight"] = np.ones(h, dtype=np.float32)
        proj = np.zeros((h, 2 * h))
        proj[:, h:] = spec.init_scale * np.eye(h)  # [previous hidden | next token's embedding] -> H
        state[f"{mtp}input_proj.weight"] = proj.astype(np.float32)
    return state


def _write(directory: Path, spec) -> None:
    from safetensors.numpy import save_file

    state = _state(spec)
    save_file({name: state[name] for name in sorted(state)}, str(directory / "model.safetensors"), {"format": "pt"})
    (directory / "config.json").write_text(json.dumps(mimo_config(spec), indent=1, sort_keys=True))
    save_tokenizer(spec.vocab, directory)
    fields = {name: getattr(spec, name) for name in spec.__dataclass_fields__}
    meta = {"format": spec.format_version, "architecture": "mimo", "target": fields}
    (directory / "specverify.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def mimo_dir(spec, *, root: str | Path | None = None) -> Path:
    """The directory holding ``spec``'s checkpoint (a ``MimoSpec``), written first if missing (first writer wins)."""
    check(_is_mimo(spec), f"spec={spec!r} must be a MimoSpec.")
    final = Path(root if root is not None else cache_root()) / f"mimo-{spec.key()}"
    if not final.is_dir():
        publish_directory(final, lambda tmp: _write(tmp, spec))
    return final


# ------------------------------------------------------------------------------------------------- the forward


def _rms(x, weight):  # [..., H], [H] -> [..., H]
    import torch

    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def _rotary(length: int, head_dim: int):  # -> cos, sin [T, D] float64
    import torch

    inv_freq = ROPE_THETA ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # [D/2]
    angles = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq  # [T, D/2]
    angles = torch.cat([angles, angles], -1)  # [T, D]
    return angles.cos(), angles.sin()


def _rotate(x, cos, sin):  # [B, heads, T, D] -> same: x·cos + rotate_half(x)·sin
    import torch

    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin


def _attention(x, w: dict, prefix: str, config: dict, cos, sin):  # [B, T, H] -> [B, T, H], causal
    import torch

    b, t, _ = x.shape
    d, kv = config["head_dim"], config["num_key_value_heads"]

    def project(name, heads):  # -> [B, heads, T, D]
        y = x @ w[f"{prefix}self_attn.{name}_proj.weight"].T + w[f"{prefix}self_attn.{name}_proj.bias"]
        return y.view(b, t, heads, d).transpose(1, 2)

    q = _rotate(project("q", config["num_attention_heads"]), cos, sin)
    k = _rotate(project("k", kv), cos, sin)
    v = project("v", kv)
    groups = config["num_attention_heads"] // kv
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)  # [B, heads, T, D]
    scores = (q @ k.transpose(-1, -2)) * d**-0.5  # [B, heads, T, T]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    probs = torch.softmax(scores.masked_fill(future, -torch.inf), -1)
    out = (probs @ v).transpose(1, 2).reshape(b, t, -1)  # [B, T, H]
    return out @ w[f"{prefix}self_attn.o_proj.weight"].T


def _mlp(x, w: dict, prefix: str):  # [B, T, H] -> [B, T, H]
    import torch

    gate = torch.nn.functional.silu(x @ w[f"{prefix}mlp.gate_proj.weight"].T)
    return (gate * (x @ w[f"{prefix}mlp.up_proj.weight"].T)) @ w[f"{prefix}mlp.down_proj.weight"].T


def forward(weights: dict, config: dict, ids):  # [B, T] int64 -> logits [B, T, V] float64
    """The main model's float64 forward (the MTP layers are not part of the law)."""
    cos, sin = _rotary(ids.shape[1], config["head_dim"])
    x = weights["model.embed_tokens.weight"][ids]  # [B, T, H]
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + _attention(_rms(x, weights[p + "input_layernorm.weight"]), weights, p, config, cos, sin)
        x = x + _mlp(_rms(x, weights[p + "post_attention_layernorm.weight"]), weights, p)
    return _rms(x, weights["model.norm.weight"]) @ weights["lm_head.weight"].T


# ------------------------------------------------------------------------------------------------- the model


class MimoModel(CheckpointModel):
    """A MiMo checkpoint as the oracle and the vectorized reference see it: ``path``, ``vocab``, ``logits(prefixes)``
    (float64, memoised per prefix: :func:`forward` at the last position) and ``new_batch_cache`` (each row recomputed
    from its stored prefix), as ``CheckpointModel`` serves them; the stored float32 weights are cast to float64."""

    def __init__(self, path: str | Path):  # noqa: D107 - no transformers model: the forward is this module's
        import torch
        from safetensors.numpy import load_file

        self.path = Path(path)
        check((self.path / "config.json").is_file(), f"path={str(path)!r} must be a checkpoint directory.")
        self.config = json.loads((self.path / "config.json").read_text())
        check(
            self.config.get("architectures") == ["MiMoForCausalLM"],
            f"path={str(path)!r} holds {self.config.get('architectures')!r}, not a MiMoForCausalLM checkpoint.",
        )
        stored = load_file(str(self.path / "model.safetensors"))
        self._weights = {
            name: torch.from_numpy(value.astype(np.float64))
            for name, value in stored.items()
            if ".mtp_layers." not in name
        }
        self.vocab = make_vocab(int(self.config["vocab_size"]))
        self._memo: dict = {}

    def __repr__(self) -> str:
        return f"MimoModel({str(self.path)!r})"

    def _forward_last(self, ids) -> object:  # [b, T] -> [b, V]
        return forward(self._weights, self.config, ids)[:, -1]
