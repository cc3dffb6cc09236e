"""Torch forwards of the one-layer checkpoint target and of vLLM's EAGLE, EAGLE-3 and Medusa heads, and their fit.

Private to ``heads``. Every tensor is [B, T, ...] float32; positions are 0..T-1. The target's forward is checked
against its float64 oracle (``tests/adapters/vllm/test_heads.py``), so the rotary and norm conventions below are the
ones the checkpoint family uses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

EPS = 1e-6
ROPE_THETA = 10000.0
LR = 1e-2


def load_target(directory) -> dict:
    """The target's parameters by name (float32) and its config fields."""
    import json

    from safetensors.torch import load_file

    config = json.loads((directory / "config.json").read_text())
    weights = load_file(str(directory / "model.safetensors"))
    return {"config": config, "weights": weights}


def rms(x, weight) -> torch.Tensor:  # [..., H], [H] -> [..., H]
    return weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)


def rotary(x, head_dim) -> torch.Tensor:  # [B, T, heads, D] -> same, neox halves (transformers' rotate_half)
    half = head_dim // 2
    inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # [D/2]
    angles = torch.arange(x.shape[1], dtype=torch.float32)[:, None] * inv_freq  # [T, D/2]
    cos = torch.cat([angles, angles], -1).cos()[None, :, None]  # [1, T, 1, D]
    sin = torch.cat([angles, angles], -1).sin()[None, :, None]
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def attention(x, w, head_dim) -> torch.Tensor:  # [B, T, In] -> [B, T, H]; w: q, k, v [H, In], o [H, H]; causal
    b, t, _ = x.shape
    q, k, v = (x @ w[n].T for n in ("q", "k", "v"))  # [B, T, H]
    q, k, v = (y.view(b, t, -1, head_dim) for y in (q, k, v))  # [B, T, heads, D]
    q, k = rotary(q, head_dim), rotary(k, head_dim)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return out.transpose(1, 2).reshape(b, t, -1) @ w["o"].T


def mlp(x, w) -> torch.Tensor:  # [B, T, H] -> [B, T, H]
    return (F.silu(x @ w["gate"].T) * (x @ w["up"].T)) @ w["down"].T


#: A Llama layer's weights by their short names, and the names a checkpoint stores them under.
LAYER_NAMES = {
    "q": "self_attn.q_proj",
    "k": "self_attn.k_proj",
    "v": "self_attn.v_proj",
    "o": "self_attn.o_proj",
    "gate": "mlp.gate_proj",
    "up": "mlp.up_proj",
    "down": "mlp.down_proj",
    "in_norm": "input_layernorm",
    "post_norm": "post_attention_layernorm",
}


def layer_weights(weights: dict, prefix: str) -> dict:
    """q, k, v, o, gate, up, down, in_norm, post_norm of one Llama layer stored under ``prefix``."""
    return {key: weights[f"{prefix}{name}.weight"].float() for key, name in LAYER_NAMES.items()}


def target_forward(target: dict, ids) -> tuple:  # [B, T] -> logits [B, T, V], final hidden [B, T, H], aux [B, T, H] × 2
    """vLLM's ``LlamaModel.forward`` (model_executor/models/llama.py:406): the final-normed hidden state goes to
    EAGLE-1 and Medusa; aux = [input of layer 0, pre-norm output] (interfaces.py:1601) goes to EAGLE-3."""
    w, d = target["weights"], target["config"]["head_dim"]
    x = w["model.embed_tokens.weight"][ids]  # [B, T, H]
    aux = [x]
    for i in range(target["config"]["num_hidden_layers"]):
        lw = layer_weights(w, f"model.layers.{i}.")
        x = x + attention(rms(x, lw["in_norm"]), lw, d)
        x = x + mlp(rms(x, lw["post_norm"]), lw)
    aux.append(x)
    hidden = rms(x, w["model.norm.weight"])
    return hidden @ w["lm_head.weight"].T, hidden, aux


# ------------------------------------------------------------------------------------------------- heads


def eagle_forward(p: dict, target: dict, ids, hidden) -> tuple:  # [B, T], [B, T, H] -> logits [B, T, V], [B, T, H]
    """llama_eagle.py:140-151: fc(cat(embed, hidden)), a layer whose input norm is the identity (:54), no final norm;
    the target's embedding and LM head (shared)."""
    w = target["weights"]
    x = torch.cat([w["model.embed_tokens.weight"][ids], hidden], -1) @ p["fc"].T  # [B, T, H]
    x = x + attention(x, p, target["config"]["head_dim"])
    x = x + mlp(rms(x, p["post_norm"]), p)
    return x @ w["lm_head.weight"].T, x


