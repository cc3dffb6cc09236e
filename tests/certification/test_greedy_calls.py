"""Engine-aware plans (issue #24): the run order by (pair, γ), the greedy scenarios of a pair in shared calls, and the
optional ``decoder.fixed_gamma`` declaration. A recording decoder counts the calls; results must not change."""

import pytest

from specverify import certify
from specverify.certification.checks.greedy import GREEDY_GAMMAS
from specverify.certification.matrix.scenarios import matrix, run_order
from specverify.errors import InvalidArgument
from specverify.protocol import Completion, fixed_gamma_of
from specverify.reference import make_decoder
from tests.extras import needs_hf

TOY = matrix("toy")
CKPT = matrix("checkpoint")
SAME_PAIR = ["greedy-processors", "greedy-penalties"]  # one checkpoint pair (main); on the toy family, two pairs


class Recording:
    """The reference decoder, recording each call's γ list."""

    def __init__(self, target, draft, corrupt_after=None):
        self.inner = make_decoder(target, draft)
        self.capabilities = self.inner.capabilities
        self.calls = []
        self.requests = []  # every request received, in order
        self.corrupt_after = corrupt_after  # break the protocol (a token past EOS) in calls after this many

    def __call__(self, requests):
        self.calls.append([r.num_draft_tokens for r in requests])
        self.requests += list(requests)
        out = list(self.inner(requests))
        if self.corrupt_after is not None and len(self.calls) > self.corrupt_after:
            out[-1] = Completion(out[-1].tokens + (99,), out[-1].finish_reason)
        return out


def _certify(names, models="toy", **kw):
    made = []

    def factory(target, draft):
        made.append(Recording(target, draft, **kw))
        return made[-1]

    return certify(factory, scenarios=names, level="quick", isolation="none", models=models), made


def test_run_order_groups_by_pair_then_gamma_and_keeps_the_first_pair_first():
    chosen = [
        TOY[n] for n in ("temperature-1", "eos-in-block", "gamma-5", "gamma-1", "greedy", "max-tokens-not-multiple")
    ]
    order = run_order(chosen)
    pairs = [s.pair for s in order]
    assert pairs[0] == chosen[0].pair and pairs == sorted(pairs, key=[s.pair for s in chosen].index)
    same = [s for s in order if s.pair == chosen[0].pair]
    assert [s.num_draft_tokens for s in same] == sorted(s.num_draft_tokens for s in same)
    spans = {"greedy": (1, 4)}
    order = run_order(chosen, gammas=lambda s: spans.get(s.name, (s.num_draft_tokens,) * 2))
    assert sorted(order, key=lambda s: s.name) == sorted(chosen, key=lambda s: s.name)  # a permutation
    with pytest.raises(InvalidArgument, match="gammas=3"):
        run_order(chosen, gammas=3)


def test_results_stay_in_matrix_order_whatever_the_run_order():
    names = ["gamma-5", "temperature-1", "gamma-1", "eos-in-block"]
    cert, _ = _certify(names)
    assert [r.scenario for r in cert.scenarios] == names


@needs_hf
def test_the_greedy_scenarios_of_a_pair_share_their_calls_and_still_pass():
    assert CKPT[SAME_PAIR[0]].pair == CKPT[SAME_PAIR[1]].pair
    cert, made = _certify(SAME_PAIR, models="checkpoint")
    (decoder,) = made
    assert all(r.passed for r in cert.scenarios), [r.note for r in cert.scenarios]
    sizes = [r.n for r in cert.scenarios]
    big = [c for c in decoder.calls if len(c) > 3]  # the reproducibility check's calls hold 1 or 3 requests
    first = [len(c) for c in decoder.calls].index(len(big[0]))
    sent = decoder.requests[sum(len(c) for c in decoder.calls[:first]) :][: len(big[0])]
    assert len(big) == 1 and len(set(sent)) == len(sent) < sum(sizes), (sizes, [len(c) for c in decoder.calls])
    assert set(big[0]) == set(GREEDY_GAMMAS)  # not fixed-γ: each scenario's interleaved γ kept


