"""The scenario matrix: each scenario exercises named failure modes with a small exact law (≤ ~300 outcomes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Iterable

from specverify.enums import DraftFamily, ModelFamily, ScenarioKind
from specverify.errors import InvalidArgument, check
from specverify.grammar import ToyGrammar, text_form
from specverify.oracles.pairs import ModelPair, PairSpec, ToyPairSpec
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams

__all__ = [
    "CertificationScenario",
    "Matrix",
    "SCENARIOS",
    "CORE",
    "TOY_MATRIX",
    "matrix",
    "matrix_of",
    "scenario_names",
    "scenarios_served",
    "name_problem",
    "select_scenarios",
    "run_order",
]

# state 0: a -> 1 (dead end), b -> 2, " " -> 0; state 2 (accepting): b -> 2, a -> 0
DEAD_END_GRAMMAR = ToyGrammar(transitions=({0: 1, 1: 2, 3: 0}, {}, {1: 2, 0: 0}), accepting={2})


@dataclass(frozen=True)
class CertificationScenario:
    """One scenario of the certification matrix: a request shape (``params``, ``num_draft_tokens``, ``prompt``) on
    a model pair (``pair``, a hashable spec), of one ``kind`` (see :class:`~specverify.enums.ScenarioKind`);
    ``mixed`` scenarios interleave their ``members`` in each call."""

    name: str
    kind: ScenarioKind
    exercises: str
    params: SamplingParams = SamplingParams(max_tokens=4)
    num_draft_tokens: int = 3
    prompt: tuple = (0, 1)
    pair: PairSpec = ToyPairSpec()
    core: bool = False
    members: tuple = field(default=())
    seeded: bool = True  # False: requests carry no seed even when the decoder declares ``seed``
    alone_prompts: int = 0  # greedy: how many prompts are also sent one per call (batch decoders)
    prompts: tuple = ()  # greedy: fixed prompts (default: drawn from the seed over the vocabulary)
    prompt_lengths: tuple = (1, 5)  # greedy: the drawn prompts' shortest and longest length
    gammas: tuple = ()  # greedy: the γ its requests take in turn (default: checks.greedy.GREEDY_GAMMAS, 1 to 4)

    def models(self) -> ModelPair:
        """The built (target, draft) pair (cached per spec)."""
        return self.pair.build()

    def needs(self) -> frozenset:
        """Capabilities its requests need (the params it sets); its check may add more (``checks.requirements``)."""
        needed = {"temperature", "max_tokens"} | set(self.params.active())
        needed.discard("stop_after_min_tokens")
        if "grammar" in needed and text_form(self.params.grammar) is not None:
            needed = (needed - {"grammar"}) | {"text-grammar"}  # a text form: engines' structured outputs take it
        if getattr(self.pair, "target_recurrent", False):
            needed.add("recurrent")  # a target whose state no crop undoes: only decoders that restore it run it
        return frozenset(needed)


_PAIR_FIELDS = frozenset(f.name for f in fields(ToyPairSpec))


def _s(name: str, kind: str, exercises: str, **kw) -> CertificationScenario:
    pair = ToyPairSpec(**{k: kw.pop(k) for k in list(kw) if k in _PAIR_FIELDS})
    return CertificationScenario(name=name, kind=ScenarioKind(kind), exercises=exercises, pair=pair, **kw)


P = SamplingParams
_LIST = [
    _s("temperature-1", "sampling", "first-position, middle and full acceptance; residual; bonus", core=True),
    _s("temperature-0.5", "sampling", "temperature applied to both laws", params=P(temperature=0.5, max_tokens=4)),
    _s("temperature-1.5", "sampling", "temperature applied to both laws", params=P(temperature=1.5, max_tokens=4)),
    _s(
        "first-token-rejection",
        "sampling",
        "rejection at the first draft (independent draft)",
        draft_distance=1.0,
        draft_seed=11,
    ),
    _s(
        "full-acceptance-bonus",
        "sampling",
        "every draft accepted, bonus drawn from the target",
        draft_distance=0.1,
        num_draft_tokens=2,
        params=P(max_tokens=4),
    ),
    _s("draft-zero", "sampling", "q(x) = 0 where p(x) > 0", draft_zero=0.4),
    _s(
        "target-zero",
        "sampling",
        "p(x) = 0 where q(x) > 0 (zero-probability drafts must be rejected)",
        target_zero=0.4,
        draft_distance=1.0,
    ),
    _s("near-deterministic", "sampling", "extreme probabilities (near one-hot target)", target_scale=5.0),
    _s("top-k", "sampling", "top-k on both laws, temperature unset (its default: 1)", params=P(top_k=2, max_tokens=5)),
    _s("top-p", "sampling", "top-p on both laws", params=P(top_p=0.75, max_tokens=4)),
    _s("min-p", "sampling", "min-p on both laws", params=P(min_p=0.35, max_tokens=4)),
    _s(
        "penalties",
        "sampling",
        "repetition/frequency/presence penalty history, rolled back on rejection",
        params=P(repetition_penalty=1.8, frequency_penalty=0.6, presence_penalty=0.4, max_tokens=4),
        eos_bias=-2.0,
        vocab_size=5,
    ),
    _s("bad-tokens", "sampling", "bad token ids masked in every row", params=P(bad_token_ids=(0,), max_tokens=4)),
    _s(
        "min-tokens",
        "sampling",
        "EOS masked until min_tokens (counted in tokens, not rounds)",
        params=P(min_tokens=3, max_tokens=4),
        eos_bias=1.0,
    ),
    _s(
        "min-tokens-short-gamma",
        "sampling",
        "EOS masked before min_tokens at the bonus and recovered rows too (γ < min_tokens: a round ends before it)",
        params=P(min_tokens=3, max_tokens=4),
        num_draft_tokens=1,
        eos_bias=1.0,
    ),
    _s(
        "eos-in-block",
        "sampling",
        "EOS accepted inside a block ends the request there",
        eos_bias=0.8,
        params=P(max_tokens=5),
        core=True,
    ),
    _s(
        "stop-spanning",
        "sampling",
        "stop strings spanning tokens, finishing inside a block; matcher rollback",
        params=P(stop=("ab", " b"), max_tokens=5),
        vocab_size=5,
    ),
    _s(
        "max-tokens-not-multiple",
        "sampling",
        "max_tokens not a multiple of γ+1 (cap inside a block)",
        params=P(max_tokens=5),
        core=True,
    ),
    _s(
        "grammar-dead-end",
        "sampling",
        "grammar mask on drafts and verify; dead end -> no_token; rollback",
        params=P(grammar=DEAD_END_GRAMMAR, max_tokens=4),
        eos_bias=0.0,
        vocab_size=5,
    ),
    _s(
        "logits-processor",
        "sampling",
        "a logits processor reading the history (drafts included) on both laws, after the penalties",
        params=P(logits_processors=(parity_processor,), max_tokens=4),
    ),
    _s("gamma-1", "sampling", "γ = 1", num_draft_tokens=1),
    _s(
        "gamma-5",
        "sampling",
        "γ = 5 (longer than the output: blocks cut by max_tokens)",
        num_draft_tokens=5,
        params=P(max_tokens=4),
    ),
    _s("long-prompt", "sampling", "prompts crossing KV block boundaries", prompt=(0, 1, 2) * 6, num_draft_tokens=2),
    _s("one-token-prompt", "sampling", "a one-token prompt: one token to compute (padded to decode)", prompt=(0,)),
    _s(
        "multi-turn",
        "sampling",
        "turn 2 of a conversation: turn 1's prompt and its whole output, finishing token (EOS) included",
        prompt=(0, 1) + (1, 0, 3),  # turn 1 from (0, 1): its likeliest output of three tokens, (1, 0) then EOS (3)
    ),
    _s(
        "gamma-8",
        "sampling",
        "γ = 8 with outputs of 7 tokens: verify rows past 4 and 5 judge drafts after five accepted (the γ sweep)",
        num_draft_tokens=8,
        params=P(max_tokens=7),
        vocab_size=3,
        draft_distance=0.15,
    ),
    _s(
        "sliding-window",
        "sampling",
        "a target with a 3-token sliding window, outputs of 6 tokens: rollback after the window wraps (toy-only)",
        params=P(max_tokens=6),
        target_window=3,
        draft_distance=0.4,
        vocab_size=3,
    ),
    _s(
        "recurrent",
        "sampling",
        "a recurrent target (a state per request, no crop) through verification of 3 tokens: the state restored "
        "to the accepted prefix after rejections mid-block (decoders declaring recurrent; toy-only)",
        params=P(max_tokens=4),
        target_recurrent=True,
        draft_distance=0.5,
        vocab_size=3,
    ),
    _s(
        "mixed-batch",
        "mixed",
        "different params and γ in one call; no cross-request leakage",
        members=("temperature-1", "penalties", "stop-spanning"),
    ),
    _s(
        "mixed-kinds",
        "mixed",
        "greedy and sampled, seeded and unseeded requests, different params and γ in one call",
        members=("greedy", "unseeded-law", "gamma-1"),
    ),
    _s(
        "batch-composition",
        "composition",
        "a request's law alone, beside one neighbour, and in large batches of other requests (batch-size paths, "
        "RNG keyed by batch position)",
    ),
    _s(
        "unseeded-law",
        "sampling",
        "the law of unseeded requests (engines often route them through another sampling path)",
        seeded=False,
    ),
    _s(
        "unseeded-collision",
        "collision",
        "independence of identical unseeded requests (shared RNG stream)",
        params=P(max_tokens=3),
    ),
    _s(
        "greedy",
        "greedy",
        "temperature 0: output must equal the target's greedy output",
        core=True,
        alone_prompts=40,
        params=P(temperature=0.0, max_tokens=5),
        draft_distance=1.0,
        draft_seed=21,
    ),
    _s(
        "greedy-gamma-sweep",
        "greedy",
        "greedy at γ 5 to 8 with outputs of 12 tokens: verify rows past 4 and 5 (the γ sweep)",
        params=P(temperature=0.0, max_tokens=12),
        num_draft_tokens=5,
        gammas=(5, 6, 7, 8),
        draft_distance=0.55,
        draft_seed=28,
    ),
    _s(
        "greedy-long-prompts",
        "greedy",
        "greedy prompts of 10 to 30 tokens: a long context (prefilled in chunks, windows, long-range caches)",
        params=P(temperature=0.0, max_tokens=5),
        prompt_lengths=(10, 30),
        draft_distance=1.0,
        draft_seed=29,
    ),
    _s(
        "greedy-ties",
        "greedy",
        "greedy paths crossing exact ties in the target's logits (the lowest index wins; toy-only)",
        params=P(temperature=0.0, max_tokens=5),
        target_ties=0.5,
        draft_distance=1.0,
        draft_seed=30,
    ),
    _s(
        "greedy-sliding-window",
        "greedy",
        "greedy on a target with a 3-token sliding window, outputs of 8 tokens: rollback after the wrap (toy-only)",
        params=P(temperature=0.0, max_tokens=8),
        target_window=3,
        draft_distance=1.0,
        draft_seed=31,
    ),
    _s(
        "greedy-recurrent",
        "greedy",
        "greedy on a recurrent target at γ 2 to 4, outputs of 8 tokens: the state after rejected drafts restored "
        "(decoders declaring recurrent; toy-only)",
        params=P(temperature=0.0, max_tokens=8),
        gammas=(2, 3, 4),
        target_recurrent=True,
        draft_distance=1.0,
        draft_seed=32,
    ),
    _s(
        "greedy-processors",
        "greedy",
        "greedy with penalties and stop strings",
        params=P(temperature=0.0, max_tokens=5, repetition_penalty=1.5, stop=("ab",)),
        draft_distance=1.0,
        draft_seed=22,
        vocab_size=5,
    ),
    _s(
        "greedy-penalties",
        "greedy",
        "greedy with frequency/presence penalty history (rolled back on rejection)",
        params=P(temperature=0.0, max_tokens=5, frequency_penalty=0.8, presence_penalty=0.4, repetition_penalty=1.3),
        draft_distance=1.0,
        draft_seed=23,
        vocab_size=5,
    ),
    _s(
        "greedy-masks",
        "greedy",
        "greedy with bad token ids and min_tokens masking EOS in every row",
        params=P(temperature=0.0, max_tokens=4, min_tokens=2, bad_token_ids=(1,)),
        eos_bias=1.5,
        draft_distance=1.0,
        draft_seed=24,
        vocab_size=5,
    ),
    _s(
        "greedy-min-tokens",
        "greedy",
        "greedy with min_tokens alone: a decoder that does not declare bad_token_ids keeps its greedy mask check",
        params=P(temperature=0.0, max_tokens=5, min_tokens=3),
        eos_bias=1.5,
        draft_distance=1.0,
        draft_seed=26,
        vocab_size=5,
    ),
    _s(
        "greedy-logits-processor",
        "greedy",
        "greedy with a logits processor reading the history (it moves the argmax)",
        params=P(temperature=0.0, max_tokens=5, logits_processors=(parity_processor,)),
        draft_distance=1.0,
        draft_seed=27,
        vocab_size=5,
    ),
    _s(
        "greedy-grammar",
        "greedy",
        "greedy under a grammar with a dead end (mask on drafts and verify, rollback)",
        params=P(temperature=0.0, max_tokens=4, grammar=DEAD_END_GRAMMAR),
        eos_bias=0.0,
        draft_distance=1.0,
        draft_seed=25,
        vocab_size=5,
    ),
]
SCENARIOS = {s.name: s for s in _LIST}
CORE = tuple(s.name for s in _LIST if s.core)


class Matrix(Mapping):
    """A scenario matrix: its scenarios by name, in order, with what the verdict needs to know of it — its ``label``
    in the verdict line ("" for the AR matrices), whether its scenarios have an ``exact_law`` (a user's own
    checkpoints have none) and its ``core`` scenarios (needed for ``exact``)."""

    def __init__(self, scenarios: dict, *, label: str = "", exact_law: bool = True):
        self._scenarios, self.label, self.exact_law = dict(scenarios), label, exact_law

    def __getitem__(self, name: str) -> CertificationScenario:
        return self._scenarios[name]

    def __iter__(self):
        return iter(self._scenarios)

    def __len__(self) -> int:
        return len(self._scenarios)

    @property
    def core(self) -> tuple:
        return tuple(n for n, s in self._scenarios.items() if s.core)

    def position(self, name: str) -> int:
        """The scenario's place in the matrix (shards and reports order by it; unknown names go last)."""
        return self._order().get(name, len(self._scenarios))

    def _order(self) -> dict:
        if not hasattr(self, "_positions"):
            self._positions = {n: i for i, n in enumerate(self._scenarios)}
        return self._positions