def eagle3_forward(p: dict, target: dict, ids, hidden) -> tuple:  # hidden [B, T, H] (fc applied) -> logits, hidden
    """llama_eagle3.py:129-140 and :259-271: the layer reads cat(norm(embed), norm(hidden)) with hidden as its
    residual (norm after residual), then a final norm and the head's own LM head; the pre-norm state is fed back."""
    embeds = rms(target["weights"]["model.embed_tokens.weight"][ids], p["in_norm"])
    x = torch.cat([embeds, rms(hidden, p["hidden_norm"])], -1)  # [B, T, 2H]
    residual = hidden + attention(x, p, target["config"]["head_dim"])
    prenorm = residual + mlp(rms(residual, p["post_norm"]), p)
    return rms(prenorm, p["norm"]) @ p["lm_head"].T, prenorm


def medusa_forward(p: dict, hidden, k: int) -> torch.Tensor:  # [B, T, H] -> logits [B, T, V], head k (medusa.py:35-38)
    return (hidden + F.silu(hidden @ p[f"block{k}"].T)) @ p[f"lm_head{k}"].T


# ------------------------------------------------------------------------------------------------- fit


def sample_sequences(target: dict, num: int, length: int, seed: int) -> torch.Tensor:  # -> [num, length] int64
    """Prompts of 1-3 uniform tokens continued by target sampling (temperature 1, EOS an ordinary token)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocab = target["config"]["vocab_size"]
    seqs = torch.from_numpy(rng.integers(0, vocab - 1, size=(num, length)))
    starts = rng.integers(1, 4, size=num)
    uniforms = torch.from_numpy(rng.random((num, length)))
    with torch.no_grad():
        for t in range(1, length):
            logits = target_forward(target, seqs[:, :t])[0][:, -1].double()  # [num, V]
            cdf = torch.softmax(logits, -1).cumsum(-1)
            drawn = torch.searchsorted(cdf, uniforms[:, t : t + 1].contiguous()).clamp_max(vocab - 1)[:, 0]
            seqs[:, t] = torch.where(torch.from_numpy(starts > t), seqs[:, t], drawn)
    return seqs


def init_head(method: str, target: dict, num_heads: int, gen) -> dict:
    """The head's parameters, from the target's where the shapes match (name -> tensor, requires_grad)."""
    w, h = target["weights"], target["config"]["hidden_size"]
    lw = layer_weights(w, "model.layers.0.")
    small = lambda *shape: 0.02 * torch.randn(*shape, generator=gen)  # noqa: E731
    if method == "medusa":
        p = {}
        for k in range(num_heads):
            p[f"block{k}"] = small(h, h)
            p[f"lm_head{k}"] = w["lm_head.weight"].clone()
    elif method == "eagle":
        p = {n: lw[n].clone() for n in ("q", "k", "v", "o", "gate", "up", "down", "post_norm")}
        p["fc"] = torch.cat([torch.eye(h), small(h, h)], 1)
    else:
        p = {n: lw[n].clone() for n in ("o", "gate", "up", "down", "post_norm", "in_norm")}
        for n in ("q", "k", "v"):
            p[n] = torch.cat([lw[n], small(*lw[n].shape)], 1)
        p["hidden_norm"], p["norm"] = torch.ones(h), w["model.norm.weight"].clone()
        p["lm_head"] = w["lm_head.weight"].clone()
        p["fc"] = torch.cat([small(h, h), torch.eye(h)], 1)  # [H, 2H]: aux = [embedding, pre-norm output]
    return {n: v.clone().requires_grad_(True) for n, v in p.items()}


def head_loss(method: str, p: dict, target: dict, seqs, num_heads: int, outputs) -> torch.Tensor:
    """Mean KL(target ‖ head) of the first draft (and of the second, fed its own hidden state, for EAGLE);
    ``outputs`` = ``target_forward(target, seqs)``."""
    logits, hidden, aux = outputs
    probs = torch.softmax(logits, -1)  # [B, T, V]: position i -> token i + 1
    if method == "medusa":
        loss = 0.0
        for k in range(num_heads):  # head k at position i proposes token i + 2 + k
            draft = medusa_forward(p, hidden[:, : seqs.shape[1] - 2 - k], k)
            loss = loss + F.cross_entropy(draft.flatten(0, 1), seqs[:, 2 + k :].flatten())
        return loss / num_heads
    forward = eagle_forward if method == "eagle" else eagle3_forward
    start = hidden if method == "eagle" else torch.cat(aux, -1) @ p["fc"].T
    draft1, own = forward(p, target, seqs[:, 1:], start[:, :-1])  # position i proposes token i + 2
    loss = _kl(probs[:, 1:], draft1)
    draft2, _ = forward(p, target, seqs[:, 2:], own[:, :-1])  # second draft: its own hidden state fed back
    return loss + 0.5 * _kl(probs[:, 2:], draft2)


def _kl(probs, logits):  # [B, T, V], [B, T, V] -> scalar
    return (probs * (probs.clamp_min(1e-30).log() - torch.log_softmax(logits, -1))).sum(-1).mean()


def agreement(method: str, p: dict, target: dict, seqs, outputs) -> float:
    """How often the first draft (the head's argmax) equals the target's argmax at the same position (Medusa: the
    token the target sampled there)."""
    with torch.no_grad():
        logits, hidden, aux = outputs
        if method == "medusa":  # head 0 never sees the token just sampled: scored against the sampled token
            return float((medusa_forward(p, hidden[:, :-2], 0).argmax(-1) == seqs[:, 2:]).double().mean())
        forward = eagle_forward if method == "eagle" else eagle3_forward
        start = hidden if method == "eagle" else torch.cat(aux, -1) @ p["fc"].T
        draft, _ = forward(p, target, seqs[:, 1:], start[:, :-1])
        return float((draft.argmax(-1) == logits[:, 1:].argmax(-1)).double().mean())


def fit(method: str, target: dict, *, steps: int, seed: int, num_heads: int, num_seqs: int, seq_len: int) -> tuple:
    """Initialise and fit a head; returns (checkpoint tensors by vLLM's names, a small report)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is ~10x faster than two contended ones, and deterministic
    try:
        return _fit(method, target, steps=steps, seed=seed, num_heads=num_heads, num_seqs=num_seqs, seq_len=seq_len)
    finally:
        torch.set_num_threads(threads)


def _fit(method: str, target: dict, *, steps: int, seed: int, num_heads: int, num_seqs: int, seq_len: int):
    gen = torch.Generator().manual_seed(seed)
    seqs = sample_sequences(target, num_seqs, seq_len, seed)
    with torch.no_grad():
        outputs = target_forward(target, seqs)
    p = init_head(method, target, num_heads, gen)
    optimiser = torch.optim.Adam(list(p.values()), lr=LR)
    losses = []
    for _ in range(steps + 1):
        optimiser.zero_grad()
        loss = head_loss(method, p, target, seqs, num_heads, outputs)
        losses.append(float(loss.detach()))
        if len(losses) <= steps:
            loss.backward()
            optimiser.step()
    report = {
        "loss_start": losses[0],
        "loss_end": losses[-1],
        "first_draft_argmax_agreement": agreement(method, p, target, seqs, outputs),
    }
    return checkpoint_names(method, p, num_heads), report


def checkpoint_names(method: str, p: dict, num_heads: int) -> dict:
    """The tensors under the names vLLM's loaders read (llama_eagle.py:178, llama_eagle3.py:420, medusa.py:145)."""
    if method == "medusa":
        out = {}
        for k in range(num_heads):
            out[f"blocks.{k}.layers.0.weight"] = p[f"block{k}"]
            out[f"lm_heads.{k}.weight"] = p[f"lm_head{k}"]
        return out
    names = {**LAYER_NAMES, "hidden_norm": "hidden_norm"}
    out = {f"layers.0.{names[n]}.weight": v for n, v in p.items() if n in names}
    out["fc.weight"] = p["fc"]
    if method == "eagle3":
        out["norm.weight"], out["lm_head.weight"] = p["norm"], p["lm_head"]
    return out


def dflash_from_target(target: dict) -> dict:
    """The DFlash drafter's tensors (qwen3_dflash.py:413-520 names): the target's layer, identity ``fc``, unit norms."""
    w, h, d = target["weights"], target["config"]["hidden_size"], target["config"]["head_dim"]
    out = {}
    for name in (
        "self_attn.q_proj",
        "self_attn.k_proj",
        "self_attn.v_proj",
        "self_attn.o_proj",
        "mlp.gate_proj",
        "mlp.up_proj",
        "mlp.down_proj",
        "input_layernorm",
        "post_attention_layernorm",
    ):
        out[f"layers.0.{name}.weight"] = w[f"model.layers.0.{name}.weight"].clone()
    out["layers.0.self_attn.q_norm.weight"] = torch.ones(d)
    out["layers.0.self_attn.k_norm.weight"] = torch.ones(d)
    out["fc.weight"], out["hidden_norm.weight"], out["norm.weight"] = torch.eye(h), torch.ones(h), torch.ones(h)
    return out
