"""vLLM's in-process ``LLM`` engine as a specverify decoder: draft-model and n-gram speculation, and plain sampling.

**Methods.** One table, :data:`METHODS` (factory name -> :class:`MethodSpec`), says per method which vLLM ``method``
it runs, whether it loads a draft checkpoint (the pair's draft, or the one ``MethodSpec.draft_path`` gives), its
``draft_law`` and ``prefill_tokens``, its capabilities, the engine options it accepts with their defaults, and how
its ``speculative_config`` is built. Each factory is made from the table (``factory(target, draft, **options)``, named
``specverify.adapters.vllm:NAME``): ``draft_model`` (the draft samples its tokens), ``draft_model_greedy`` (the
draft proposes its argmax), ``ngram`` (prompt lookup, n in [1, 2] by default; the draft is ignored) and ``plain``
(speculation off: the control), the head methods and ``mtp`` (the MTP layer inside a MiMo target; its factory
declares ``checkpoint_pairs = "mimo"``, so its scenarios run on the MiMo pair) and ``suffix`` (suffix decoding;
needs arctic-inference; ``suffix``). ``target`` and ``draft`` must be ``CheckpointModel`` s
of the AR family: vLLM loads ``target.path`` (float32, eager, ``max_model_len`` 128, KV block size 32) with the
checkpoint's own tokenizer, which gives vLLM the EOS id and the text that stop strings are matched on. Toy models and
the toy draft families (``--drafts`` other than ``ar``) cannot be loaded (``InvalidArgument``, verdict ``error``).

**Engine options** (``--engine-option KEY=VALUE``; an unknown key raises ``InvalidArgument`` listing the accepted
ones): ``workaround`` (every method; None, a name or a list of names of ``patches``,
gated to vLLM 0.32.0: ``"expand-kernel"``, finding 1 worked around in-process — a process cannot hold live decoders
with and without it — and ``"stop-metrics"``, the per-request acceptance counts of requests a stop string ends, which
vLLM drops; without it such a completion reports ``accepted=None``), ``threads`` (every method: torch's intra-op
threads, set at each engine start, process-wide; default 1, docs/findings/vllm.md "Times"), ``draft_sample_method``
(every method that loads a draft: ``"probabilistic"`` or ``"greedy"``; vLLM's default is greedy, ``draft_model``'s
probabilistic, ``draft_model_greedy``'s greedy; ``draft_law`` follows it: ``model-temperature`` — vLLM's sampled draft
sees the temperature and no other processor — or ``model-argmax``), ``prompt_lookup_min`` / ``prompt_lookup_max``
(``ngram``: 1 and 2), and the options of the engine configurations (``configs``, which names
the presets and the evidence of their state): ``enable_prefix_caching``, ``max_num_batched_tokens`` (``max_num_seqs``
follows it down), ``num_gpu_blocks_override`` (None: vLLM's default each), ``parallel_n`` (identical unseeded requests
of a call as one vLLM request with ``n`` = their number) and ``declare_seed`` (false: ``seed`` not declared, every
request unseeded). ``decoder.engine_info`` records vLLM's version, the requested method, options and speculative
configs, what each engine ran (read back from its ``vllm_config`` and kernel registry) and ``state``, the counts of
the configurations' evidence (prompt tokens served from the prefix cache, split prefills, preemptions, packed
requests; ``configs``).

**Layout**, one module per job: ``factories`` (the factories, made from the table), ``methods`` (the table, its
options and their checks), ``decoder`` (``VllmDecoder``: one engine per γ, a call), ``mapping`` (requests onto vLLM
and its outputs back: what is declared, where a completion ends, prefill), ``engine`` (the process's live engines,
their shutdown, the load checks, what an engine runs), ``counters`` (vLLM's spec-decode counters,
``reported_metrics()``), ``configs`` (the engine configurations and the evidence of their state), ``patches`` (the
opt-in workarounds of vLLM bugs), ``heads`` and ``head_math`` (the draft heads of the head methods) and ``suffix``
(suffix decoding). Importing this package imports neither vLLM nor torch.
"""

from specverify.adapters.vllm.configs import ENGINE_CONFIGS
from specverify.adapters.vllm.decoder import VllmDecoder
from specverify.adapters.vllm.engine import close_all
from specverify.adapters.vllm.factories import (
    dflash,
    draft_model,
    draft_model_greedy,
    eagle,
    eagle3,
    medusa,
    mtp,
    ngram,
    plain,
    suffix,
)
from specverify.adapters.vllm.mapping import completion
from specverify.adapters.vllm.methods import COMMON_OPTIONS, METHODS, MethodSpec

__all__ = [
    "draft_model",
    "draft_model_greedy",
    "ngram",
    "plain",
    "eagle",
    "eagle3",
    "medusa",
    "dflash",
    "mtp",
    "suffix",
    "VllmDecoder",
    "MethodSpec",
    "METHODS",
    "COMMON_OPTIONS",
    "ENGINE_CONFIGS",
    "close_all",
    "completion",
]
