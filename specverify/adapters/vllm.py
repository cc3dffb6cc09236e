"""vLLM's in-process ``LLM`` engine as a specverify decoder: draft-model and n-gram speculation, and plain sampling.

**Methods.** One table, :data:`METHODS` (factory name -> :class:`MethodSpec`), says per method which vLLM ``method``
it runs, whether it loads a draft checkpoint (the pair's draft, or the one ``MethodSpec.draft_path`` gives), its
``draft_law`` and ``prefill_tokens``, its capabilities, the engine options it accepts with their defaults, and how
its ``speculative_config`` is built. Each factory is made from the table (``factory(target, draft, **options)``, named
``specverify.adapters.vllm:NAME``): ``draft_model`` (the draft samples its tokens), ``draft_model_greedy`` (the
draft proposes its argmax), ``ngram`` (prompt lookup, n in [1, 2] by default; the draft is ignored) and ``plain``
(speculation off: the control), the head methods and ``mtp`` (the MTP layer inside a MiMo target; its factory
declares ``checkpoint_pairs = "mimo"``, so its scenarios run on the MiMo pair) and ``suffix`` (suffix decoding;
needs arctic-inference; ``specverify.adapters.vllm_suffix``). ``target`` and ``draft`` must be ``CheckpointModel`` s
of the AR family: vLLM loads ``target.path`` (float32, eager, ``max_model_len`` 64, KV block size 32) with the
checkpoint's own tokenizer, which gives vLLM the EOS id and the text that stop strings are matched on. Toy models and
the toy draft families (``--drafts`` other than ``ar``) cannot be loaded (``InvalidArgument``, verdict ``error``).

**Engine options** (``--engine-option KEY=VALUE``; an unknown key raises ``InvalidArgument`` listing the accepted
ones): ``workaround`` (every method; None, a name or a list of names of :mod:`specverify.adapters.vllm_patches`,
gated to vLLM 0.32.0: ``"expand-kernel"``, finding 1 worked around in-process — a process cannot hold live decoders
with and without it — and ``"stop-metrics"``, the per-request acceptance counts of requests a stop string ends, which
vLLM drops; without it such a completion reports ``accepted=None``), ``threads`` (every method: torch's intra-op
threads, set at each engine start, process-wide; default 1, docs/findings/vllm.md "Times"), ``draft_sample_method``
(every method that loads a draft: ``"probabilistic"`` or ``"greedy"``; vLLM's default is greedy, ``draft_model``'s
probabilistic, ``draft_model_greedy``'s greedy; ``draft_law`` follows it: ``model-temperature`` — vLLM's sampled draft
sees the temperature and no other processor — or ``model-argmax``), ``prompt_lookup_min`` / ``prompt_lookup_max``
(``ngram``: 1 and 2), and the options of the engine configurations (``specverify.adapters.vllm_configs``, which names
the presets and the evidence of their state): ``enable_prefix_caching``, ``max_num_batched_tokens`` (``max_num_seqs``
follows it down), ``num_gpu_blocks_override`` (None: vLLM's default each), ``parallel_n`` (identical unseeded requests
of a call as one vLLM request with ``n`` = their number) and ``declare_seed`` (false: ``seed`` not declared, every
request unseeded). ``decoder.engine_info`` records vLLM's version, the requested method, options and speculative
configs, what each engine ran (read back from its ``vllm_config`` and kernel registry) and ``state``, the counts of
the configurations' evidence (prompt tokens served from the prefix cache, split prefills, preemptions, packed
requests; ``vllm_configs``).

vLLM fixes γ per engine (``num_speculative_tokens``), so a decoder makes one engine per γ it is asked for; ``plain``
makes one. Only ``SPECVERIFY_VLLM_MAX_ENGINES`` (default 1) engines live in a process: before another starts, the least
recently used is shut down. Several live engines in one process interfere (greedy outputs go wrong:
docs/findings/vllm.md, finding 5), so the default restarts an engine (2-5 s) at every change of γ or pair. A call groups
its requests by γ and sends each group as one ``generate()``, the live engine's γ first. The speculative decoders
declare ``fixed_gamma = True`` (docs/adapters.md: same-γ neighbours in batch composition, greedy calls γ by γ,
docs/findings/vllm.md "Times"). Each engine gets a fresh random ``seed``: vLLM reseeds torch's global generator from it
(a fixed one would replay the unseeded draws). ``close()``, eviction or exit shuts engines.

**Mapping, and what is declared** (file:line refer to vLLM 0.32.0, docs/findings/vllm.md). The target's rows go
through, in order, penalties, ``allowed_token_ids``, min-tokens (EOS masked), temperature, top-k, top-p
(v1/sample/rejection_sampler.py:307 and :522 with drafts, v1/sample/sampler.py:381 and :259 without). Masks commute
with the penalties (-inf stays -inf), so this is the canonical order:

- ``temperature`` (0 = greedy, argmax), ``max_tokens``, ``min_tokens``, per-request ``seed``.
- ``repetition_penalty`` on prompt and generated tokens, ``frequency_penalty`` / ``presence_penalty`` on generated
  counts, OpenAI style (model_executor/layers/utils.py:43); with drafts, each row sees the drafts before it.
- ``top_k`` and ``top_p`` (v1/sample/ops/topk_topp_sampler.py:473): top-k keeps every token tied with the k-th and
  top-p keeps the tokens after the ascending cumulative mass exceeds 1 - p. Both equal the canonical cuts unless a
  probability sits exactly on the cut, which the checkpoint scenarios exclude (every cut >= 1e-3 away).
- ``bad_token_ids``: ``allowed_token_ids`` = the other ids, an exact id mask (vLLM's ``bad_words`` are strings).
- ``stop``: vLLM's stop strings on the detokenised text (v1/engine/detokenizer.py:133-153 drops the tokens after the one
  that completes a stop string within a step). vLLM holds stop strings back until ``min_tokens`` tokens exist, which is
  ``stop_after_min_tokens=True``; a request with both and the flag off raises ``InvalidArgument``, so the flag itself is
  not declared (only one of its values is honoured).
- ``min_p``, ``plain`` only (vLLM refuses it with speculation); vLLM applies it before top-k/top-p, so it is exact
  alone, and a request combining them raises ``InvalidArgument``.
- ``batch``; ``accepted`` for the speculative factories, from vLLM's per-request ``per_step_accepted`` (one entry per
  verification step with drafts, v1/metrics/stats.py:394), clipped to the tokens returned
  (``boundary.finish.clip_accepted``): vLLM counts drafts accepted past the finishing token before it cuts its output
  (v1/core/sched/scheduler.py:2118).

**Where a completion ends** (``specverify.adapters.boundary.finish``, every adapter's finish rule). vLLM is asked to
honour EOS, ``stop`` and ``max_tokens``; the adapter cuts nothing: the tokens are returned as vLLM emits them, with the
finish reason the rule gives, so tokens past an end reach the certifier, which reports them. Tokens that end before any
end raise ``EngineStoppedEarly`` (naming vLLM's ``finish_reason``).

**Prefill** (``decoder.prefill_tokens``, docs/adapters.md). ``draft_model`` / ``draft_model_greedy``: 1. The prefill
step samples the first token and the drafter proposes from it in the same step (v1/worker/gpu_model_runner.py:4380): the
scheduler keeps those drafts for the next step unless the prefill was a partial chunk
(v1/core/sched/scheduler.py:2559-2568), which the adapter never makes, so the first decode step verifies γ drafts
(finding 7: every count of 3000 requests fits 1; a decode step without drafts is rare, not impossible). ``ngram``: not
declared, not a constant: vLLM records a step only when it carried drafts (scheduler.py:2113-2149), and the n-gram
proposer drafts nothing while the context holds no match, so such steps commit tokens outside the reported rounds.

``max_num_batched_tokens`` covers every running request's whole prompt, so no prefill is ever split: a split prefill of
a seeded request crashes vLLM on CPU (``gen.set_offset``, v1/worker/gpu_model_runner.py:3502, finding 3). ``top_k`` is
declared for ``plain`` only: with speculation vLLM's engine dies on it (finding 2). Not declared: ``grammar`` (vLLM's
structured outputs take a JSON schema / regex / EBNF, not a token automaton; ``structured_outputs=true`` declares
``text-grammar``, a ``RegexGrammar`` sent as its regex, so the token-level grammar scenarios read not covered),
``ignore_eos``, ``stop_after_min_tokens``, ``stream``. Counters: ``reported_metrics()``. Layout: ``vllm_methods`` (the
table, re-exported), ``_vllm_mapping``, ``_vllm_engine`` (the live engines, their shutdown, the load checks;
re-exported), ``vllm_patches``, ``vllm_heads``, ``vllm_suffix``.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import weakref
from typing import Callable, Optional, Sequence

from specverify.adapters import _vllm_engine_patches, _vllm_metrics, vllm_configs, vllm_patches
from specverify.adapters._vllm_engine import (  # noqa: F401 -- re-exported: close_all (API), the rest the tests' seams
    _ENV,
    _LIVE,
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    _check_draft_family,
    _HideLlvmliteLib,
    _max_engines,
    _path,
    _shutdown,
    close_all,
)
from specverify.adapters._vllm_mapping import (  # noqa: F401 -- _check_request, _vllm_params: the tests' seams
    _add,
    _check_request,
    _diff,
    _effective_config,
    _spec_counters,
    _vllm_params,
    completion,
    set_threads,
)
from specverify.adapters.vllm_methods import (  # noqa: F401 -- re-exported: the table is part of this module's API
    COMMON_OPTIONS,
    ENGINE_CONFIGS,
    METHODS,
    PLAIN_CAPABILITIES,
    SPECULATIVE_CAPABILITIES,
    MethodSpec,
    method_options,
)
from specverify.errors import InvalidArgument
from specverify.protocol import Completion, Request

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
    "close_all",
    "completion",
]

_DECODERS: "weakref.WeakSet" = weakref.WeakSet()  # decoders not closed yet (the workaround's one-setting rule)


def _check_one_workaround_setting(decoder) -> None:
    """vLLM binds its kernel overrides process-wide at each engine start (module docstring of vllm_patches), so
    live decoders with and without a workaround cannot share a process."""

    def process_global(d) -> tuple:
        return tuple(
            w for w in vllm_patches.workarounds_of(d.options["workaround"]) if w in vllm_patches.PROCESS_GLOBAL
        )

    mine = process_global(decoder)
    for other in list(_DECODERS):
        theirs = process_global(other)
        if other is not decoder and not other._closed and theirs != mine:
            raise InvalidArgument(
                f"workaround={decoder.options['workaround']!r}: this process already holds a vLLM decoder with "
                f"workaround={other.options['workaround']!r} ({other.method}), and vLLM's kernel overrides "
                "(expand-kernel, min-tokens-bonus, padded-drafts) are process-global. Give --against the same "
                "--engine-option workaround=..., or run each decoder in its own worker (leave out --isolation none); "
                "close the other decoder first from Python."
            )


class VllmDecoder:
    """vLLM engines for one model pair and one method of :data:`METHODS` (options: :func:`method_options`), 1 per γ."""

    reported_metrics = _vllm_metrics.reported_metrics  # its counters (docs/adapters.md); None for ``plain``

    def __init__(self, target, draft, method: str, **options):
        self.options = method_options(method, options)
        spec = METHODS[method]
        _check_draft_family(draft)
        self.method, self.spec = method, spec
        self.target_path = _path(target, "target")
        self.draft_path = None
        if spec.loads_draft:
            self.draft_path = (
                str(spec.draft_path(target, draft, self.options)) if spec.draft_path else _path(draft, "draft")
            )
        self.vocab_size = int(target.vocab.size)
        self.vocab = target.vocab
        caps = frozenset(spec.capabilities) | ({"text-grammar"} if self.options["structured_outputs"] else frozenset())
        self.capabilities = caps if self.options["declare_seed"] else caps - {"seed"}  # vllm_configs: finding 3
        self.fixed_gamma = self._speculative  # one engine per γ (docs/adapters.md); plain ignores γ
        law = spec.law(self.options)  # what the drafts are (specverify.protocol.draft_law_of)
        if law is not None:
            self.draft_law = law
        if spec.prefill_tokens is not None:  # tokens committed before the first verification round
            self.prefill_tokens = spec.prefill_tokens
        self.engine_counters: dict = {}  # spec-decode counters summed over this decoder's calls (evidence)
        self.last_counters: dict = {}  # ... of the last call
        self.engine_start_s: list = []  # seconds each engine took to start
        self._effective: dict = {}  # str(γ) -> what that engine ran (engine_info)
        self._marks: dict = {}  # engine key -> its counters after its last call (one read of vLLM's per call)
        self._state = vllm_configs.new_state()  # the configurations' evidence (engine_info["state"])
        self._flagged: dict = {"padded": set(), "preempted": set(), "short": set()}  # ids: vllm_configs.record_*
        self._preempted: dict = {}  # engine key -> vllm:num_preemptions after its last call
        self._closed = False
        _check_one_workaround_setting(self)
        _DECODERS.add(self)
        try:
            self._engine(3 if self._speculative else 0)  # fail at set-up, not in the first call
        except BaseException:
            self._closed = True  # holds no engine: never blocks another decoder's workaround setting
            raise

    @property
    def _speculative(self) -> bool:
        return self.spec.vllm_method is not None

    def speculative_config(self, gamma: int) -> Optional[dict]:
        """The ``speculative_config`` this decoder's engine for γ gets (None: speculation off)."""
        return self.spec.speculative_config(self.target_path, self.draft_path, gamma, self.options)

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: vLLM's version, what was requested and what each engine ran (``effective`` by γ)."""
        gammas = sorted(self._effective, key=int) or (["3"] if self._speculative else ["0"])
        requested = {
            "method": self.method,
            "vllm_method": self.spec.vllm_method,
            "options": dict(self.options),
            "speculative_config": {g: self.speculative_config(int(g)) for g in gammas},
        }
        return {
            "name": "vllm",
            "version": vllm_patches.vllm_version(),
            "requested": requested,
            "effective": dict(self._effective),
            "state": dict(self._state),
        }

    def _engine(self, gamma: int) -> object:
        key = (id(self), gamma if self._speculative else 0)
        llm = _LIVE.get(key)
        if llm is not None:
            _LIVE.move_to_end(key)
            return llm
        while len(_LIVE) >= _max_engines():
            _shutdown(_LIVE.popitem(last=False)[1])
        for name, value in _ENV.items():
            os.environ.setdefault(name, value)
        from vllm import LLM

        started = time.perf_counter()
        spec = self.speculative_config(key[1])
        extra = {"per_request_spec_decode_metrics": "detailed"} if spec else {}
        vllm_patches.bind(self.options["workaround"])  # the override is bound when the engine starts
        set_threads(self.options["threads"])
        budget = self.options["max_num_batched_tokens"]
        for option in ("enable_prefix_caching", "num_gpu_blocks_override"):  # vllm_configs: None is vLLM's default
            if self.options[option] is not None:
                extra[option] = self.options[option]
        with _HideLlvmliteLib():
            llm = LLM(
                model=self.target_path,
                dtype="float32",
                enforce_eager=True,
                max_model_len=MAX_MODEL_LEN,
                block_size=32,
                max_num_seqs=MAX_NUM_SEQS if budget is None else min(MAX_NUM_SEQS, budget),
                # by default never a partial prefill (finding 3); chunked-prefill sets a small budget on purpose
                max_num_batched_tokens=MAX_NUM_SEQS * MAX_MODEL_LEN if budget is None else budget,
                speculative_config=spec,
                disable_log_stats=False,
                seed=random.SystemRandom().randrange(2**31),
                **extra,
            )
        if budget is not None:
            vllm_configs.count_partial_prefills(llm, self._state)
        if spec is not None:
            vllm_configs.record_scheduled_drafts(llm, self._state, self._flagged)
            vllm_configs.record_preempted(llm, self._flagged["preempted"])
        if self.options["structured_outputs"]:
            vllm_configs.count_grammar_cuts(llm, self._state)
        set_threads(self.options["threads"])  # again: the engine may have imported numba (ngram)
        if spec is not None:  # stop-metrics, grammar-cut-drafts
            _vllm_engine_patches.attach_engine_workarounds(llm, self.options["workaround"])
        self.engine_start_s.append(time.perf_counter() - started)
        self._effective[str(key[1])] = _effective_config(llm, self.options)
        metrics = llm.get_metrics()
        self._marks[key] = _spec_counters(llm, metrics) if spec is not None else {}
        self._preempted[key] = vllm_configs.preemptions(metrics)
        _LIVE[key] = llm
        return llm

    def __call__(self, requests: Sequence[Request]) -> list[Completion]:
        if self._closed:
            raise InvalidArgument("this VllmDecoder was closed; make a new one with the factory.")
        requests = list(requests)
        for request in requests:
            _check_request(request, self.method, self.options["structured_outputs"])
        groups: dict = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.num_draft_tokens if self._speculative else 0, []).append(i)
        out: list = [None] * len(requests)
        self.last_counters = {}
        live = [gamma for gamma in groups if (id(self), gamma) in _LIVE]  # the live engine's γ first: one restart less
        for gamma, indices in sorted(groups.items(), key=lambda item: item[0] not in live):
            for i, done in zip(indices, self._generate(gamma, [requests[i] for i in indices])):
                out[i] = done
        return out

    def _generate(self, gamma: int, requests: list) -> list:
        llm = self._engine(gamma)
        if self._speculative and self.spec.before_generate is not None:  # suffix: empty its cache (vllm_suffix)
            self.spec.before_generate(llm, self.options)
        groups = vllm_configs.packed(requests) if self.options["parallel_n"] else [[i] for i in range(len(requests))]
        prompts = [{"prompt_token_ids": list(requests[g[0]].prompt)} for g in groups]
        params = [_vllm_params(requests[g[0]], self.vocab_size, n=len(g)) for g in groups]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        key = (id(self), gamma if self._speculative else 0)
        if self._speculative or self.options["num_gpu_blocks_override"] is not None:  # one read of the metrics
            metrics = llm.get_metrics()
            before, self._preempted[key] = self._preempted[key], vllm_configs.preemptions(metrics)
            self._state["preemptions"] += self._preempted[key] - before
        if self._speculative:
            before, self._marks[key] = self._marks[key], _spec_counters(llm, metrics)
            delta = _diff(before, self._marks[key])
            _add(self.engine_counters, delta)
            _add(self.last_counters, delta)
        if len(outputs) != len(groups):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(groups)} requests")
        vllm_configs.count_outputs(self._state, outputs)
        out: list = [None] * len(requests)
        for group, o in zip(groups, outputs):
            if tuple(o.prompt_token_ids) != requests[group[0]].prompt or len(o.outputs) != len(group):
                raise RuntimeError(
                    f"vLLM returned {len(o.outputs)} completion(s) of prompt {o.prompt_token_ids} for {len(group)} "
                    f"of prompt {requests[group[0]].prompt}"
                )
            for i, sample in zip(group, o.outputs):
                key = o.request_id if len(o.outputs) == 1 else f"{sample.index}_{o.request_id}"
                flags = {name: key in ids for name, ids in self._flagged.items()}  # completion(padded=, ...)
                for ids in self._flagged.values():
                    ids.discard(key)
                out[i] = completion(requests[i], sample, self.vocab, self.method, **flags)
        return out

    def engine(self, gamma: int = 3) -> object:
        """This decoder's ``vllm.LLM`` for γ = ``gamma`` (started if it is not live; plain ignores γ): the engine
        the state fuzzer (``specverify.fuzz.vllm_engine``) drives request by request."""
        if self._closed:
            raise InvalidArgument("this VllmDecoder was closed; make a new one with the factory.")
        if not (isinstance(gamma, int) and not isinstance(gamma, bool) and gamma >= 1):
            raise InvalidArgument(f"gamma={gamma!r} must be an int >= 1 (the drafts per round), e.g. engine(3).")
        return self._engine(gamma if self._speculative else 0)

    def close(self) -> None:
        """Shut down this decoder's engines (idempotent)."""
        self._closed = True
        for key in [k for k in _LIVE if k[0] == id(self)]:
            _shutdown(_LIVE.pop(key))

    def __del__(self):
        with contextlib.suppress(Exception):  # never raise from a finaliser
            self.close()


