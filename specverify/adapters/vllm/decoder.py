"""``VllmDecoder``: vLLM engines for one model pair and one method of the adapter's table (``methods.METHODS``).

vLLM fixes γ per engine (``num_speculative_tokens``), so a decoder makes one engine per γ it is asked for; ``plain``
makes one. Only ``SPECVERIFY_VLLM_MAX_ENGINES`` (default 1) engines live in a process: before another starts, the least
recently used is shut down. Several live engines in one process interfere (greedy outputs go wrong:
docs/findings/vllm.md, finding 5), so the default restarts an engine (2-5 s) at every change of γ or pair. A call groups
its requests by γ and sends each group as one ``generate()``, the live engine's γ first. The speculative decoders
declare ``fixed_gamma = True`` (docs/adapters.md: same-γ neighbours in batch composition, greedy calls γ by γ,
docs/findings/vllm.md "Times"). Each engine gets a fresh random ``seed``: vLLM reseeds torch's global generator from it
(a fixed one would replay the unseeded draws). ``close()``, eviction or exit shuts engines.

An engine start binds the process-global workarounds asked for (``patches.bind``), sets torch's threads, starts
vLLM's ``LLM`` (float32, eager, ``max_model_len`` ``MAX_MODEL_LEN``, KV blocks of 32 tokens), attaches the readers of
the configurations' evidence (``configs``) and the per-engine workarounds, and records what the engine runs
(``engine.effective_config``). A call checks and maps its requests (``mapping``), reads vLLM's counters around each
``generate()`` (``counters``) and maps the outputs back.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import weakref
from typing import Optional, Sequence

from specverify.adapters.vllm import configs, patches
from specverify.adapters.vllm.counters import add_counters, counter_delta, read_counters, reported_metrics
from specverify.adapters.vllm.engine import (
    ENV,
    LIVE,
    MAX_MODEL_LEN,
    MAX_NUM_SEQS,
    HideLlvmliteLib,
    check_draft_family,
    effective_config,
    max_engines,
    model_path,
    set_threads,
    shutdown,
)
from specverify.adapters.vllm.mapping import check_request, completion, vllm_params
from specverify.adapters.vllm.methods import METHODS, method_options
from specverify.errors import InvalidArgument
from specverify.protocol import Completion, Request

__all__ = ["VllmDecoder"]

_DECODERS: "weakref.WeakSet" = weakref.WeakSet()  # decoders not closed yet (the workaround's one-setting rule)


def _check_one_workaround_setting(decoder) -> None:
    """vLLM binds its kernel overrides process-wide at each engine start (module docstring of patches), so
    live decoders with and without a workaround cannot share a process."""

    def process_global(d) -> tuple:
        return tuple(w for w in patches.workarounds_of(d.options["workaround"]) if w in patches.PROCESS_GLOBAL)

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

    reported_metrics = reported_metrics  # its counters (docs/adapters.md); None for ``plain``

    def __init__(self, target, draft, method: str, **options):
        self.options = method_options(method, options)
        spec = METHODS[method]
        check_draft_family(draft)
        self.method, self.spec = method, spec
        self.target_path = model_path(target, "target")
        self.draft_path = None
        if spec.loads_draft:
            self.draft_path = (
                str(spec.draft_path(target, draft, self.options)) if spec.draft_path else model_path(draft, "draft")
            )
        self.vocab_size = int(target.vocab.size)
        self.vocab = target.vocab
        caps = frozenset(spec.capabilities) | ({"text-grammar"} if self.options["structured_outputs"] else frozenset())
        self.capabilities = caps if self.options["declare_seed"] else caps - {"seed"}  # configs: finding 3
        self.fixed_gamma = self._speculative  # one engine per γ (docs/adapters.md); plain ignores γ
        # calls of thousands from the first (protocol.call_size_of): 2,009 requests/s in calls of 4,096 against
        # 13.4 ms a call of one (benchmarks/vllm_threads.py, draft_model, 1 thread)
        self.call_size = (4096, 8192)
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
        self._state = configs.new_state()  # the configurations' evidence (engine_info["state"])
        self._flagged: dict = {"padded": set(), "preempted": set(), "short": set()}  # ids: configs.record_*
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
            "version": patches.vllm_version(),
            "requested": requested,
            "effective": dict(self._effective),
            "state": dict(self._state),
        }

    def _engine(self, gamma: int) -> object:
        key = (id(self), gamma if self._speculative else 0)
        llm = LIVE.get(key)
        if llm is not None:
            LIVE.move_to_end(key)
            return llm
        # first: a configuration the method refuses (mtp without MTP layers, a γ its layers cannot serve) is refused
        # before a live engine is shut down or vLLM is imported
        spec = self.speculative_config(key[1])
        while len(LIVE) >= max_engines():
            shutdown(LIVE.popitem(last=False)[1])
        for name, value in ENV.items():
            os.environ.setdefault(name, value)
        from vllm import LLM

        started = time.perf_counter()
        extra = {"per_request_spec_decode_metrics": "detailed"} if spec else {}
        patches.bind(self.options["workaround"])  # the override is bound when the engine starts
        set_threads(self.options["threads"])
        budget = self.options["max_num_batched_tokens"]
        for option in ("enable_prefix_caching", "num_gpu_blocks_override"):  # configs: None is vLLM's default
            if self.options[option] is not None:
                extra[option] = self.options[option]
        with HideLlvmliteLib():
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
            configs.count_partial_prefills(llm, self._state)
        if spec is not None:
            configs.record_scheduled_drafts(llm, self._state, self._flagged)
            configs.record_preempted(llm, self._flagged["preempted"])
        if self.options["structured_outputs"]:
            configs.count_grammar_cuts(llm, self._state)
        set_threads(self.options["threads"])  # again: the engine may have imported numba (ngram)
        if spec is not None:  # stop-metrics, grammar-cut-drafts
            patches.attach_engine_workarounds(llm, self.options["workaround"])
        self.engine_start_s.append(time.perf_counter() - started)
        self._effective[str(key[1])] = effective_config(llm, self.options)
        metrics = llm.get_metrics()
        self._marks[key] = read_counters(llm, metrics) if spec is not None else {}
        self._preempted[key] = configs.preemptions(metrics)
        LIVE[key] = llm
        return llm

    def __call__(self, requests: Sequence[Request]) -> list[Completion]:
        if self._closed:
            raise InvalidArgument("this VllmDecoder was closed; make a new one with the factory.")
        requests = list(requests)
        for request in requests:
            check_request(request, self.method, self.options["structured_outputs"])
        groups: dict = {}
        for i, request in enumerate(requests):
            groups.setdefault(request.num_draft_tokens if self._speculative else 0, []).append(i)
        out: list = [None] * len(requests)
        self.last_counters = {}
        live = [gamma for gamma in groups if (id(self), gamma) in LIVE]  # the live engine's γ first: one restart less
        for gamma, indices in sorted(groups.items(), key=lambda item: item[0] not in live):
            for i, done in zip(indices, self._generate(gamma, [requests[i] for i in indices])):
                out[i] = done
        return out

    def _generate(self, gamma: int, requests: list) -> list:
        llm = self._engine(gamma)
        if (
            self._speculative and self.spec.before_generate is not None
        ):  # suffix: empty its cache (suffix_decoding.reset_cache)
            self.spec.before_generate(llm, self.options)
        groups = configs.packed(requests) if self.options["parallel_n"] else [[i] for i in range(len(requests))]
        prompts = [{"prompt_token_ids": list(requests[g[0]].prompt)} for g in groups]
        params = [vllm_params(requests[g[0]], self.vocab_size, n=len(g)) for g in groups]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        key = (id(self), gamma if self._speculative else 0)
        if self._speculative or self.options["num_gpu_blocks_override"] is not None:  # one read of the metrics
            metrics = llm.get_metrics()
            before, self._preempted[key] = self._preempted[key], configs.preemptions(metrics)
            self._state["preemptions"] += self._preempted[key] - before
        if self._speculative:
            before, self._marks[key] = self._marks[key], read_counters(llm, metrics)
            delta = counter_delta(before, self._marks[key])
            add_counters(self.engine_counters, delta)
            add_counters(self.last_counters, delta)
        if len(outputs) != len(groups):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(groups)} requests")
        configs.count_outputs(self._state, outputs)
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
        for key in [k for k in LIVE if k[0] == id(self)]:
            shutdown(LIVE.pop(key))

    def __del__(self):
        with contextlib.suppress(Exception):  # never raise from a finaliser
            self.close()
