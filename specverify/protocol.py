"""The public protocol an engine adapter implements (docs/adapters.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Protocol, Sequence, runtime_checkable

from specverify.errors import InvalidArgument
from specverify.params import PROCESSOR_FIELDS, SamplingParams

__all__ = [
    "Request",
    "Completion",
    "Decoder",
    "FINISH_REASONS",
    "EXTRA_CAPABILITIES",
    "MINIMUM_CAPABILITIES",
    "capabilities_of",
    "draft_law_of",
    "prefill_tokens_of",
    "engine_of",
    "fixed_gamma_of",
    "call_size_of",
    "MAX_CALL_SIZE",
    "EngineConfig",
    "engine_configs_of",
    "merged_state",
    "DRAFT_LAWS",
    "SampleCounts",
    "TIMING_PHASES",
]

#: Keys of the optional ``decoder.timings()`` (milliseconds; docs/adapters.md): mean per call of the draft model,
#: the target's verification, sampling, state work (KV / cache bookkeeping) per round, time to first token and time
#: per output token.
TIMING_PHASES = ("draft", "verify", "sample", "state", "ttft", "tpot")

FINISH_REASONS = ("eos", "stop", "length", "no_token")
# "text-grammar": the decoder takes a grammar that has a text form (``.pattern``, specverify.grammar_regex), as
# engines' structured outputs do, but not a token-level automaton; "grammar" (any Grammar) implies it.
# "recurrent": the decoder runs a target whose cache is a recurrent state (specverify.oracles.recurrent): it keeps
# the state after each verified position and restores the one after the last kept token.
EXTRA_CAPABILITIES = ("batch", "seed", "stream", "accepted", "text-grammar", "recurrent")
# decoder.draft_law (optional; docs/adapters.md): what the decoder's drafts are, so the acceptance evidence compares
# its reported acceptance with the right exact expectation
DRAFT_LAWS = ("model", "model-argmax", "model-temperature", "unmodelled")
MINIMUM_CAPABILITIES = frozenset({"temperature", "max_tokens"})


@dataclass(frozen=True)
class Request:
    """One generation request: ``prompt`` (>= 1 token, the last one is fed first), ``params``, ``num_draft_tokens``
    (γ >= 1), an optional ``seed`` (None: unseeded, yet independent of every other request) and an optional
    ``tree`` shape for tree drafts (children per depth, γ entries; None: the draft's own shape)."""

    prompt: tuple[int, ...]
    params: SamplingParams
    num_draft_tokens: int = 1
    seed: Optional[int] = None
    tree: Optional[tuple[int, ...]] = None

    def __post_init__(self):
        prompt = self.prompt
        if type(prompt) is not tuple or not all(type(t) is int for t in prompt):
            object.__setattr__(self, "prompt", tuple(int(t) for t in prompt))
        # messages are built only on failure: requests are made by the hundred thousand
        if not self.prompt or min(self.prompt) < 0:
            raise InvalidArgument(
                f"prompt={self.prompt!r} must hold at least one token (a BOS at least), all non-negative ids."
            )
        if not isinstance(self.params, SamplingParams):
            raise InvalidArgument(f"params={self.params!r} must be a SamplingParams.")
        gamma = self.num_draft_tokens
        if not isinstance(gamma, int) or isinstance(gamma, bool) or gamma < 1:
            raise InvalidArgument(f"num_draft_tokens={gamma!r} must be an int >= 1 (γ, drafts per round).")
        if self.seed is not None and not (isinstance(self.seed, int) and 0 <= self.seed < 2**63):
            raise InvalidArgument(f"seed={self.seed!r} must be None or an int in [0, 2**63).")
        if self.tree is not None:
            tree = self.tree
            if not (isinstance(tree, tuple) and len(tree) == gamma and all(type(c) is int and c >= 1 for c in tree)):
                raise InvalidArgument(
                    f"tree={tree!r} must be None or a tuple of num_draft_tokens={gamma} children counts >= 1, "
                    "one per depth, e.g. (2, 2, 1)."
                )


@dataclass(frozen=True)
class Completion:
    """The decoder's answer to one request: tokens generated (EOS included when it finished), the finish reason,
    optionally the chunks as streamed and the number of accepted drafts in *every* round, in order (a tree
    decoder: the depth of the accepted path)."""

    tokens: tuple[int, ...]
    finish_reason: str
    stream: Optional[tuple[tuple[int, ...], ...]] = None
    accepted: Optional[tuple[int, ...]] = None


@dataclass(frozen=True)
class SampleCounts:
    """Result of the optional fast path ``decoder.sample(request, n)``: ``outcomes`` maps (tokens, finish_reason)
    to its count over n independent draws; ``accepted`` maps the number of drafts accepted in each draw's
    *first* round to its count (its exact law is known: certify compares it), None when not reported.

    All-round acceptance (optional, docs/adapters.md): ``rounds`` maps an accepted length to the number of rounds,
    over every round of every draw, that accepted that many drafts; ``positions[k]`` is ``(verified, accepted)``
    for draft position k: how many times a draft at k was judged by the target, and accepted
    (``specverify.oracles.acceptance_rounds`` gives their exact expectations)."""

    outcomes: Mapping[tuple[tuple[int, ...], str], int]
    accepted: Optional[Mapping[int, int]] = None
    rounds: Optional[Mapping[int, int]] = None
    positions: Optional[tuple[tuple[int, int], ...]] = None


@runtime_checkable
class Decoder(Protocol):
    """``decoder(requests) -> completions``, one per request, in order; ``capabilities`` optional."""

    def __call__(self, requests: Sequence[Request]) -> Sequence[Completion]: ...


def capabilities_of(decoder) -> frozenset[str]:
    """The decoder's declared capabilities, or the minimum (temperature, max_tokens) when it declares none."""
    caps = getattr(decoder, "capabilities", None)
    if caps is None:
        return MINIMUM_CAPABILITIES
    known = set(PROCESSOR_FIELDS) | set(EXTRA_CAPABILITIES)
    if isinstance(caps, str):
        caps = {caps}
    unknown = sorted(set(caps) - known)
    if unknown:
        import difflib

        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name.replace("-", "_"), sorted(known), n=1, cutoff=0.6)
            if close:
                hints.append(f"{name!r}: did you mean `{close[0]}`?")
        raise InvalidArgument(
            f"capabilities={sorted(caps)!r} holds unknown names {unknown!r}"
            + (f" ({'; '.join(hints)})" if hints else "")
            + f"; expected SamplingParams field names or {EXTRA_CAPABILITIES!r}."
        )
    implied = {"text-grammar"} if "grammar" in caps else set()
    return frozenset(caps) | MINIMUM_CAPABILITIES | implied


