"""Draft heads for vLLM's head-based speculative methods, built on disk for a checkpoint target (no download).

vLLM's ``eagle``, ``eagle3`` and ``medusa`` methods draft with a small head that reads the target's hidden states, so a
head is tied to one target: ``HeadSpec(method, target)`` names it and ``head_dir(spec)`` writes it once into
``<checkpoint cache>/head-<method>-<hash>`` (``specverify.oracles.checkpoint.cache_root``), like the model pairs. The
head has the target's vocabulary (no draft/target vocabulary map) and, where vLLM shares them, the target's embedding
and LM head (EAGLE-1); EAGLE-3 and Medusa keep their own LM heads.

**Drafting is real.** A head starts from the target's own weights where the shapes match and is then fitted by
distillation (``steps`` Adam steps on sequences sampled from the target, seeded: ``numpy.random.default_rng(seed)``
for the data, ``torch.Generator().manual_seed(seed)`` for the rest), so its drafts are often the target's choice. The
forward passes below are written to match vLLM 0.32.0's modules (file:line in each function); they only decide how
good the drafts are, never what is sampled: the law of a correct engine does not depend on the head.

- ``eagle`` (``EagleLlamaForCausalLM``, model_executor/models/llama_eagle.py): ``fc`` maps [embedding of the next
  token, target hidden] to the hidden size, one Llama layer without its input norm, no final norm; the target's
  embedding and LM head are shared (not in the checkpoint, llm_base_proposer.py:1416-1550).
- ``eagle3`` (``Eagle3LlamaForCausalLM``, llama_eagle3.py): ``fc`` combines the target's hidden states at
  ``eagle_aux_hidden_state_layer_ids`` = [0, 1] (for the one-layer target: its input embedding and its pre-norm output;
  vLLM's default (2, n // 2, n - 3) does not exist for one layer), a layer whose attention reads
  [norm(embedding), norm(hidden)] (2H wide), a final norm and its own LM head.
- ``medusa`` (``Medusa``, medusa.py): ``num_heads`` residual blocks on the target's last hidden state, head k
  proposing the token k + 2 places after that state's position (it never sees the token just sampled).
- ``dflash`` (``DFlashQwen3ForCausalLM``, qwen3_dflash.py, architecture ``DFlashDraftModel``): a one-layer Qwen3
  block drafter; ``dflash_config.target_layer_ids`` = [0] (vLLM reads the pre-norm output of target layer 0,
  gpu_model_runner.py:5272-5276), ``mask_token_id`` = the EOS id (the mask slots' input; a real EOS never reaches
  the drafter's queries, since it ends the request). Its attention is non-causal over [next token, γ masks] with the
  context's K/V projected from the target's hidden states; that forward is not written here, so the head is the
  target's own layer, ``fc`` = identity and unit norms, **not fitted** (``steps`` must be 0): its drafts are real
  but accepted less often.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from specverify.errors import InvalidArgument, check
from specverify.oracles.checkpoint_spec import CheckpointSpec

__all__ = [
    "HEAD_METHODS",
    "HeadSpec",
    "head_dir",
    "head_for",
    "speculative_config",
    "first_draft_agreement",
    "method_specs",
]

HEAD_METHODS = ("eagle", "eagle3", "medusa", "dflash")
FITTED = ("eagle", "eagle3", "medusa")  # dflash: the target's weights, no fit (module docstring)
FORMAT_VERSION = 2  # bump when a recipe below changes: part of every head directory's hash
AUX_LAYERS = (0, 1)  # eagle3: the target's input embedding and its pre-norm output (one-layer target)
_EPS = 1e-6  # LlamaConfig's rms_norm_eps, which the target and the heads use
_SEQ_LEN = 10  # tokens per training sequence
_NUM_SEQS = 256


@dataclass(frozen=True)
class HeadSpec:
    """A draft head of ``method`` (one of ``HEAD_METHODS``) for the checkpoint ``target``, fitted in ``steps`` Adam
    steps from ``seed``; ``num_heads`` is Medusa's number of heads (vLLM uses the first γ, so γ ≤ ``num_heads``)."""

    method: str
    target: CheckpointSpec = CheckpointSpec()
    steps: "int | None" = None  # None: 100 for the fitted heads, 0 for dflash
    seed: int = 0
    num_heads: int = 5

    def __post_init__(self):
        check(self.method in HEAD_METHODS, f"method={self.method!r} must be one of {HEAD_METHODS!r}.")
        if self.steps is None:
            object.__setattr__(self, "steps", 100 if self.method in FITTED else 0)
        check(
            self.method in FITTED or self.steps == 0,
            f"steps={self.steps!r}: the {self.method} head is not fitted (its forward is not written here); "
            "leave steps out.",
        )
        check(isinstance(self.target, CheckpointSpec), f"target={self.target!r} must be a CheckpointSpec.")
        check(
            self.target.num_layers == 1 or self.method != "eagle3",
            f"target.num_layers={self.target.num_layers!r}: the eagle3 head reads layers {AUX_LAYERS!r}, "
            "written for a one-layer target; use CheckpointSpec(num_layers=1).",
        )
        for name in ("steps", "seed", "num_heads"):
            value = getattr(self, name)
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= (0 if name != "num_heads" else 1),
                f"{name}={value!r} must be an int >= {0 if name != 'num_heads' else 1}.",
            )

    def key(self) -> str:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "target"}
        target = {f.name: getattr(self.target, f.name) for f in dataclasses.fields(self.target)}
        text = json.dumps({"format": FORMAT_VERSION, **fields, "target": target}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def speculative_config(method: str, head_path, num_speculative_tokens: int) -> dict:
    """vLLM's ``speculative_config`` for a head written by ``head_dir`` (drafts: vLLM's default, the head's argmax)."""
    check(method in HEAD_METHODS, f"method={method!r} must be one of {HEAD_METHODS!r}.")
    check(
        isinstance(num_speculative_tokens, int) and num_speculative_tokens >= 1,
        f"num_speculative_tokens={num_speculative_tokens!r} must be an int >= 1.",
    )
    return {"method": method, "model": str(head_path), "num_speculative_tokens": num_speculative_tokens}


def head_dir(spec: HeadSpec, *, root=None) -> Path:
    """The directory of ``spec``'s head (config.json, model.safetensors, specverify.json), written first if missing;
    its target is written too (``specverify.oracles.checkpoint.target_dir``)."""
    from specverify.oracles.checkpoint import cache_root, publish_directory, target_dir

    if not isinstance(spec, HeadSpec):
        raise InvalidArgument(f"spec={spec!r} must be a HeadSpec (HeadSpec('eagle'), ...).")
    root = Path(root if root is not None else cache_root())
    final = root / f"head-{spec.method}-{spec.key()}"
    if final.is_dir():
        return final
    source = target_dir(spec.target, root=root)
    publish_directory(final, lambda tmp: _write_head(tmp, spec, source))
    return final


# ------------------------------------------------------------------------------------------------- files


def _write_head(directory: Path, spec: HeadSpec, source: Path) -> None:
    import torch
    from safetensors.torch import save_file

    from specverify.adapters.vllm import head_math as hm

    target = hm.load_target(source)
    if spec.method == "dflash":
        head, report = hm.dflash_from_target(target), {"first_draft_argmax_agreement": None}
    else:
        head, report = hm.fit(
            spec.method,
            target,
            steps=spec.steps,
            seed=spec.seed,
            num_heads=spec.num_heads,
            num_seqs=_NUM_SEQS,
            seq_len=_SEQ_LEN,
        )
    tensors = {name: value.detach().to(torch.float32).contiguous() for name, value in head.items()}
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(_config(spec, source), indent=1, sort_keys=True))
    meta = {
        "format": FORMAT_VERSION,
        "method": spec.method,
        "steps": spec.steps,
        "seed": spec.seed,
        "num_heads": spec.num_heads,
        "fit": report,
        "target": source.name,
    }
    (directory / "specverify.json").write_text(json.dumps(meta, indent=1, sort_keys=True))


