"""The vLLM adapter's table of methods: capabilities, engine options and their checks, one ``MethodSpec`` per factory
and the ``speculative_config`` builders (the option presets are ``configs``). The head methods' entries (eagle, eagle3,
medusa, dflash) come from ``heads``; ``mtp`` runs on the MiMo pair (``checkpoint_pairs="mimo"``). Imports no vLLM."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Union

from specverify.adapters.vllm import heads, patches, suffix_decoding
from specverify.errors import InvalidArgument

__all__ = [
    "SPECULATIVE_CAPABILITIES",
    "PLAIN_CAPABILITIES",
    "COMMON_OPTIONS",
    "OPTION_CHECKS",
    "MethodSpec",
    "METHODS",
    "draft_model_config",
    "sampled_draft_law",
    "method_options",
]

SPECULATIVE_CAPABILITIES = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_p",
        "repetition_penalty",
        "frequency_penalty",
        "presence_penalty",
        "bad_token_ids",
        "min_tokens",
        "stop",
        "seed",
        "batch",
        "accepted",
    }
)
PLAIN_CAPABILITIES = (SPECULATIVE_CAPABILITIES - {"accepted"}) | {"min_p", "top_k"}
#: Accepted by every method (the package docstring's "Engine options"); the last five shape the engine's state
#: (configs.ENGINE_CONFIGS): None leaves vLLM's default (prefix caching on; the adapter's token budget that never
#: splits a prefill; blocks from VLLM_CPU_KVCACHE_SPACE).
COMMON_OPTIONS: dict = {
    "workaround": None,
    "threads": 1,
    "enable_prefix_caching": None,
    "max_num_batched_tokens": None,
    "num_gpu_blocks_override": None,
    "parallel_n": False,
    "declare_seed": True,
    "structured_outputs": False,  # configs "structured": declare text-grammar (a RegexGrammar as its regex)
}


def _one_of(key: str, allowed: tuple) -> Callable:
    def check(value) -> None:
        if value not in allowed:
            raise InvalidArgument(f"{key}={value!r} must be one of {allowed!r}.")

    return check


def _positive_int(key: str) -> Callable:
    def check(value) -> None:
        if type(value) is not int or value < 1:
            raise InvalidArgument(f"{key}={value!r} must be an int >= 1 (e.g. --engine-option {key}=2).")

    return check


def _flag(key: str, none: bool = False) -> Callable:
    def check(value) -> None:
        if not (isinstance(value, bool) or (none and value is None)):
            allowed = "true, false or null" if none else "true or false"
            raise InvalidArgument(f"{key}={value!r} must be {allowed} (e.g. --engine-option {key}=false).")

    return check


def _optional_int(key: str, low: int) -> Callable:
    def check(value) -> None:
        if value is not None and (type(value) is not int or value < low):
            raise InvalidArgument(
                f"{key}={value!r} must be null (vLLM's default) or an int >= {low} (e.g. --engine-option {key}={low})."
            )

    return check


#: How each option's value is checked (key -> callable raising InvalidArgument); a key absent here takes any value.
OPTION_CHECKS: dict = {
    "workaround": patches.check_workaround,
    "threads": _positive_int("threads"),
    "draft_sample_method": _one_of("draft_sample_method", ("probabilistic", "greedy")),
    "prompt_lookup_min": _positive_int("prompt_lookup_min"),
    "prompt_lookup_max": _positive_int("prompt_lookup_max"),
    "reset_suffix_cache": suffix_decoding.check_reset,
    "enable_prefix_caching": _flag("enable_prefix_caching", none=True),
    "structured_outputs": _flag("structured_outputs"),
    "max_num_batched_tokens": _optional_int("max_num_batched_tokens", 2),  # a 1-token budget cannot hold γ + 1
    "num_gpu_blocks_override": _optional_int("num_gpu_blocks_override", 2),  # one request of max_model_len 64
    "parallel_n": _flag("parallel_n"),
    "declare_seed": _flag("declare_seed"),
}


@dataclass(frozen=True)
class MethodSpec:
    """One method of the adapter. ``vllm_method``: ``speculative_config["method"]`` (None: speculation off);
    ``loads_draft``: the engine loads a draft checkpoint, by default the pair's ``draft.path`` (``draft_path(target,
    draft, options) -> str`` gives another, e.g. a head checkpoint built for the target); ``options``: the keys this
    method accepts besides :data:`COMMON_OPTIONS`, with their defaults; ``speculative_config(target_path,
    draft_path, gamma, options) -> dict | None``; ``draft_law`` and ``prefill_tokens`` (None: undeclared) as
    docs/adapters.md defines them, ``draft_law`` also a function of the options; ``summary``: the factory's
    docstring; ``checkpoint_pairs``: the pair set the factory's scenarios run on (its ``checkpoint_pairs``
    attribute, ``specverify.certification.matrix_checkpoint.PAIR_SETS``: ``mimo`` for ``mtp``, whose drafts live in
    the target)."""

    vllm_method: Optional[str]
    loads_draft: bool
    capabilities: frozenset
    speculative_config: Callable[[str, Optional[str], int, Mapping], Optional[dict]]
    draft_law: Union[str, None, Callable[[Mapping], Optional[str]]] = None
    prefill_tokens: Optional[int] = None
    options: Mapping = field(default_factory=dict)
    draft_path: Optional[Callable[[object, object, Mapping], str]] = None
    summary: str = ""
    checkpoint_pairs: str = "llama"
    before_generate: Optional[Callable[[object, Mapping], None]] = None  # (llm, options) before every generate()

    def law(self, options: Mapping) -> Optional[str]:
        return self.draft_law(options) if callable(self.draft_law) else self.draft_law


def draft_model_config(target_path: str, draft_path: Optional[str], gamma: int, options: Mapping) -> dict:
    """vLLM's ``speculative_config`` for a draft checkpoint proposing γ tokens with ``draft_sample_method``."""
    return {
        "method": "draft_model",
        "model": draft_path,
        "num_speculative_tokens": gamma,
        "draft_sample_method": options["draft_sample_method"],
    }