def matrix(models: str = ModelFamily.TOY, drafts: str = DraftFamily.AR, pairs: str | None = None) -> Matrix:
    """The scenarios of one model family by name: ``"toy"`` (default) or ``"checkpoint"`` (needs the ``hf`` extra);
    ``drafts`` other than ``"ar"`` gives that draft family's matrix (toy models only, ``matrix_drafts.py``).
    ``pairs`` names the checkpoint pair set (``matrix_checkpoint.PAIR_SETS``; None: the Llama pairs); the toy
    matrices have one set and ignore it."""
    models, drafts = ModelFamily.parse(models, "models"), DraftFamily.parse(drafts, "drafts")
    if models == ModelFamily.CHECKPOINT and drafts == DraftFamily.AR and pairs not in (None, "llama"):
        key = f"{models}:{pairs}"
        if key not in _CACHE:
            from specverify.certification.matrix.checkpoint import checkpoint_matrix

            _CACHE[key] = Matrix(checkpoint_matrix(SCENARIOS, pairs=pairs))
        return _CACHE[key]
    if drafts != DraftFamily.AR:
        if models != ModelFamily.TOY:
            raise InvalidArgument(f"drafts={str(drafts)!r} runs on the toy models only; pass models='toy'.")
        if drafts not in _CACHE:
            from specverify.certification.matrix.drafts import drafts_matrix

            _CACHE[drafts] = Matrix(drafts_matrix(drafts, SCENARIOS), label=f"{drafts} draft")
        return _CACHE[drafts]
    if models == ModelFamily.TOY:
        return TOY_MATRIX
    if models not in _CACHE:
        try:
            from specverify.certification.matrix.checkpoint import checkpoint_matrix
        except ImportError as exc:  # pragma: no cover - the hf extra is missing
            raise InvalidArgument(f"models='checkpoint' needs transformers ({exc}): pip install -e '.[hf]'.") from exc
        _CACHE[models] = Matrix(checkpoint_matrix(SCENARIOS))
    return _CACHE[models]