def draft_law_of(decoder) -> str:
    """What the decoder's drafts are (``decoder.draft_law``; absent: ``"model"``).

    ``"model"``: γ samples of the draft model's processed law every round (the reference's way); ``"model-argmax"``:
    the draft model's argmax chain on its raw logits, γ a round, whatever the request's processors (greedy
    drafting); ``"model-temperature"``: γ samples a round of the draft model's raw logits at the request's
    temperature, no other processor (vLLM's probabilistic draft); ``"unmodelled"``: anything else (prompt lookup,
    an engine's own heuristic, a draft length that varies). The certifier compares reported acceptance with the
    exact expectation of the first three; for the last it checks only that the counts add up."""
    law = getattr(decoder, "draft_law", "model")
    if law not in DRAFT_LAWS:
        raise InvalidArgument(
            f"decoder.draft_law={law!r} must be one of {DRAFT_LAWS!r}: 'model' when drafts are samples of the draft "
            "model, 'model-argmax' for its greedy tokens, 'model-temperature' for samples at the request's temperature "
            "with no other processor, 'unmodelled' otherwise (docs/adapters.md)."
        )
    return law


MAX_PREFILL_TOKENS = 4  # the after-prefill acceptance law enumerates this many plain draws at most


def prefill_tokens_of(decoder) -> Optional[int]:
    """How many tokens the decoder emits before its first verification round (``decoder.prefill_tokens``, optional;
    vLLM emits its prefill's token first). None when it does not say: the certifier then infers it from the counts
    (docs/metrics.md)."""
    value = getattr(decoder, "prefill_tokens", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PREFILL_TOKENS:
        raise InvalidArgument(
            f"decoder.prefill_tokens={value!r} must be an int in [0, {MAX_PREFILL_TOKENS}]: the tokens it emits "
            "before its first verification round (docs/adapters.md), or absent to let the certifier infer it."
        )
    return value


def fixed_gamma_of(decoder) -> bool:
    """Whether the decoder fixes γ per engine (``decoder.fixed_gamma``, optional; absent: False).

    True: every engine instance behind the decoder runs one ``num_draft_tokens`` (vLLM's ``num_speculative_tokens``),
    so requests of different γ never share a batch, and a change of γ between calls may start another engine. The
    certifier then gives a request only same-γ neighbours where it tests the law beside neighbours (batch
    composition), and groups its greedy calls by γ (docs/adapters.md). It changes no law and no plan."""
    value = getattr(decoder, "fixed_gamma", False)
    if not isinstance(value, bool):
        raise InvalidArgument(
            f"decoder.fixed_gamma={value!r} must be a bool: True when the engine fixes γ per instance (requests of "
            "different num_draft_tokens never share a batch), or absent (docs/adapters.md)."
        )
    return value


MAX_CALL_SIZE = 1 << 16  # requests in one call at most, whatever a decoder declares (memory of the completions)


def call_size_of(decoder) -> Optional[tuple]:
    """The ``(preferred, maximum)`` requests per call a batching decoder declares (``decoder.call_size``, optional;
    absent: None, the certifier's own sizes).

    The certifier's calls of many requests start at ``preferred`` (instead of ramping up from a few hundred while
    it measures the decoder's speed) and never exceed ``maximum``: an engine that serves thousands of requests per
    call at its best (vLLM) says so, and one with a hard limit is never sent more. A call still grows only while it
    takes under a twentieth of the per-call time limit. It changes no law, no plan and no draw of a seeded request
    (a seeded draw's seed depends on its index, not on the call it is in).

    >>> class Engine:
    ...     call_size = (4096, 8192)
    >>> call_size_of(Engine()), call_size_of(object())
    ((4096, 8192), None)
    """
    value = getattr(decoder, "call_size", None)
    if value is None:
        return None
    ok = (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 1 <= value[0] <= value[1] <= MAX_CALL_SIZE
    )
    if not ok:
        raise InvalidArgument(
            f"decoder.call_size={value!r} must be a pair of ints (preferred, maximum) with 1 <= preferred <= maximum "
            f"<= {MAX_CALL_SIZE}: the requests per call the engine serves best and at most, or absent "
            "(docs/adapters.md)."
        )
    return value


_ENGINE_KEYS = ("name", "version", "requested", "effective", "state")


def engine_of(decoder) -> Optional[dict]:
    """The decoder's optional ``engine_info`` (docs/adapters.md): ``name`` and ``version`` strings, the
    ``requested`` / ``effective`` configuration (JSON-ready dicts) and ``state``, the engine's own counts of the
    states its calls reached so far (``{name: number}``, e.g. prefix-cache hits or preemptions: an engine
    configuration's evidence, :class:`EngineConfig`), recorded in the certificate's ``engine``; None without.
    (Not ``decoder.engine``: adapters keep their engine object there.)"""
    engine = getattr(decoder, "engine_info", None)
    if engine is None:
        return None
    import json

    ok = isinstance(engine, dict) and set(engine) <= set(_ENGINE_KEYS) and "name" in engine
    state = engine.get("state", {}) if ok else {}
    ok = ok and isinstance(state, dict) and all(_is_count(v) for v in state.values())
    try:
        json.dumps(engine)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InvalidArgument(
            f"decoder.engine_info={engine!r} must be a JSON-ready dict with 'name' and optionally 'version', "
            "'requested', 'effective' and 'state' ({name: number >= 0}) (docs/adapters.md)."
        )
    return dict(engine)


def _is_count(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class EngineConfig:
    """A named engine configuration a factory declares (``factory.engine_configs = {name: EngineConfig(...)}``;
    a plain ``{key: value}`` dict is an ``EngineConfig`` of those options). ``options`` are the factory's keyword
    options; ``reaches`` the evidence that the configuration's state was reached: ``{state key: minimum}`` over
    ``engine_info["state"]`` after the run (a configuration whose state was not reached is *not covered*, never a
    pass); ``unreachable``, why it cannot run on this kind of machine (GPU-only: listed, never run); ``doc``, one
    line on what it exercises; ``scenarios``, names of the scenarios that create the state, added to the matrix the
    configuration runs (its own α plan counts them; ``certification.configured.configured_matrix``).
    ``specverify certify FACTORY --engine-config NAME`` certifies it as its own decoder (docs/adapters.md, "Engine
    configurations")."""

    options: Mapping = None
    doc: str = ""
    reaches: Mapping = None
    unreachable: Optional[str] = None
    scenarios: tuple = ()

    def __post_init__(self):
        options = {} if self.options is None else self.options
        reaches = {} if self.reaches is None else self.reaches
        if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
            raise InvalidArgument(f"EngineConfig(options={options!r}) must be a mapping of keyword options.")
        if not isinstance(reaches, Mapping) or not all(isinstance(k, str) and _is_count(v) for k, v in reaches.items()):
            raise InvalidArgument(
                f"EngineConfig(reaches={reaches!r}) must map engine_info state keys to minimum counts >= 0, e.g. "
                "{'cached_tokens': 33}."
            )
        if self.unreachable is not None and not (isinstance(self.unreachable, str) and self.unreachable.strip()):
            raise InvalidArgument(
                f"EngineConfig(unreachable={self.unreachable!r}) must be None or say why it cannot run here."
            )
        if not isinstance(self.doc, str):
            raise InvalidArgument(f"EngineConfig(doc={self.doc!r}) must be a string.")
        scenarios = self.scenarios
        if not isinstance(scenarios, (tuple, list)) or not all(isinstance(n, str) and n for n in scenarios):
            raise InvalidArgument(
                f"EngineConfig(scenarios={scenarios!r}) must be a tuple of scenario names, e.g. ('long-prompt', "
                "'multi-turn') (`specverify scenarios` lists them)."
            )
        if len(set(scenarios)) != len(scenarios):
            raise InvalidArgument(f"EngineConfig(scenarios={scenarios!r}) names a scenario twice; name each once.")
        object.__setattr__(self, "scenarios", tuple(scenarios))
        object.__setattr__(self, "options", dict(options))
        object.__setattr__(self, "reaches", dict(reaches))

    def shortfall(self, engine: Optional[dict]) -> Optional[str]:
        """Why the run's ``engine`` record (``engine_of`` after the calls) does not show the state reached; None when
        it does (or nothing is required)."""
        if not self.reaches:
            return None
        state = (engine or {}).get("state") or {}
        short = [f"{k} = {state.get(k, 'absent')} (needs >= {v:g})" for k, v in self.reaches.items()
                 if not _is_count(state.get(k)) or state[k] < v]  # fmt: skip
        return None if not short else "its state was not reached: engine_info state " + ", ".join(short)


def merged_state(states) -> dict:
    """The ``engine_info["state"]`` of a run over several decoders or items: each numeric key the largest value one
    of ``states`` reached (``EngineConfig.reaches`` asks whether the state was reached at all), any other key its
    first value; entries that are not dicts are left out."""
    merged: dict = {}
    for state in states:
        if not isinstance(state, dict):
            continue
        for key, value in state.items():
            if key not in merged:
                merged[key] = value
            elif _is_number(value) and _is_number(merged[key]):
                merged[key] = max(merged[key], value)
    return merged


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def engine_configs_of(factory) -> tuple[dict, Optional[str]]:
    """The factory's named configurations (``factory.engine_configs``; ``{}`` without) as ``{name: EngineConfig}``,
    and ``factory.default_engine_config``: the name of the one that equals running with no configuration (None:
    none declared), checked."""
    presets = getattr(factory, "engine_configs", None) or {}
    if not isinstance(presets, Mapping) or not all(isinstance(k, str) and k for k in presets):
        raise InvalidArgument(
            f"factory.engine_configs={presets!r} must map configuration names to EngineConfig or option dicts "
            "(docs/adapters.md)."
        )
    out = {}
    for name, preset in presets.items():
        if name == "all":
            raise InvalidArgument("factory.engine_configs may not name a configuration 'all' (--engine-config all).")
        out[name] = preset if isinstance(preset, EngineConfig) else EngineConfig(options=preset)
    default = getattr(factory, "default_engine_config", None)
    if default is not None and default not in out:
        raise InvalidArgument(
            f"factory.default_engine_config={default!r} must name one of its engine_configs {sorted(out)}."
        )
    return out, default
