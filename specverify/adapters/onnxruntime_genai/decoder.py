"""ONNX Runtime GenAI's ``Generator`` as a specverify decoder (``GenaiDecoder``): one ``og.Generator`` per request,
token ids in (``append_tokens``), one token per ``generate_next_token()`` out (``get_next_tokens``), the engine's
counters read after each (``get_speculative_stats``).

Methods (``METHODS``): ``plain`` (the target alone; speculation off, the control), ``draft_model`` (the speculative
model type: ``model.draft`` in ``genai_config.json``, ``export.speculative_dir``; per request ``max_draft_tokens`` =
γ), ``draft_model_adaptive`` (the same with ``min_adaptive_k`` = 1: the engine picks the width of each round between
1 and 16 from its own acceptance; γ is ignored), ``ngram`` (the target alone with ``ngram_size`` = 2 and
``max_draft_tokens`` = γ: drafts looked up in the request's own history). ``cooldown=True`` adds the engine's
cool-down (one plain step after three rounds that accepted nothing) to the speculative methods.

**Where a completion ends** (``specverify.adapters.boundary.finish``). The engine honours EOS and ``max_length``
(prompt + ``max_tokens``); stop strings are the adapter's (``cuts={"stop"}``): it stops calling
``generate_next_token()`` after the token that completes one. The engine does not append the EOS it stops on to the
sequence (``get_sequence`` ends before it; ``get_next_tokens`` after the last step is the EOS), so the adapter
reads the tokens step by step from ``get_next_tokens`` and checks that the sequence is the prompt and those tokens
less a final EOS (anything else raises ``RuntimeError``: ``invalid``). A generator done before any end raises
``EngineStoppedEarly``.

**Declared**: temperature, max_tokens, top_k, top_p, stop, seed, plus ``accepted`` for ``draft_model`` and ``ngram``
(``draft_model_adaptive`` widens a round past the request's γ, up to 16, so its rounds are not γ-draft rounds).
Not declared: ``min_tokens`` (``min_length`` counts the prompt and the speculative path needs a turn already past its
minimum before it drafts), the penalties (the speculative path refuses ``repetition_penalty`` != 1 for drafts; the
engine has no frequency or presence penalty), ``min_p``, ``bad_token_ids``, ``grammar``, ``logits_processors``,
``ignore_eos``, ``batch`` (the speculative path takes one sequence per generator; the engine's continuous-batching
``Engine`` API is not adapted), ``stream``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from specverify.adapters.boundary.finish import Finisher, clip_accepted, finish
from specverify.adapters.onnxruntime_genai.export import genai_version, model_dir, speculative_dir
from specverify.adapters.onnxruntime_genai.mapping import RoundLog, check_request, reported, search_options
from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request

__all__ = ["GenaiDecoder", "METHODS", "CAPABILITIES", "import_genai"]

METHODS = ("plain", "draft_model", "draft_model_adaptive", "ngram")
_BASE = frozenset({"temperature", "max_tokens", "top_k", "top_p", "stop", "seed"})
# adaptive γ widens a round past the request's γ (up to 16: config.h, min_adaptive_k), so its rounds are not
# reported as rounds of γ drafts
CAPABILITIES = {m: _BASE | ({"accepted"} if m in ("draft_model", "ngram") else frozenset()) for m in METHODS}
_DRAFT_LAW = {"plain": "model", "draft_model": "model", "draft_model_adaptive": "unmodelled", "ngram": "unmodelled"}
_TOTALS = ("rounds", "draft_tokens_evaluated", "draft_tokens_accepted", "draft_tokens_proposed", "tokens_discarded")


def import_genai() -> object:
    """``onnxruntime_genai``, or a ``RuntimeError`` saying how to install it (a set-up failure)."""
    try:
        import onnxruntime_genai
    except ImportError as exc:
        raise RuntimeError(
            f"onnxruntime_genai cannot be imported ({exc}): pip install onnxruntime-genai onnx onnx-ir "
            "torch==2.13.0 transformers in a venv of its own, as .ci/onnxruntime_genai does."
        ) from exc
    return onnxruntime_genai


class GenaiDecoder:
    """ONNX Runtime GenAI for one model pair and ``method`` in ``METHODS`` (module docstring)."""

    def __init__(self, target, draft, method: str, *, cooldown: bool = False):
        if method not in METHODS:
            raise InvalidArgument(f"method={method!r} must be one of {METHODS!r}.")
        check(
            isinstance(cooldown, bool) and (not cooldown or method != "plain"),
            f"cooldown={cooldown!r} must be a bool, and True only with speculation (method={method!r}), e.g. "
            "--engine-option cooldown=true.",
        )
        og = import_genai()
        self.method, self.vocab, self.cooldown = method, target.vocab, cooldown
        if method.startswith("draft_model") and draft.vocab.size != target.vocab.size:
            raise InvalidArgument(f"draft vocab {draft.vocab.size!r} != target vocab {target.vocab.size!r}.")
        self.capabilities = frozenset(CAPABILITIES[method])
        self.draft_law = _DRAFT_LAW[method]
        if method != "plain":
            self.prefill_tokens = 0  # the first round drafts after the prompt and verifies with the prompt's tail
        folder = speculative_dir(target, draft) if method.startswith("draft_model") else model_dir(target)
        try:
            self.model = og.Model(str(folder))
        except Exception as exc:
            raise RuntimeError(f"onnxruntime_genai.Model could not load {str(folder)!r}: {exc}") from exc
        self.og, self.folder = og, folder
        self.totals = {k: 0 for k in _TOTALS}
        self.requests = 0

    def __repr__(self) -> str:
        return f"GenaiDecoder(method={self.method!r}, vocab_size={self.vocab.size})"

    def __call__(self, requests: Sequence[Request]) -> list:
        return [self.generate(r) for r in requests]

    def speculative_options(self, request: Request) -> dict:
        """``set_speculative_options`` keywords for ``request`` ({} for ``plain``)."""
        gamma = int(request.num_draft_tokens)
        out = {
            "plain": {},
            "draft_model": {"max_draft_tokens": gamma},
            "draft_model_adaptive": {"max_draft_tokens": gamma, "min_adaptive_k": 1},
            "ngram": {"max_draft_tokens": gamma, "ngram_size": 2},
        }[self.method]
        if self.cooldown:
            out["cooldown"] = True
        return out

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: the method and options asked for, the engine's version and its counters' totals."""
        requested = {"method": self.method, "cooldown": self.cooldown, "folder": self.folder.name}
        state = {"requests": self.requests, **self.totals}
        return {"name": "onnxruntime-genai", "version": genai_version(), "requested": requested, "state": state}

    def reported_metrics(self) -> Optional[dict]:
        """The engine's counters summed over every generator so far (``mapping.reported``); None for ``plain``."""
        if self.method == "plain":
            return None
        out = reported(self.totals)
        if self.method == "ngram":  # a lookup miss is a plain step the completions report as a round of 0 drafts,
            out.pop("num_drafts")  # while the engine's rounds count only the rounds that carried drafts
        return out

    def generate(self, request: Request) -> Completion:
        """One request through one ``og.Generator`` (module docstring)."""
        check_request(request, self.capabilities, self.method, self.vocab.size)
        p, prompt = request.params, list(request.prompt)
        params = self.og.GeneratorParams(self.model)
        try:
            params.set_search_options(**search_options(request))
            options = self.speculative_options(request)
            if options:
                params.set_speculative_options(**options)
            generator = self.og.Generator(self.model, params)
            generator.append_tokens(np.array(prompt, dtype=np.int32))
            tokens, log = self._run(generator, p)
            sequence = [int(t) for t in generator.get_sequence(0)]
            stats = generator.get_speculative_stats() if self.method != "plain" else {}
        except Exception as exc:
            raise RuntimeError(f"onnxruntime_genai failed on {request!r}: {exc}") from exc
        self.requests += 1
        for key in _TOTALS:
            self.totals[key] += int(stats.get(key, 0))
        eos = int(self.vocab.eos_token_id)
        # the EOS it stops on is left out of the sequence (module docstring); kept would be as good
        if sequence != prompt + tokens and not (tokens and tokens[-1] == eos and sequence == prompt + tokens[:-1]):
            raise RuntimeError(
                f"onnxruntime_genai's sequence {sequence!r} is not the prompt and the tokens it emitted "
                f"({prompt!r} + {tokens!r}, a final EOS left out)"
            )
        done = finish(tokens, self.vocab, p, engine="onnxruntime_genai", cuts=frozenset({"stop"}))
        accepted = None if "accepted" not in self.capabilities else clip_accepted(log.per_round, len(done.tokens))
        return Completion(done.tokens, done.finish_reason, accepted=accepted)

    def _run(self, generator, params) -> tuple:
        finisher, tokens, log = Finisher(self.vocab, params), [], RoundLog()
        while not generator.is_done():
            generator.generate_next_token()
            token = int(generator.get_next_tokens()[0])
            tokens.append(token)
            if self.method != "plain":
                log.step(generator.get_speculative_stats())
            if params.stop and finisher.push(token) == "stop":
                break
        return tokens, log
