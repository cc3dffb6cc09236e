"""The ``greedy`` check: temperature 0 on many prompts, compared exactly — with the target's greedy output where the
matrix has an exact law, else (a user's own checkpoints) with the ``--against`` decoder's output.

**Shared calls.** The greedy scenarios of one model pair are not statistical tests, so their requests may share
calls: the first greedy scenario of a pair to run sends the requests of every greedy scenario of that pair the run
will run (:func:`_pair_group`), and each scenario then compares its own completions. Requests are sent γ by γ
(``GREEDY_GAMMAS``, or the scenario's own ``gammas``: the γ sweep): for each γ the batched requests of all those
scenarios (one call where the decoder takes them), then that γ's prompts sent alone. A decoder that declares
``fixed_gamma`` (vLLM: one engine per γ) thus starts one engine per (pair, γ) for all its greedy scenarios, where it
restarted at every change of γ (four per call, and one per prompt sent alone). For other decoders each scenario's
requests keep their interleaved γ in one call and only the calls of one request are ordered by γ. A protocol
violation in a shared call is reported on the scenario that made it, naming the others; a scenario the prediction
missed makes its own calls. The answers wait in the run (``Run.greedy_answers``), so nothing outlives it."""

from __future__ import annotations

import time

import numpy as np

from specverify.certification.checks.judge import MIN_MARGIN, unfit_for_float32
from specverify.certification.matrix.laws import greedy_many
from specverify.certification.results.evidence import ScenarioResult
from specverify.certification.run.collect import scenario_seed
from specverify.enums import ModelFamily, ScenarioKind
from specverify.errors import ProtocolViolation
from specverify.protocol import Request

__all__ = ["GreedyCheck", "GREEDY_PROMPTS", "GREEDY_GAMMAS", "MIN_DISAGREEMENT", "gammas_of"]

GREEDY_PROMPTS = 120
GREEDY_GAMMAS = (1, 2, 3, 4)  # docs/design.md: the greedy scenarios send γ 1 to 4 whatever the scenario's γ
MIN_DISAGREEMENT = 0.3  # docs/design.md: the greedy draft's argmax must often disagree with the target's


class GreedyCheck:
    """Exact comparison on ``GREEDY_PROMPTS`` prompts (drafts that disagree with the target's argmax at ≥ 30 % of
    positions); batch decoders also answer some prompts alone. Not a statistical test: no share of α."""

    kind = ScenarioKind.GREEDY

    def uses_other(self, run) -> bool:
        return not run.matrix.exact_law  # a user pair: compared with the --against decoder

    def requires(self, scenario, matrix) -> frozenset:
        return scenario.needs()

    def num_tests(self, scenario) -> int:
        return 0

    def planned_size(self, run, scenario) -> int:
        return len(scenario.prompts) or GREEDY_PROMPTS

    def gamma_span(self, scenario) -> tuple:
        """The (first, last) γ of its calls (the run order: ``scenarios.run_order``)."""
        gammas = gammas_of(scenario)
        return gammas[0], gammas[-1]

    def run(self, run, scenario) -> list:
        if not run.matrix.exact_law:
            return [_against_other(run, scenario)]
        started = time.perf_counter()
        handle = run.session.decoder(scenario)
        target, draft = handle.pair.target, handle.pair.draft
        answers = _answers(run, scenario, handle)
        mismatches, histories = [], []
        requests = [req for how, (req, _) in answers if not how]
        # every request carries scenario.params (_requests): one batched oracle walk for all its prompts
        wants = greedy_many(scenario, [req.prompt for _, (req, _) in answers], scenario.params)
        for (how, (req, comp)), want in zip(answers, wants):
            if not how:
                histories += [req.prompt + want[0][:i] for i in range(len(want[0]))]
            if (comp.tokens, comp.finish_reason) != want:
                mismatches.append(
                    f"prompt {list(req.prompt)} γ={req.num_draft_tokens}{how}: got {list(comp.tokens)} "
                    f"{comp.finish_reason}, greedy target gives {list(want[0])} {want[1]}"
                )
        agree = target.logits(histories).argmax(-1) == draft.logits(histories).argmax(-1)
        rate = int((~agree).sum()) / max(len(histories), 1)
        note = (
            f"{len(requests)} prompts{' (batched and alone)' if len(answers) > len(requests) else ''}; draft argmax "
            f"disagrees with the target at {rate:.0%} of positions (needs ≥ {MIN_DISAGREEMENT:.0%} to exercise "
            f"rejections: {'ok' if rate >= MIN_DISAGREEMENT else 'TOO LOW'})"
        )
        return [_result(run, scenario, mismatches, len(requests), note, started)]