_CACHE: dict = {}
TOY_MATRIX = Matrix(SCENARIOS)


def matrix_of(pair: PairSpec) -> Matrix:
    """The matrix a scenario's model pair belongs to (its model family, draft family and pair set)."""
    return matrix(pair.family, getattr(pair, "drafts", DraftFamily.AR), getattr(pair, "pair_set", None))


def scenarios_served(pair: str, pairs: str = "llama") -> tuple:
    """(names of the checkpoint scenarios whose model pair is ``pair``, ``{other name: why not}``): what a deployment
    serving that one pair can run (an attached server, docs/servers.md); a mixed scenario counts only when every
    member runs on ``pair``. ``InvalidArgument`` for a pair name outside the set."""
    from specverify.certification.matrix.checkpoint import _SPECS, DEFAULT_PAIR_SET, _pair_set

    chosen = _pair_set(pairs, "pairs")
    if pair not in chosen:
        raise InvalidArgument(f"pair={pair!r} is not a checkpoint pair of the {pairs!r} set: {sorted(chosen)}.")
    served = _SPECS[chosen[pair]]
    names = {spec: name for name, spec in _SPECS.items()}
    keep, other = [], {}
    for name, scenario in matrix("checkpoint", pairs=None if pairs == DEFAULT_PAIR_SET else pairs).items():
        specs = {scenario.pair} | {getattr(m, "pair", scenario.pair) for m in (scenario.members or ())}
        if specs == {served}:
            keep.append(name)
        else:
            runs_on = sorted(names.get(s, "?") for s in specs)
            other[name] = f"runs on the pair {' and '.join(runs_on)}; the deployment serves {pair!r} only"
    return tuple(keep), other