def _config(spec: HeadSpec, source: Path) -> dict:
    base = json.loads((source / "config.json").read_text())
    if spec.method == "medusa":
        return {
            "model_type": "medusa",
            "architectures": ["MedusaModel"],
            "hidden_size": base["hidden_size"],
            "vocab_size": base["vocab_size"],
            "num_heads": spec.num_heads,
            "num_hidden_layers": 1,
        }
    if spec.method == "dflash":
        keep = (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
            "rms_norm_eps",
            "bos_token_id",
            "eos_token_id",
            "tie_word_embeddings",
            "rope_parameters",
        )
        return {
            **{k: base[k] for k in keep if k in base},
            "model_type": "qwen3",
            "architectures": ["DFlashDraftModel"],
            "num_hidden_layers": 1,
            "hidden_act": "silu",
            "attention_bias": False,
            "dtype": "float32",
            "dflash_config": {"target_layer_ids": [0], "mask_token_id": base["vocab_size"] - 1},
        }
    config = {**base, "num_hidden_layers": 1, "architectures": ["LlamaForCausalLM"]}
    if spec.method == "eagle3":
        config["eagle_aux_hidden_state_layer_ids"] = list(AUX_LAYERS)
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(AUX_LAYERS), "use_aux_hidden_state": True}
        config["draft_vocab_size"] = base["vocab_size"]
    return config