def _ngram_config(target_path: str, draft_path: Optional[str], gamma: int, options: Mapping) -> dict:
    lo, hi = options["prompt_lookup_min"], options["prompt_lookup_max"]
    if lo > hi:
        raise InvalidArgument(f"prompt_lookup_min={lo!r} must be <= prompt_lookup_max={hi!r}.")
    return {"method": "ngram", "num_speculative_tokens": gamma, "prompt_lookup_max": hi, "prompt_lookup_min": lo}


def _mtp_config(target_path: str, draft_path: Optional[str], gamma: int, options: Mapping) -> dict:
    """``mtp``: the drafts come from the target's own MTP layers (``num_nextn_predict_layers`` of a MiMo checkpoint,
    config/speculative.py:725-734), so there is no draft ``model``. vLLM reuses the layers for γ above their number
    ``n`` and then needs γ divisible by ``n`` (config/speculative.py:1489-1501)."""
    import json
    from pathlib import Path

    config = json.loads((Path(target_path) / "config.json").read_text())
    layers = config.get("num_nextn_predict_layers") or 0
    if config.get("architectures") != ["MiMoForCausalLM"] or layers < 1:
        raise InvalidArgument(
            f"target={target_path!r} is a {config.get('architectures')!r} checkpoint without MTP layers: vLLM's mtp "
            "method drafts with the layers inside a MiMo target. Use the MiMo pair (MIMO_PAIRS['mimo'].build() of "
            "specverify.certification.matrix.checkpoint; specverify certify picks it with --models checkpoint)."
        )
    if gamma > layers and gamma % layers:
        raise InvalidArgument(
            f"num_draft_tokens={gamma!r}: vLLM runs the target's {layers} MTP layers again for γ > {layers}, so γ "
            f"must be <= {layers} or divisible by it (config/speculative.py:1493-1501)."
        )
    return {
        "method": "mtp",
        "num_speculative_tokens": gamma,
        "draft_sample_method": options["draft_sample_method"],
    }


def sampled_draft_law(options: Mapping) -> str:
    """``draft_law`` of a method whose draft samples (``probabilistic``) or proposes its argmax (``greedy``).
    vLLM's probabilistic draft samples softmax(raw draft logits / temperature) and applies no other processor
    (``compute_probs_and_sample_next_token``, v1/spec_decode/llm_base_proposer.py:1822-1860: "we ignore most of the
    sampling parameters ... We only use the temperature"), so it is ``model-temperature``, not ``model`` (the
    processed law): docs/findings/vllm.md, the acceptance-metrics decision."""
    return "model-temperature" if options["draft_sample_method"] == "probabilistic" else "model-argmax"