def gammas_of(scenario) -> tuple:
    """The γ values a greedy scenario's requests take in turn: its own ``gammas`` (the γ sweep), else
    ``GREEDY_GAMMAS``."""
    return tuple(scenario.gammas) or GREEDY_GAMMAS


def _requests(run, scenario, target) -> list:
    """The scenario's greedy requests: its prompts at γ 1, 2, 3, 4, 1, ... (``gammas_of`` in turn)."""
    gammas = gammas_of(scenario)
    return [Request(p, scenario.params, gammas[i % len(gammas)]) for i, p in enumerate(_prompts(run, scenario, target))]


def _answers(run, scenario, handle) -> list:
    """``[(how, (request, completion))]``: the scenario's requests ("") and its prompts sent alone (" (alone)"),
    from the pair's shared calls (module docstring), made now if no earlier greedy scenario made them."""
    shared = run.greedy_answers  # the run's: {scenario name: answers} of run.session (certification/run.py)
    if scenario.name not in shared:
        group = [s for s in _pair_group(run, scenario, handle) if s.name not in shared] or [scenario]
        if scenario not in group:
            group.insert(0, scenario)
        try:
            shared.update(_shared_calls(run, handle, group))
        except ProtocolViolation as exc:
            if len(group) == 1:
                raise
            others = ", ".join(s.name for s in group if s is not scenario)
            raise ProtocolViolation(
                f"{exc} (in a call shared by the greedy scenarios of this pair: {scenario.name}, {others}; "
                f"reproduce with --scenario for each of them)"
            ) from None
    return shared.pop(scenario.name)


def _pair_group(run, scenario, handle) -> list:
    """The greedy scenarios of ``scenario``'s pair that this process will run (``run.here``, else the run's
    selection; the gates predicted), in matrix order."""
    config, matrix = run.config, run.matrix
    chosen = run.here if run.here is not None else (set(config.scenarios) if config.scenarios else set(matrix))
    group = []
    for other in matrix.values():
        if other.kind != ScenarioKind.GREEDY or other.pair != scenario.pair or other.name not in chosen:
            continue
        if not other.needs() <= handle.capabilities or unfit_for_float32(other, matrix):
            continue
        group.append(other)
    return group


def _shared_calls(run, handle, group) -> dict:
    """Every request of the greedy scenarios ``group`` (one pair): γ by γ for a decoder that fixes γ per engine
    (``handle.fixed_gamma``), each γ's prompts sent alone right after its batched calls; else every scenario's
    interleaved requests in the same calls, then the prompts sent alone, by γ."""
    session, target = run.session, handle.pair.target
    own = {s.name: _requests(run, s, target) for s in group}
    alone = {s.name: own[s.name][: s.alone_prompts] if "batch" in handle.capabilities else [] for s in group}
    tagged = [(s.name, i, r) for s in group for i, r in enumerate(own[s.name])]
    every = tuple(sorted({g for s in group for g in gammas_of(s)}))
    if getattr(handle, "fixed_gamma", False):
        steps = [([t for t in tagged if t[2].num_draft_tokens == g], (g,)) for g in every]
    else:
        steps = [(tagged, every)]
    done = {s.name: {} for s in group}
    for part, gammas in steps:
        chunk = handle.requests_per_call(max(len(part), 1))
        answers = _answered_once(session, handle, [t[2] for t in part], chunk)
        for (name, i, _), comp in zip(part, answers):
            done[name][i] = comp
        alone_answers: dict = {}  # an identical greedy request sent alone again is answered once
        for g in gammas:
            for s in group:
                for i, r in enumerate(alone[s.name]):
                    if r.num_draft_tokens == g:
                        key = _key(r, (s.name, i))
                        if key not in alone_answers:
                            alone_answers[key] = session.call(handle, [r])[0]
                        done[s.name][("alone", i)] = alone_answers[key]
    return {
        s.name: [("", (r, done[s.name][i])) for i, r in enumerate(own[s.name])]
        + [(" (alone)", (r, done[s.name][("alone", i)])) for i, r in enumerate(alone[s.name])]
        for s in group
    }