def test_identical_greedy_requests_are_answered_once_batched_and_once_alone():
    """Greedy output is a function of the request: a repeat of (prompt, params, γ) in the pair's shared call, or
    among the prompts sent alone, reuses the first answer, and every scenario still compares all its prompts."""
    cert, (decoder, *_) = _certify(["greedy"])
    batched = [r for c, r in _by_call(decoder) if len(c) > 3]
    alone = [r for c, r in _by_call(decoder) if len(c) == 1]
    assert len(set(batched)) == len(batched) and len(set(alone)) == len(alone), "a repeat was sent again"
    assert cert.scenarios[0].n == 120 > len(batched) and cert.scenarios[0].passed  # repeats compared, not sent


def _by_call(decoder) -> list:
    """``(call's γ list, request)`` for every request the decoder received."""
    out, k = [], 0
    for call in decoder.calls:
        out += [(call, r) for r in decoder.requests[k : k + len(call)]]
        k += len(call)
    return out


def test_prompts_sent_alone_are_ordered_by_gamma():
    cert, made = _certify(["greedy"])
    alone = [c[0] for c in made[0].calls if len(c) == 1]
    assert len(alone) == TOY["greedy"].alone_prompts and alone == sorted(alone)
    assert cert.scenarios[0].passed and "batched and alone" in cert.scenarios[0].note


@needs_hf
def test_a_greedy_bug_fails_the_same_scenarios_in_shared_calls_as_alone():
    bug, kw = "specverify.zoo:penalties_ignored_in_verify", dict(level="quick", isolation="none", models="checkpoint")
    shared = certify(bug, scenarios=SAME_PAIR, **kw)
    alone = [certify(bug, scenarios=[n], **kw).scenarios[0] for n in SAME_PAIR]
    assert [r.passed for r in shared.scenarios] == [r.passed for r in alone]
    assert [r.mismatches for r in shared.scenarios] == [r.mismatches for r in alone]
    assert shared.verdict == "approximate" and False in [r.passed for r in alone]


@needs_hf
def test_a_violation_in_a_shared_call_names_the_scenarios_that_shared_it():
    cert, _ = _certify(SAME_PAIR, models="checkpoint", corrupt_after=0)
    assert cert.verdict == "invalid"
    assert "shared by the greedy scenarios" in cert.reason and all(n in cert.reason for n in SAME_PAIR), cert.reason


def test_fixed_gamma_is_an_optional_bool():
    class Plain:
        pass

    class Fixed:
        fixed_gamma = True

    class Wrong:
        fixed_gamma = "yes"

    assert fixed_gamma_of(Plain()) is False and fixed_gamma_of(Fixed()) is True
    with pytest.raises(InvalidArgument, match="fixed_gamma='yes'"):
        fixed_gamma_of(Wrong())


@needs_hf
def test_shared_greedy_answers_live_in_their_run_and_die_with_it():
    from specverify.certification import checks
    from specverify.certification.config.run_config import RunConfig
    from specverify.certification.run.collect import Session
    from specverify.certification.run.context import AlphaPlan, Run
    from specverify.certification.run.runner import make_runner

    made = []

    def factory(target, draft):
        made.append(Recording(target, draft))
        return made[-1]

    config = RunConfig.create(
        factory=factory, scenarios=SAME_PAIR, level="quick", isolation="none", models="checkpoint"
    )
    session = Session(make_runner(config.factory, config))
    plan = AlphaPlan(config.alpha, config.level.epsilon, config.power, checks.num_tests(CKPT))
    first, second = (Run(config, CKPT, plan, session) for _ in range(2))  # two runs on one session
    greedy = checks.CHECKS[CKPT[SAME_PAIR[0]].kind]
    assert greedy.run(first, CKPT[SAME_PAIR[0]])[0].passed
    assert set(first.greedy_answers) == {SAME_PAIR[1]} and second.greedy_answers == {}  # the other's, kept by its run
    calls = len(made[0].calls)
    assert greedy.run(second, CKPT[SAME_PAIR[1]])[0].passed and len(made[0].calls) > calls  # a new run calls anew
    calls = len(made[0].calls)
    assert greedy.run(first, CKPT[SAME_PAIR[1]])[0].passed and len(made[0].calls) == calls  # answered by its run
    assert first.greedy_answers == {} and set(second.greedy_answers) == {SAME_PAIR[0]}  # its own prediction