METHODS: dict = {
    "draft_model": MethodSpec(
        "draft_model",
        loads_draft=True,
        capabilities=SPECULATIVE_CAPABILITIES,
        speculative_config=draft_model_config,
        draft_law=sampled_draft_law,
        prefill_tokens=1,  # module docstring, "Prefill"
        options={"draft_sample_method": "probabilistic"},
        summary="Draft-model speculation, drafts sampled from the draft (``draft_sample_method='probabilistic'``).",
    ),
    "draft_model_greedy": MethodSpec(
        "draft_model",
        loads_draft=True,
        capabilities=SPECULATIVE_CAPABILITIES,
        speculative_config=draft_model_config,
        draft_law=sampled_draft_law,
        prefill_tokens=1,
        options={"draft_sample_method": "greedy"},
        summary="Draft-model speculation, the draft proposes its argmax (``draft_sample_method='greedy'``).",
    ),
    "ngram": MethodSpec(
        "ngram",
        loads_draft=False,
        capabilities=SPECULATIVE_CAPABILITIES,
        speculative_config=_ngram_config,
        draft_law="unmodelled",
        prefill_tokens=None,  # varies (module docstring, "Prefill")
        options={"prompt_lookup_min": 1, "prompt_lookup_max": 2},
        summary="N-gram (prompt lookup) speculation, n in [prompt_lookup_min, prompt_lookup_max]; no draft model.",
    ),
    "plain": MethodSpec(
        None,
        loads_draft=False,
        capabilities=PLAIN_CAPABILITIES,
        speculative_config=lambda target_path, draft_path, gamma, options: None,
        summary="Speculation off: vLLM's own sampler, the control.",
    ),
}


METHODS.update(heads.method_specs(MethodSpec, SPECULATIVE_CAPABILITIES))  # eagle, eagle3, medusa, dflash
METHODS["mtp"] = MethodSpec(
    "mtp",
    loads_draft=False,  # the MTP layers are read from the target's directory
    capabilities=SPECULATIVE_CAPABILITIES,
    speculative_config=_mtp_config,
    draft_law="unmodelled",  # the pair's draft slot holds the target: the MTP layers' law is not modelled
    prefill_tokens=1,  # the EAGLE proposer drafts in the prefill step, as for the heads (heads.method_specs)
    options={"draft_sample_method": "greedy"},  # vLLM's default; honoured by the EAGLE proposer (llm_base_proposer:258)
    checkpoint_pairs="mimo",
    summary="Multi-token prediction: drafts from the MTP layer inside a MiMo target (the MiMo checkpoint pair).",
)
METHODS["suffix"] = MethodSpec(
    "suffix",
    loads_draft=False,
    capabilities=SPECULATIVE_CAPABILITIES,
    speculative_config=suffix_decoding.suffix_config,
    draft_law="unmodelled",  # point masses of variable length from the suffix trees
    prefill_tokens=None,  # varies, as for ngram: a round without a tree match drafts nothing
    options=dict(suffix_decoding.OPTIONS),
    before_generate=suffix_decoding.reset_cache,
    summary="Suffix decoding (arctic-inference's suffix trees; needs arctic-inference); the cache is emptied before "
    "every call unless reset_suffix_cache=false.",
)


def method_options(name: str, options: Mapping) -> dict:
    """The options of method ``name``: its defaults overridden by ``options``, every key and value checked."""
    if name not in METHODS:
        raise InvalidArgument(f"method={name!r} must be one of {tuple(METHODS)!r}.")
    accepted = {**COMMON_OPTIONS, **METHODS[name].options}
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InvalidArgument(
            f"engine option(s) {', '.join(f'{k}={options[k]!r}' for k in unknown)} not accepted by "
            f"specverify.adapters.vllm:{name}: it accepts {sorted(accepted)!r} (--engine-option KEY=VALUE)."
        )
    merged = {**accepted, **options}
    for key, value in merged.items():
        if key in options and key in OPTION_CHECKS:
            OPTION_CHECKS[key](value)
    return merged
