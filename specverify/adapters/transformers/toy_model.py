"""The toy family through transformers: a ``ToyModel`` as a ``PreTrainedModel`` + ``GenerationMixin``.

Real engines load checkpoints; the toy family is where a cache bug is loud (docs/design.md, model families): the
"KV" entry at a position is a 64-bit hash of the whole prefix, and the logits are read from the last stored entry
only, so a token left behind or cropped too far moves the next law by a TV of 0.3 to 0.6.

The wrapped model keeps those entries in transformers' own cache, the ``DynamicCache`` that ``generate`` builds for it:
one ``DynamicLayer`` whose keys are the prefix hashes (int64 ``[B, 1, L, 1]``, the uint64 bits) and whose values are the
token ids. Appending, ``crop`` and ``get_seq_length`` are therefore the installed ``DynamicCache``'s own code, and
``tests/adapters/transformers/test_toy_model_engine.py`` runs the same operation sequences on this cache and on a
``DynamicCache`` of float tensors to show it. With ``cache_implementation="static"`` (the adapter's ``static-cache``
configuration) ``generate`` builds a ``StaticCache`` instead, whose one layer holds the same entries in preallocated
tensors; the entry before a call's first token is read at the cache's stored length (``get_seq_length()``), so a crop
that leaves its length wrong changes the law here too. ``forward`` reads the entry before its first token from the cache
(the root entry when the cache is empty), never from ``input_ids`` history, so the logits come only from what the cache
stores.

This module imports transformers at module level; the adapter (``decoder``) imports it lazily.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.cache_utils import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from specverify.errors import check
from specverify.oracles.models import ToyModel

__all__ = ["ToyHFConfig", "ToyForCausalLM", "wrap_toy", "stored_prefix_keys"]


class ToyHFConfig(PreTrainedConfig):
    """Config of a wrapped toy model: the vocabulary size, one cache layer, and EOS = BOS = PAD = the last id."""

    model_type = "specverify_toy"

    def __init__(self, vocab_size: int = 4, **kwargs):
        self.vocab_size = vocab_size
        self.num_hidden_layers = 1
        eos = vocab_size - 1
        for key in ("eos_token_id", "bos_token_id", "pad_token_id"):
            kwargs.setdefault(key, eos)
        super().__init__(**kwargs)


class ToyForCausalLM(PreTrainedModel, GenerationMixin):
    """A ``ToyModel`` behind transformers' causal-LM interface (``forward(input_ids, cache=...)``)."""

    config_class = ToyHFConfig
    main_input_name = "input_ids"
    _supports_cache_class = True

    def __init__(self, config: ToyHFConfig, toy: ToyModel):
        super().__init__(config)
        self.toy = toy
        # transformers reads device and dtype from the parameters; the toy model has none of its own
        self.anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
        self.post_init()

    def _init_weights(self, module) -> None:  # the anchor is zeros; nothing to initialise
        return None

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        cache: DynamicCache | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """Logits ``[B, k, V]`` after each of the ``k`` new tokens; their entries are appended to ``cache``."""
        check(input_ids is not None and input_ids.ndim == 2, "forward() needs input_ids of shape [B, k].")
        tokens = input_ids.detach().cpu().numpy()
        if cache is None and use_cache:
            cache = DynamicCache(config=self.config)
        prev = _last_entries(cache, tokens.shape[0], self.toy.root_kv)
        entries = np.empty(tokens.shape, dtype=np.uint64)
        for j in range(tokens.shape[1]):
            prev = self.toy.step_kv(prev, tokens[:, j])
            entries[:, j] = prev
        if cache is not None:
            keys = torch.from_numpy(entries.view(np.int64).copy())[:, None, :, None]
            cache.update(keys, torch.from_numpy(tokens.copy())[:, None, :, None], 0)
        logits = self.toy.head(entries.reshape(-1)).reshape(tokens.shape[0], tokens.shape[1], -1)
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            logits = logits[:, -logits_to_keep:]
        return CausalLMOutputWithPast(logits=logits.to(torch.float32), cache=cache)


def _last_entries(cache, batch: int, root) -> np.ndarray:  # -> uint64 [B]
    length = 0 if cache is None else int(cache.get_seq_length())
    if length == 0:
        return np.full(batch, root, dtype=np.uint64)
    # [B, 1, L, 1] int64; a StaticCache's tensors are preallocated to max_cache_len, its stored length is
    # get_seq_length() (cumulative_length): the entry before the new tokens is at length - 1, never at -1
    keys = cache.layers[0].keys
    return keys[:, 0, length - 1, 0].numpy().view(np.uint64).copy()


def stored_prefix_keys(cache) -> list:
    """The uint64 prefix hashes a toy cache holds for row 0, in order, up to its stored length (for tests)."""
    length = 0 if cache is None else int(cache.get_seq_length())
    if length == 0:
        return []
    return [int(x) for x in cache.layers[0].keys[0, 0, :length, 0].numpy().view(np.uint64)]


def wrap_toy(toy: ToyModel) -> ToyForCausalLM:
    """A transformers causal LM over ``toy`` (eval mode, float32 logits)."""
    check(isinstance(toy, ToyModel), f"toy={toy!r} must be a specverify ToyModel.")
    config = ToyHFConfig(vocab_size=toy.vocab.size)
    model = ToyForCausalLM(config, toy).eval()
    model.generation_config.eos_token_id = toy.vocab.eos_token_id
    model.generation_config.pad_token_id = toy.vocab.eos_token_id
    return model
