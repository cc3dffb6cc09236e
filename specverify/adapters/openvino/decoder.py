"""OpenVINO GenAI as a specverify decoder (``OpenvinoDecoder``): ``LLMPipeline`` one request per ``generate()`` call,
or the ``ContinuousBatchingPipeline`` a whole call's requests in one ``generate()``; token ids in (``ov.Tensor``),
token ids out (``EncodedResults.tokens`` / ``EncodedGenerationResult.m_generation_ids``).

Methods (``METHODS``): ``plain`` (``LLMPipeline`` on the target, speculation off: the stateful pipeline, the
control), ``draft_model`` (``LLMPipeline(draft_model=...)``, ``num_assistant_tokens`` = γ), ``draft_model_confidence``
(the same with ``assistant_confidence_threshold`` 0.4 instead of a fixed γ), ``prompt_lookup`` (``LLMPipeline(
prompt_lookup=True)``, ``max_ngram_size`` 2, ``num_assistant_tokens`` = γ), ``cb_plain`` and ``cb_draft_model`` (the
continuous-batching pipeline without and with the draft: a call's requests batched, each with its own
``GenerationConfig`` and ``rng_seed``). The speculative ``LLMPipeline`` paths run on the continuous-batching
implementation too; ``prefix_caching`` (``SchedulerConfig.enable_prefix_caching``, the engine's default True) and
``max_num_batched_tokens`` (``SchedulerConfig.max_num_batched_tokens``, the tokens one step may schedule; None keeps
the engine's 256) apply to every method but ``plain``; ``precision`` (``mapping.properties``) to every model. A budget
no call reaches (``CB_CHUNK`` requests of prompt + 1 + γ tokens) keeps the engine from cutting a prompt between steps,
which with a draft leaves a draft token unchecked (docs/findings/openvino.md, finding 3).

**Where a completion ends** (``specverify.adapters.boundary.finish``). The engine honours EOS (it returns the EOS it
stops on) and ``max_new_tokens``; stop strings are the adapter's (``cuts={"stop"}``): the engine's own
``stop_strings`` match on its detokenizer's text, which does not round-trip the toy vocabulary (``export``), so they
are not passed, the engine runs to EOS or ``max_tokens`` and the adapter cuts after the token that completes one
(exact: the engine was never asked to stop there). Stop strings through the engine's detokenizer are not covered.

**Declared**: temperature, max_tokens, top_k, top_p, min_p, min_tokens, stop, seed (+ ``batch`` for the
continuous-batching methods). Not declared: the penalties, ``bad_token_ids``, ``grammar``, ``logits_processors``,
``ignore_eos``, ``stream``, and ``accepted``: the engine reports acceptance only as totals per ``generate()``
(``SDPerModelsPerfMetrics.get_num_accepted_tokens``), never per round, so the totals are the decoder's
``reported_metrics()`` and the certificate says "speculation not observed".
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from specverify.adapters.boundary.finish import finish
from specverify.adapters.openvino.export import model_dir, openvino_genai_version
from specverify.adapters.openvino.mapping import check_request, engine_seed, generation_fields, properties
from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request

__all__ = ["OpenvinoDecoder", "METHODS", "CAPABILITIES", "import_openvino_genai", "CB_CHUNK"]

METHODS = ("plain", "draft_model", "draft_model_confidence", "prompt_lookup", "cb_plain", "cb_draft_model")
_BASE = frozenset({"temperature", "max_tokens", "top_k", "top_p", "min_p", "min_tokens", "stop", "seed"})
CAPABILITIES = {m: _BASE | ({"batch"} if m.startswith("cb_") else frozenset()) for m in METHODS}
CB_CHUNK = 512  # requests per continuous-batching generate(): a call of 8192 is sent in chunks
_SPECULATIVE = ("draft_model", "draft_model_confidence", "prompt_lookup", "cb_draft_model")


def import_openvino_genai() -> tuple:
    """(``openvino``, ``openvino_genai``), or a ``RuntimeError`` saying how to install them (a set-up failure)."""
    try:
        import openvino
        import openvino_genai
    except ImportError as exc:
        raise RuntimeError(
            f"openvino_genai cannot be imported ({exc}): pip install openvino-genai in a venv of its own, as "
            ".ci/openvino does."
        ) from exc
    return openvino, openvino_genai


class OpenvinoDecoder:
    """OpenVINO GenAI for one model pair and ``method`` in ``METHODS`` (module docstring)."""

    def __init__(
        self,
        target,
        draft,
        method: str,
        *,
        precision: str = "f32",
        prefix_caching: bool = True,
        max_num_batched_tokens: Optional[int] = None,
    ):
        if method not in METHODS:
            raise InvalidArgument(f"method={method!r} must be one of {METHODS!r}.")
        check(
            isinstance(prefix_caching, bool),
            f"prefix_caching={prefix_caching!r} must be a bool, e.g. --engine-option prefix_caching=false.",
        )
        check(
            max_num_batched_tokens is None
            or (isinstance(max_num_batched_tokens, int) and not isinstance(max_num_batched_tokens, bool))
            and max_num_batched_tokens >= 1,
            f"max_num_batched_tokens={max_num_batched_tokens!r} must be None (the engine's 256) or an int >= 1, e.g. "
            "--engine-option max_num_batched_tokens=1048576.",
        )
        props = properties(precision)
        self.ov, self.og = import_openvino_genai()
        self.method, self.vocab, self.precision, self.prefix_caching = method, target.vocab, precision, prefix_caching
        self.max_num_batched_tokens = max_num_batched_tokens
        if method in ("draft_model", "draft_model_confidence", "cb_draft_model"):
            check(draft.vocab.size == target.vocab.size, f"draft vocab {draft.vocab.size!r} != target's.")
        self.capabilities = frozenset(CAPABILITIES[method])
        self.fixed_gamma = False
        self.pipe = self._pipeline(target, draft, props)
        self.rng = np.random.default_rng()
        self.counters = {"requests": 0, "generate_calls": 0, "num_accepted_tokens": 0}

    def _pipeline(self, target, draft, props: dict):
        og, path = self.og, str(model_dir(target))
        extra = dict(props)
        if self.method != "plain":
            extra["scheduler_config"] = self._scheduler()
        if self.method in ("draft_model", "draft_model_confidence", "cb_draft_model"):
            extra["draft_model"] = og.draft_model(str(model_dir(draft)), "CPU", **props)
        if self.method == "prompt_lookup":
            extra["prompt_lookup"] = True
        try:
            if self.method.startswith("cb_"):
                scheduler = extra.pop("scheduler_config")
                return og.ContinuousBatchingPipeline(path, scheduler, "CPU", extra)
            return og.LLMPipeline(path, "CPU", **extra)
        except Exception as exc:
            raise RuntimeError(f"openvino_genai could not load {path!r} for {self.method!r}: {exc}") from exc

    def _scheduler(self):
        config = self.og.SchedulerConfig()
        config.enable_prefix_caching = self.prefix_caching
        config.cache_size = 1  # GB of KV cache: the checkpoints are tiny
        if self.max_num_batched_tokens is not None:
            config.max_num_batched_tokens = self.max_num_batched_tokens
        return config

    def __repr__(self) -> str:
        return f"OpenvinoDecoder(method={self.method!r}, precision={self.precision!r})"

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: the method, precision, prefix caching and step budget asked for (the budget in effect:
        the engine's default where none was asked; None for ``plain``, which has no scheduler), and the engine's
        counts."""
        requested = {"method": self.method, "precision": self.precision, "prefix_caching": self.prefix_caching}
        requested["properties"] = properties(self.precision)
        budget = None if self.method == "plain" else int(self._scheduler().max_num_batched_tokens)
        requested["max_num_batched_tokens"] = budget
        return {
            "name": "openvino-genai",
            "version": openvino_genai_version(),
            "requested": requested,
            "state": dict(self.counters),
        }

    def reported_metrics(self) -> Optional[dict]:
        """The engine's accepted-draft totals (``get_num_accepted_tokens`` per ``generate()``, summed); None
        without speculation or where the engine has no such metric (the continuous-batching pipeline's results)."""
        if self.method not in ("draft_model", "draft_model_confidence"):  # prompt lookup's results carry none
            return None
        return {"num_accepted_tokens": self.counters["num_accepted_tokens"]}

    def _config(self, request: Request):
        check_request(request, self.capabilities, self.method)
        fields = generation_fields(
            request, self.method, int(self.vocab.eos_token_id), engine_seed(request.seed, self.rng)
        )
        config = self.og.GenerationConfig()
        for name, value in fields.items():
            setattr(config, name, value)
        return config

    def _ids(self, request: Request):
        return self.ov.Tensor(np.array([request.prompt], dtype=np.int64))

    def __call__(self, requests: Sequence[Request]) -> list:
        if self.method.startswith("cb_"):
            out = []
            for start in range(0, len(requests), CB_CHUNK):
                out += self._batch(requests[start : start + CB_CHUNK])
            return out
        return [self._one(r) for r in requests]

    def _one(self, request: Request) -> Completion:
        config = self._config(request)
        try:
            result = self.pipe.generate(self._ids(request), config)
        except Exception as exc:
            raise RuntimeError(f"openvino_genai's LLMPipeline.generate failed on {request!r}: {exc}") from exc
        self.counters["requests"] += 1
        self.counters["generate_calls"] += 1
        metrics = getattr(result, "extended_perf_metrics", None)  # None for prompt lookup
        if self.method in _SPECULATIVE and metrics is not None:
            self.counters["num_accepted_tokens"] += int(metrics.get_num_accepted_tokens())
        return self._completion(request, [int(t) for t in result.tokens[0]], str(result.finish_reasons[0]))

    def _batch(self, requests: Sequence[Request]) -> list:
        configs = [self._config(r) for r in requests]
        try:
            results = self.pipe.generate([self._ids(r) for r in requests], configs)
        except Exception as exc:
            raise RuntimeError(f"openvino_genai's ContinuousBatchingPipeline.generate failed: {exc}") from exc
        check(len(results) == len(requests), f"{len(results)} results for {len(requests)} requests")
        self.counters["requests"] += len(requests)
        self.counters["generate_calls"] += 1
        out = []
        for request, result in zip(requests, results):
            reason = str(result.finish_reasons[0]) if getattr(result, "finish_reasons", None) else ""
            out.append(self._completion(request, [int(t) for t in result.m_generation_ids[0]], reason))
        return out

    def _completion(self, request: Request, tokens: list, reason: str) -> Completion:
        done = finish(
            tokens,
            self.vocab,
            request.params,
            engine="openvino_genai",
            cuts=frozenset({"stop"}),
            detail=f"finish reason {reason}",
        )
        return Completion(done.tokens, done.finish_reason)
