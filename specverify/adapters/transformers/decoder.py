"""transformers' ``generate()`` as a specverify decoder (``TransformersDecoder``, one mode per factory: assisted
generation, prompt lookup, plain sampling), one request per ``generate`` call; the models it loads are the package
docstring's.

**How SamplingParams map, and what is declared.** transformers applies, in this order (generation/utils.py:1416,
``_get_logits_processor``): repetition penalty, bad words, min length / min new tokens, suppress tokens, then, when
sampling, temperature, top-k, top-p, min-p. The canonical order puts the masks before the penalty; the two commute,
because a mask writes -inf and the CTRL penalty maps -inf to -inf. So these are declared:

- ``temperature``: 0 is ``do_sample=False`` (``argmax``: the lowest index wins a tie, as canonically); otherwise
  ``TemperatureLogitsWarper`` divides the penalised logits, as canonically.
- ``repetition_penalty``: ``RepetitionPenaltyLogitsProcessor`` multiplies negative and divides other logits of every
  token in ``input_ids`` (prompt + generated), which is canonical (a logit of 0 stays 0 either way).
- ``min_p``: ``MinPLogitsWarper`` keeps probabilities >= ``min_p`` × the largest, after top-k/top-p, as canonically
  (the ratio to the maximum does not change under renormalisation).
- ``bad_token_ids``: non-EOS ids become ``bad_words_ids=[[id], ...]``, a static mask. ``NoBadWordsLogitsProcessor``
  silently drops EOS from ``bad_words_ids`` (logits_process.py, ``NoBadWordsLogitsProcessor.__init__``), so a bad
  EOS goes to ``suppress_tokens`` instead. Ids outside the vocabulary are ignored (canonical; transformers raises).
- ``min_tokens``: ``min_new_tokens`` (EOS masked while fewer tokens were generated, counted from the prompt).
- ``max_tokens``: ``max_new_tokens``. ``stop``: matched by the adapter, which cuts the output at the token that
  completes the first stop string (docs/adapters.md allows this; it is exact, as the tokens after it do not change
  the law of those before). transformers' ``stop_strings`` cannot be used: ``StopStringCriteria`` tokenises the
  probe text "abcdef" (stopping_criteria.py, ``clean_tokenizer_vocab``), which the checkpoints' word-level
  tokenizer cannot encode ("WordLevel error: Missing [UNK] token"). It also only looks at the end of the sequence,
  which assisted generation checks once per round.
- ``logits_processors``: one ``LogitsProcessor`` in ``generate(logits_processor=...)`` runs them in order on float64
  scores, each row's history its ``input_ids`` row. transformers puts a caller's processors after its own (the
  penalty and the masks) and before temperature and the cuts (``_get_logits_processor``, utils.py:1600 then 1619),
  the canonical place; assisted generation calls the list at every verified position with the prefix up to it
  (utils.py:4111) and hands it to the assistant, whose drafts therefore see it too.
- ``seed`` (per request ``torch.manual_seed`` around ``generate``; every draw is from torch's global generator) and
  ``accepted`` (assisted and prompt lookup; the private hook is described in ``hooks``).

**Unset fields** (docs/adapters.md) stay ``None`` in the ``GenerationConfig``: ``generate()`` fills them from the
model's ``generation_config`` and then transformers' global defaults (temperature 1.0, top-k 50, top-p 1.0,
repetition penalty 1.0: utils.py:2114), so transformers' handling of a missing field is what runs. Top-k 50 keeps
every token of the toy and checkpoint vocabularies (≤ 16 ids); on a user's pair both paths share it. ``do_sample``
is not a field: it is sent as True unless the temperature is set to 0, since transformers' own default is greedy.

Not declared: ``top_k`` (``TopKLogitsWarper`` keeps every token tied with the k-th, canonical top-k keeps exactly k,
lower index first), ``top_p`` (``TopPLogitsWarper`` sorts ascending with an unstable sort, so which of two tied
tokens at the cut survives differs from the canonical stable order), ``frequency_penalty`` / ``presence_penalty``
(transformers has none), ``ignore_eos``, ``grammar``, ``stop_after_min_tokens``, ``stream`` and ``batch``. top_k
and top_p are still passed through when a caller sets them, with those tie semantics.

**Where a completion ends** (``specverify.adapters.boundary.finish``, the one finish rule of every adapter).
transformers is asked to honour EOS (``eos_token_id``) and ``max_tokens`` (``max_new_tokens``); the adapter implements
stop strings only, and cuts only there. Tokens after an EOS or past ``max_new_tokens`` are returned as ``generate()``
emitted them, so the certifier reports them (``invalid``); tokens that end before any end raise ``EngineStoppedEarly``.
``accepted`` counts the drafts among the tokens returned.

**Prefill** (``decoder.prefill_tokens``, docs/adapters.md): 0 for ``assisted`` and ``prompt_lookup``. The first
round fetches candidates from the prompt (``get_candidates``, generation/utils.py:4051) before the target's first
forward (:4091, ``is_first_iteration``), which verifies them: every token comes from a verification round.

Unseeded requests draw a fresh 63-bit seed from the decoder's own numpy generator. Engine exceptions propagate.

**Caches and engine configurations** (option ``cache``; docs/adapters.md, "Engine configurations"). ``generate()``
builds the target's cache per call from ``GenerationConfig.cache_implementation``: unset, a ``DynamicCache``
(generation/utils.py:2324-2325; rollback ``DynamicLayer.crop`` slices the tensors, cache_utils.py:164-181);
``"static"``, a ``StaticCache`` sized to the call's ``max_length`` (utils.py:2289-2309; rollback
``StaticLayer.crop`` only moves ``cumulative_length`` back, so the next ``update`` overwrites the stale entries in
place, cache_utils.py:510-521). The assistant's cache is a ``DynamicCache`` either way: the assisted candidate
generator clears ``cache_implementation`` on the assistant's copy of the config
(candidate_generator.py:182-184). Each factory declares two configurations: ``dynamic-cache`` (``cache="dynamic"``:
``cache_implementation`` left unset, exactly the call made without any configuration, so it is the default) and
``static-cache`` (``cache="static"``). The evidence is the class of the cache ``generate()`` returns
(``return_dict_in_generate=True``, ``outputs.cache``), counted per call in ``engine_info["state"]``:
``dynamic_cache_calls``, ``static_cache_calls`` (``other_cache_calls`` for any other class); ``sample()``'s workers
count theirs and hand them back (``draw_pool``). A configuration is reached when at least one call returned its
class; the table in docs/findings/transformers.md shows both counts, so a call that fell back to the other class
shows there.

**The fast path** (docs/adapters.md): ``sample(request, n, start)`` runs draw i of a seeded request as the request
with seed ``draw_seeds(seed, n, start)[i]`` (an unseeded one: a fresh seed each), one ``generate`` per draw, so a
draw depends on (seed, i) only and every draw really is seeded on its own: ``torch.manual_seed`` before each
``generate``, whose sampling (the assistant's drafts included) draws from that generator only. The draws of a call
are split between ``workers`` worker processes (``specverify.adapters.boundary.draw_pool``; default 2 where two cores
are available, 0 = in this process), each holding its own copy of the models; a draw's law does not depend on which
worker ran it, since each runs alone under its own seed. ``__call__`` (greedy scenarios, a user's batch) stays in this
process. ``close()`` drops this decoder's copies in the workers. Two workers pay only where the second core is free:
1.86× the draws/s of ``workers=0`` there, 0.85× with another job on it (``benchmarks/transformers_sample_rate.py``,
docs/findings/transformers.md "Times").
"""

