"""The ``greedy`` check: temperature 0 on many prompts, compared exactly — with the target's greedy output where the
matrix has an exact law, else (a user's own checkpoints) with the ``--against`` decoder's output."""

from __future__ import annotations

import time

import numpy as np

from specverify.certification.checks.judge import MIN_MARGIN
from specverify.certification.collect import scenario_seed
from specverify.certification.evidence import ScenarioResult
from specverify.certification.laws import greedy_of
from specverify.enums import ModelFamily, ScenarioKind
from specverify.protocol import Request

__all__ = ["GreedyCheck", "GREEDY_PROMPTS", "MIN_DISAGREEMENT"]

GREEDY_PROMPTS = 120
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

    def run(self, run, scenario) -> list:
        if not run.matrix.exact_law:
            return [_against_other(run, scenario)]
        started = time.perf_counter()
        handle = run.session.decoder(scenario)
        target, draft = handle.pair.target, handle.pair.draft
        requests = [Request(p, scenario.params, 1 + i % 4) for i, p in enumerate(_prompts(run, scenario, target))]
        mismatches, histories = [], []
        chunk = handle.requests_per_call(len(requests))
        answers = [("", pair) for pair in run.session.call_in_chunks(handle, requests, chunk)]
        if "batch" in handle.capabilities:  # some prompts alone too: batch-size code paths must agree (bugs.md)
            answers += [(" (alone)", (r, run.session.call(handle, [r])[0])) for r in requests[: scenario.alone_prompts]]
        for how, (req, comp) in answers:
            want = greedy_of(scenario, req.prompt, req.params)
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


def _prompts(run, scenario, target) -> list:
    if scenario.prompts:
        return list(scenario.prompts)
    rng = np.random.default_rng(scenario_seed(run.seed, scenario.name) % 2**32)
    tokens = [t for t in range(target.vocab.size) if t != target.vocab.eos_token_id]
    prompts = [tuple(int(t) for t in rng.choice(tokens, size=int(rng.integers(1, 6)))) for _ in range(GREEDY_PROMPTS)]
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