def head_for(method: str, target) -> Path:
    """The head of ``method`` for a built checkpoint target (a ``CheckpointModel``), beside it in its cache root;
    the target's spec is read back from its ``specverify.json``."""
    path = getattr(target, "path", None)
    meta = Path(path) / "specverify.json" if path is not None else None
    if meta is None or not meta.is_file():
        raise InvalidArgument(
            f"target={target!r} is not a checkpoint target built by specverify (no specverify.json): vLLM's {method} "
            "head is fitted to the target, so it needs CheckpointPairSpec(...).build().target (--models checkpoint)."
        )
    fields = json.loads(meta.read_text())["target"]
    return head_dir(HeadSpec(method, CheckpointSpec(**fields)), root=Path(path).parent)


def first_draft_agreement(path) -> "float | None":
    """The fit's estimate, written at build time, of how often the first draft equals the target's argmax on the
    training sequences (None: not fitted)."""
    meta = json.loads((Path(path) / "specverify.json").read_text())
    value = meta["fit"]["first_draft_argmax_agreement"]
    check(value is None or (isinstance(value, float) and math.isfinite(value)), f"{path}: malformed specverify.json")
    return value


# ------------------------------------------------------------------------------------------------- the adapter's table

_SUMMARIES = {
    "eagle": "EAGLE-1 speculation with a Llama head fitted to the target (heads).",
    "eagle3": "EAGLE-3 speculation with a Llama head reading target layers [0, 1].",
    "medusa": "Medusa speculation, five heads fitted to the target (drafts: argmax).",
    "dflash": "DFlash block drafting, a one-layer Qwen3 drafter from the target's layer.",
}


def method_specs(method_spec: type, capabilities: frozenset) -> dict:
    """The vLLM adapter's entries for the head methods (``specverify.adapters.vllm.METHODS``), built with its
    ``MethodSpec`` class. The drafts come from the head, not the pair's draft, so ``draft_law`` is unmodelled; the
    drafter runs in the prefill step as a draft model does, so one token comes before the first round (measured:
    docs/findings/vllm.md); ``draft_sample_method`` is an option where vLLM's proposer reads it (not Medusa's,
    v1/spec_decode/medusa.py:54, always the argmax)."""
    return {
        method: method_spec(
            method,
            loads_draft=True,
            capabilities=capabilities,
            speculative_config=_adapter_config(method),
            draft_law="unmodelled",
            prefill_tokens=1,
            options={} if method == "medusa" else {"draft_sample_method": "greedy"},
            draft_path=_adapter_path(method),
            summary=_SUMMARIES[method],
        )
        for method in HEAD_METHODS
    }


def _adapter_path(method: str):
    def path(target, draft, options) -> str:  # the pair's draft is not used
        return str(head_for(method, target))

    return path


def _adapter_config(method: str):
    def config(target_path, draft_path, gamma: int, options) -> dict:
        out = speculative_config(method, draft_path, gamma)
        if "draft_sample_method" in options:
            out["draft_sample_method"] = options["draft_sample_method"]
        return out

    return config