def scenario_names(models: str = ModelFamily.TOY, drafts: str = DraftFamily.AR) -> tuple:
    return tuple(matrix(models, drafts))


def name_problem(name: str, chosen: Matrix) -> str | None:
    """Why ``name`` is not a scenario of the matrix ``chosen`` (None when it is), as a template naming the options
    ``{scenarios}`` and ``{models}`` and the value ``{value}`` (``config.run_config.check_names`` spells them for the
    caller's surface): with a hint, close names, or that the scenario is toy-only."""
    import difflib

    if name in chosen:
        return None
    from specverify.certification.matrix.checkpoint import CONFIGURATION_SCENARIOS

    if name in CONFIGURATION_SCENARIOS:
        return (
            "{scenarios}={value} is a scenario an engine configuration adds to its matrix (EngineConfig.scenarios): "
            "certify a configuration that adds it (--engine-config NAME)."
        )
    if chosen is not TOY_MATRIX and name in SCENARIOS and chosen.exact_law and not chosen.label:
        hint = " It is toy-only (exact zeros or the toy paged pool): run it with {models} toy."
    else:
        close = difflib.get_close_matches(name, chosen, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return "{scenarios}={value} is not a scenario." + hint + " `specverify scenarios` lists them."


def select_scenarios(names: Iterable[str] = (), models: str = ModelFamily.TOY, drafts: str = DraftFamily.AR) -> list:
    """The scenarios named, in the order given (all of the matrix when ``names`` is empty)."""
    chosen = matrix(models, drafts)
    names = (names,) if isinstance(names, str) else tuple(names or ())
    for name in names:
        problem = name_problem(name, chosen)
        if problem:
            raise InvalidArgument(problem.format(scenarios="names", models="models", value=repr(name)))
    return [chosen[n] for n in names] if names else list(chosen.values())


def run_order(scenarios: Iterable[CertificationScenario], gammas=None) -> list:
    """``scenarios`` in the order an engine runs them cheapest: grouped by model pair (pairs in order of first
    appearance, so the first scenario's pair stays first), and within a pair by the γ of their calls.

    An engine such as vLLM fixes γ per engine instance and keeps one live engine, so every change of pair or γ
    between two calls is an engine restart. ``gammas(scenario)`` gives the (first, last) γ of a scenario's calls
    (default: ``(num_draft_tokens, num_draft_tokens)``); the sort is stable on ``(first, last)``, so a scenario
    whose calls go from γ 1 to 4 (greedy) comes after the γ 1 scenarios and before the γ 2 ones. The order never
    changes a result: seeds are keyed by scenario name, and the certificate lists results in matrix order."""
    check(
        gammas is None or callable(gammas), f"gammas={gammas!r} must be None or a function scenario -> (first, last)."
    )
    scenarios = list(scenarios)
    span = gammas or (lambda s: (s.num_draft_tokens, s.num_draft_tokens))
    rank: dict = {}
    for scenario in scenarios:
        rank.setdefault(scenario.pair, len(rank))
    return sorted(scenarios, key=lambda s: (rank[s.pair], *span(s)))