def _factory(name: str) -> Callable:
    """The module-level factory of ``METHODS[name]``, picklable by name (``specverify.adapters.vllm:NAME``)."""

    def factory(target, draft, **options) -> VllmDecoder:
        return VllmDecoder(target, draft, name, **options)

    spec = METHODS[name]
    accepted = {**COMMON_OPTIONS, **spec.options}
    factory.__name__ = factory.__qualname__ = name
    factory.__module__ = __name__
    factory.__doc__ = f"{spec.summary} Engine options (defaults): {accepted!r}."
    factory.draft_family = "ar"  # the checkpoint AR matrix only (_check_draft_family)
    factory.checkpoint_pairs = spec.checkpoint_pairs  # its pair set: the Llama pairs, or the MiMo pair for mtp
    factory.engine_configs = dict(ENGINE_CONFIGS)  # --engine-config NAME (vllm_configs)
    factory.default_engine_config = vllm_configs.DEFAULT_ENGINE_CONFIG
    return factory


draft_model = _factory("draft_model")
draft_model_greedy = _factory("draft_model_greedy")
ngram = _factory("ngram")
plain = _factory("plain")
eagle = _factory("eagle")
eagle3 = _factory("eagle3")
medusa = _factory("medusa")
dflash = _factory("dflash")
mtp = _factory("mtp")
suffix = _factory("suffix")