from __future__ import annotations

import numpy as np

from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request, SampleCounts

__all__ = ["TransformersDecoder", "MODES", "CACHES"]

MODES = ("assisted", "prompt_lookup", "plain", "early_exit", "universal", "mtp", "dflash")
ASSISTANT_MODES = ("assisted", "universal", "dflash")  # the modes whose draft is a second model (``assistant_model``)
# the target's cache: cache_implementation unset, or "static" (module docstring); "static-headroom": a StaticCache
# γ + 1 positions longer than generate() sizes it (max_cache_len), the workaround of finding 7 in
# docs/findings/transformers.md (generators that draft past the length cap)
CACHES = ("dynamic", "static", "static-headroom")
_STATE_KEYS = {"DynamicCache": "dynamic_cache_calls", "StaticCache": "static_cache_calls"}
_BASE_CAPABILITIES = frozenset(
    {
        "temperature",
        "max_tokens",
        "repetition_penalty",
        "min_p",
        "bad_token_ids",
        "min_tokens",
        "stop",
        "seed",
        "logits_processors",
    }
)


def _load(model, role: str) -> object:
    """The transformers model for a CheckpointModel or a toy model (eval mode, float32)."""
    import torch

    from specverify.oracles.checkpoint_tokenizer import quiet_transformers
    from specverify.oracles.models import ToyModel

    if isinstance(model, ToyModel):
        from specverify.adapters.transformers.toy_model import wrap_toy

        return wrap_toy(model)
    path = getattr(model, "path", None)
    if path is None:
        raise InvalidArgument(
            f"{role}={model!r} must be a CheckpointModel (with .path) or a ToyModel; build one with "
            "CheckpointPairSpec(...).build() or ToyPairSpec(...).build()."
        )
    from transformers import AutoModelForCausalLM  # Llama for the checkpoint family; any causal LM for --target

    try:
        with quiet_transformers():
            hf = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager")
    except Exception as exc:
        raise RuntimeError(f"transformers could not load the {role} checkpoint at {str(path)!r}: {exc}") from exc
    return hf.eval()


