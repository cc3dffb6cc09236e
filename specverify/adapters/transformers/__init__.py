"""transformers' ``generate()`` as a specverify decoder: assisted generation, prompt lookup, and plain sampling.

Factories (docs/adapters.md): ``assisted(target, draft)`` (the draft is the ``assistant_model``),
``prompt_lookup(target, draft)`` (``prompt_lookup_num_tokens`` = γ; the draft is ignored) and ``plain(target,
draft)`` (speculation off: the control); the newer candidate generators of transformers 5.25, on checkpoint pairs
only, each with the models it needs built beside the target (``generators``): ``early_exit`` (the target's first
layers draft), ``universal`` (a draft with another tokenizer: USD when sampling, the greedy different-tokenizer
generator at temperature 0), ``mtp`` (a target with an MTP layer) and ``dflash`` (a DFlash drafter).
``target`` and ``draft`` are ``CheckpointModel`` s, loaded with
``LlamaForCausalLM.from_pretrained(path, dtype=float32, attn_implementation="eager")``, or toy models, wrapped by
``toy_model``. One request per ``generate`` call: assisted generation is batch size 1.

**Layout**, one module per job: ``factories`` (the factories), ``configs`` (their engine configurations),
``decoder`` (``TransformersDecoder``: the mapping, the caches, the fast path ``sample()``), ``generators`` (the
newer modes' set-up and models, their findings' workarounds), ``hooks`` (every private
transformers detail the adapter relies on, and the version check) and ``toy_model`` (the toy family through
transformers). Importing this package imports neither transformers nor torch.
"""

from specverify.adapters.transformers.configs import ENGINE_CONFIGS
from specverify.adapters.transformers.decoder import CACHES, MODES, TransformersDecoder
from specverify.adapters.transformers.factories import (
    assisted,
    dflash,
    early_exit,
    mtp,
    plain,
    prompt_lookup,
    universal,
)

__all__ = [
    "assisted",
    "prompt_lookup",
    "plain",
    "early_exit",
    "universal",
    "mtp",
    "dflash",
    "TransformersDecoder",
    "MODES",
    "CACHES",
    "ENGINE_CONFIGS",
]