def _answered_once(session, handle, requests: list, chunk: int) -> list:
    """A completion per request of ``requests``, each distinct request sent once (in calls of at most ``chunk``, in
    order of first occurrence): greedy output is a function of the request, so a repeat reuses its answer."""
    keys = [_key(r, j) for j, r in enumerate(requests)]
    first: dict = {}
    for j, key in enumerate(keys):
        first.setdefault(key, j)
    sent = [requests[j] for j in first.values()]
    answers = dict(zip(first, (c for _, c in session.call_in_chunks(handle, sent, chunk))))
    return [answers[key] for key in keys]


def _key(request, fallback) -> object:
    """The key identical greedy requests share (prompt, params, γ, seed: the same request answers once, its output
    being a function of it); ``fallback`` for a request whose params cannot be a key (a grammar holds dicts)."""
    key = (request.prompt, request.params, request.num_draft_tokens, request.seed)
    try:
        hash(key)
    except TypeError:
        return ("unhashable", fallback)
    return key


def _prompts(run, scenario, target) -> list:
    if scenario.prompts:
        return list(scenario.prompts)
    rng = np.random.default_rng(scenario_seed(run.seed, scenario.name) % 2**32)
    tokens = [t for t in range(target.vocab.size) if t != target.vocab.eos_token_id]
    low, high = scenario.prompt_lengths
    sizes = (int(rng.integers(low, high + 1)) for _ in range(GREEDY_PROMPTS))
    prompts = [tuple(int(t) for t in rng.choice(tokens, size=size)) for size in sizes]
    if scenario.pair.family != ModelFamily.TOY:  # float32 engines: keep only prompts with a clear greedy argmax
        from specverify.oracles.law import boundary_margin

        prompts = [p for p in prompts if boundary_margin(target, p, scenario.params) >= MIN_MARGIN]
    return prompts


def _against_other(run, scenario) -> ScenarioResult:
    """No exact law: the speculative path's greedy output against the ``--against`` decoder's, prompt by prompt."""
    started = time.perf_counter()
    prompts = list(scenario.prompts)
    answers = []
    for session in (run.session, run.other):
        handle = session.decoder(scenario)
        requests = [Request(p, scenario.params, 1 + i % 3) for i, p in enumerate(prompts)]
        answers.append([session.call(handle, [r])[0] for r in requests])
    mismatches = [
        f"prompt {list(p)}: speculative {list(a.tokens)} {a.finish_reason}, {run.config.against} {list(b.tokens)} "
        f"{b.finish_reason}"
        for p, a, b in zip(prompts, *answers)
        if (a.tokens, a.finish_reason) != (b.tokens, b.finish_reason)
    ]
    note = f"{len(prompts)} prompts, speculative output equals the {run.config.against} path's output"
    return _result(run, scenario, mismatches, len(prompts), "; ".join(mismatches[:3]) or note, started)


def _result(run, scenario, mismatches, n, note, started) -> ScenarioResult:
    return ScenarioResult(
        scenario=scenario.name,
        kind=ScenarioKind.GREEDY,
        exercises=scenario.exercises,
        covered=True,
        passed=not mismatches,
        n=n,
        planned_n=n,
        note=note,
        mismatches=tuple(mismatches[:5]),
        reproduce=run.reproduce(scenario),
        elapsed_s=time.perf_counter() - started,
    )