class TransformersDecoder:
    """One transformers model (and assistant) answering requests one ``generate`` call at a time."""

    load_model = staticmethod(_load)  # for the modes' set-up (generators), which does not import this module

    def __init__(
        self,
        target,
        draft,
        mode: str,
        *,
        workers: int | None = None,
        cache: str = "dynamic",
        exit_layer: int = 0,
        assistant_cache: str = "reuse",
        translator: str = "shipped",
    ):
        from collections import Counter

        from specverify.adapters.boundary import draw_pool
        from specverify.adapters.transformers import generators, hooks

        if mode not in MODES:
            raise InvalidArgument(f"mode={mode!r} is not a mode; expected one of {MODES!r}.")
        check(
            cache in CACHES,
            f"cache={cache!r} must be one of {CACHES!r} (the target's cache in generate(): 'dynamic' leaves "
            "cache_implementation unset, 'static' asks for a StaticCache); e.g. --engine-option cache=static.",
        )
        workers = draw_pool.default_workers() if workers is None else workers
        check(
            isinstance(workers, int) and not isinstance(workers, bool) and workers >= 0,
            f"workers={workers!r} must be an int >= 0 (worker processes for sample(); 0 draws in this process).",
        )
        check(
            isinstance(exit_layer, int) and not isinstance(exit_layer, bool) and exit_layer >= 0,
            f"exit_layer={exit_layer!r} must be an int >= 0 (early_exit: the target layers its drafts run); "
            "e.g. --engine-option exit_layer=0.",
        )
        check(
            assistant_cache in ("reuse", "fresh"),
            f"assistant_cache={assistant_cache!r} must be 'reuse' (as shipped) or 'fresh' (universal: the opt-in "
            "workaround that drops the greedy different-tokenizer assistant's cache every round; generators.py); "
            "e.g. --engine-option assistant_cache=fresh.",
        )
        self.mode, self.workers, self.cache, self.exit_layer = mode, workers, cache, exit_layer
        check(
            translator in ("shipped", "id-order"),
            f"translator={translator!r} must be 'shipped' or 'id-order' (universal: the opt-in local patch of USD's "
            "logit scatter; generators.py); e.g. --engine-option translator=id-order.",
        )
        self.assistant_cache, self.translator = assistant_cache, translator
        self.state = Counter()  # engine states reached: generate calls by the class of the cache they returned
        self._untaken = Counter()  # ... since the last take_state() (a sample() worker hands these to its parent)
        self.classes: set = set()  # the cache classes this process's calls returned
        self.version = hooks.check_transformers_version()
        self.generator = None  # the mode's own set-up (generators.py), for the modes beyond assisted / prompt lookup
        if mode in generators.OWN_SETUP:
            self.generator = generators.OWN_SETUP[mode](target, draft, self)
            self.model, self.assistant = self.generator.model, self.generator.assistant
        else:
            self.model = _load(target, "target")
            self.assistant = _load(draft, "draft") if mode == "assisted" else None
        self.vocab = target.vocab
        self.eos = int(self.vocab.eos_token_id)
        if mode == "assisted" and draft.vocab.size != self.vocab.size:
            raise InvalidArgument(
                f"draft vocab size {draft.vocab.size!r} differs from the target's {self.vocab.size!r}; "
                "assisted generation here assumes one shared vocabulary."
            )
        self.rng = np.random.default_rng()  # fresh entropy: unseeded requests are independent
        caps = set(_BASE_CAPABILITIES)
        if mode != "plain":
            caps.add("accepted")
        self.capabilities = frozenset(caps)
        # what the drafts are (specverify.protocol.draft_law_of): not modelled by the acceptance oracle, which
        # drafts γ tokens every round. The assistant stops drafting once its sampled token's own probability is
        # below assistant_confidence_threshold (ConfidenceCriteria, generation/utils.py:1692-1699 and
        # stopping_criteria.py:609-613; 0.4 by default, configuration_utils.py:640) and drafts fewer near the
        # length cap (candidate_generator.py:288); prompt lookup drafts what it finds
        self.draft_law = "unmodelled"
        if mode in generators.PREFILL_ROUND:
            self.prefill_tokens = 1  # the prompt's own forward commits one token with no candidate (generators)
        elif mode != "plain":
            self.prefill_tokens = 0  # the prefill is the first verification round (module docstring)
        self._worker_args = (
            target,
            draft,
            mode,
            cache,
            exit_layer,
            assistant_cache,
        )  # what a sample() worker builds its copy from
        self._key = object()  # this decoder's key in the shared pool of workers

    def __repr__(self) -> str:
        return (
            f"TransformersDecoder(mode={self.mode!r}, vocab_size={self.vocab.size}, workers={self.workers}, "
            f"cache={self.cache!r})"
        )

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: transformers' version, the cache asked for, and per generate() call (sample()'s
        workers included) the class of the cache it returned (module docstring, caches)."""
        return {
            "name": "transformers",
            "version": self.version,
            "requested": {"mode": self.mode, "cache": self.cache, **self._requested_extra()},
            "effective": {"target_cache_classes": sorted(self.classes), **self._effective_extra()},
            "state": {
                key: int(self.state.get(key, 0))
                for key in (
                    *_STATE_KEYS.values(),
                    "other_cache_calls",
                    *sorted(k for k in self.state if k.startswith("calls_")),
                )
            },
        }

    def _requested_extra(self) -> dict:
        if self.mode == "early_exit":
            return {"exit_layer": self.exit_layer}
        if self.mode == "universal":
            return {"assistant_cache": self.assistant_cache, "translator": self.translator}
        return {}

    def _effective_extra(self) -> dict:
        return self.generator.effective() if self.generator is not None else {}

    def take_state(self) -> dict:
        """The state counts since the last take (``draw_pool``: a worker's decoder hands them to its parent)."""
        out, self._untaken = dict(self._untaken), type(self._untaken)()
        return out

    def _count_cache(self, cache) -> None:
        self.classes.add(type(cache).__name__)
        key = _STATE_KEYS.get(type(cache).__name__, "other_cache_calls")
        self.state[key] += 1
        self._untaken[key] += 1

    def __call__(self, requests) -> list:
        return [self.generate(request) for request in requests]

    def sample(self, request: Request, n: int, start: int = 0) -> SampleCounts:
        """Counts of the outcomes of draws ``start`` .. ``start + n - 1`` of ``request`` (one ``generate`` per draw,
        each under its own seed: module docstring, the fast path), with the first round's and every round's
        accepted drafts (not for ``plain``)."""
        from specverify.adapters.boundary import draw_pool
        from specverify.keyed import draw_seeds

        check(isinstance(request, Request), f"request={request!r} must be a specverify Request.")
        check(isinstance(n, int) and not isinstance(n, bool) and n >= 1, f"n={n!r} must be an int >= 1.")
        if request.seed is None:
            seeds = self.rng.integers(0, 2**63 - 1, size=n).tolist()  # fresh: unseeded draws are independent
        else:
            seeds = draw_seeds(request.seed, n, start).tolist()
        if self.workers:
            pool = draw_pool.shared_pool(self.workers)
            outcomes, first, rounds, unrounded = pool.counts(
                self._key, _worker_decoder, self._worker_args, request, seeds, state=self.state
            )
        else:
            outcomes, first, rounds, unrounded = draw_pool.count_draws(self.generate, request, seeds)
        if unrounded:  # draws with no round (mtp, dflash: one token from the prefill, then done): first-round
            first = rounds = None  # counts would not cover all n draws, so acceptance is not reported for the call
        return SampleCounts(outcomes=outcomes, accepted=first, rounds=rounds)

    def close(self) -> None:
        """Drop this decoder's copies in the sample() workers (the workers stay up for the next decoder)."""
        from specverify.adapters.boundary import draw_pool

        if self.workers:
            draw_pool.shared_pool(self.workers).forget(self._key)

    def generation_kwargs(self, request: Request) -> dict:
        """The ``generate()`` keyword arguments for ``request`` (besides ``input_ids``)."""
        from transformers import GenerationConfig

        p = request.params
        sampling = p.temperature > 0  # do_sample is no field: transformers' default (False) would be greedy
        sent = p.set_fields if sampling else p.set_fields - {"temperature", "top_k", "top_p", "min_p"}
        bad = [t for t in p.bad_token_ids if t < self.vocab.size]
        config = GenerationConfig(
            do_sample=sampling,
            temperature=float(p.temperature) if "temperature" in sent else None,  # None: filled by generate()
            top_k=int(p.top_k) if "top_k" in sent else None,
            top_p=float(p.top_p) if "top_p" in sent else None,
            min_p=float(p.min_p) if "min_p" in sent and p.min_p > 0 else None,
            repetition_penalty=float(p.repetition_penalty) if "repetition_penalty" in sent else None,
            bad_words_ids=[[t] for t in bad if t != self.eos] or None,
            suppress_tokens=[self.eos] if self.eos in bad else None,
            min_new_tokens=int(p.min_tokens) if "min_tokens" in sent else None,
            max_new_tokens=int(p.max_tokens),
            eos_token_id=self.eos,
            pad_token_id=self.eos,
            use_cache=True,
            cache_implementation="static" if self.cache.startswith("static") else None,  # None: a DynamicCache
            return_dict_in_generate=True,  # outputs.cache: the cache the call used (engine_info evidence)
        )
        if self.cache == "static-headroom":  # generate() sizes it max_length - 1 (generation/utils.py:2966)
            config.max_cache_len = len(request.prompt) + int(p.max_tokens) + int(request.num_draft_tokens)
        kwargs = {"generation_config": config}
        if p.logits_processors:
            kwargs["logits_processor"] = _processor_list(p.logits_processors)
        if self.mode == "assisted":
            kwargs["assistant_model"] = self.assistant
        elif self.mode == "prompt_lookup":
            config.prompt_lookup_num_tokens = int(request.num_draft_tokens)
        elif self.generator is not None:
            self.generator.configure(config, kwargs, request)
        return kwargs

    def generate(self, request: Request) -> Completion:
        """One request through ``generate()``; tokens by the finish rule (cut at a stop string), ``accepted``."""
        import torch

        from specverify.adapters.transformers import generators, hooks
        from specverify.oracles.checkpoint_tokenizer import quiet_transformers

        seed = request.seed if request.seed is not None else int(self.rng.integers(0, 2**63 - 1))
        kwargs = self.generation_kwargs(request)
        if self.generator is not None:
            self.generator.before_call(request)
        elif self.assistant is not None:
            hooks.set_draft_length(self.assistant, request.num_draft_tokens)
        input_ids = torch.tensor([request.prompt], dtype=torch.long)
        with torch.no_grad(), quiet_transformers(), hooks.record_rounds(self.model) as log:
            torch.manual_seed(seed)
            out = self.model.generate(input_ids, **kwargs)
        self._count_cache(getattr(out, "cache", None))
        if self.generator is not None and log.generator is not None:  # the generator generate() built (state)
            self.state[f"calls_{log.generator}"] += 1
            self._untaken[f"calls_{log.generator}"] += 1
        generated = tuple(int(t) for t in out.sequences[0, len(request.prompt) :].tolist())
        tokens, reason = self._finish(generated, request.params)
        accepted = log.accepted(len(request.prompt), tokens) if self.mode != "plain" else None
        if log.generator in generators.UNBOUNDED_DRAFTS:  # γ does not bound its drafts (finding 12): not reported
            accepted = None
        if accepted and self.prefill_tokens == 1:  # the prefill's empty round is no verification round
            accepted = accepted[1:]
        return Completion(tokens, reason, accepted=accepted)

    def _finish(self, generated: tuple, params) -> tuple:
        """``(tokens, finish_reason)`` by the adapters' finish rule: cut only at a stop string (the adapter's own
        end); tokens after EOS or ``max_new_tokens`` are kept for the certifier to report."""
        from specverify.adapters.boundary.finish import finish

        done = finish(generated, self.vocab, params, engine="transformers' generate()", cuts={"stop"})
        return done.tokens, done.finish_reason


_WRAPPER: list = []  # the LogitsProcessor subclass, made on first use (transformers is imported lazily)


def _processor_list(processors: tuple) -> object:
    """A ``LogitsProcessorList`` running the request's ``logits_processors`` in order on float64 scores, each row's
    history being its ``input_ids`` row (prompt + generated; in assisted generation, + the drafts before that
    position, generation/utils.py:4111)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    if not _WRAPPER:

        class RequestProcessors(LogitsProcessor):
            def __init__(self, processors):
                self.processors = tuple(processors)

            def __call__(self, input_ids, scores):  # [B, L], [B, V] -> [B, V]
                histories = tuple(tuple(row) for row in input_ids.tolist())
                out = scores.to(torch.float64)
                for processor in self.processors:
                    out = processor(histories, out.clone())
                return out.to(scores.dtype)

        _WRAPPER.append(RequestProcessors)
    return LogitsProcessorList([_WRAPPER[0](processors)])


def _worker_decoder(
    target,
    draft,
    mode: str,
    cache: str = "dynamic",
    exit_layer: int = 0,
    assistant_cache: str = "reuse",
    translator: str = "shipped",
) -> TransformersDecoder:
    """The decoder a ``sample()`` worker process holds (``draw_pool``): the same models, drawing in-process."""
    return TransformersDecoder(
        target,
        draft,
        mode,
        workers=0,
        cache=cache,
        exit_layer=exit_layer,
        assistant_cache=assistant_cache,
        translator=translator,
    )
