"""Several decoder calls sent to the worker in one message (``ProcessRunner.calls``, ``Session.call_each``, used by
batch composition's calls of one and two requests): the decoder sees the same calls and returns the same
completions as one call per message; a failure stops the batch at that call, leaves nothing in the pipe, and is
reported in call order; under a deadline (``--budget``) the calls go one at a time, as before."""

import pytest

from specverify.certification.checks.composition import small_call_shape
from specverify.certification.matrix.scenarios import matrix
from specverify.certification.run.collect import Session
from specverify.certification.run.context import BudgetSpent, Deadline
from specverify.certification.run.runner import DecoderFailure, InProcessRunner, ProcessRunner
from specverify.errors import InvalidArgument, ProtocolViolation
from specverify.protocol import Completion, Request

F = "tests.certification.fault_decoders"


def _pair_and_calls(n, temperature=None):
    scenario = matrix("toy")["batch-composition"]
    shape = small_call_shape(scenario)
    params = shape.params if temperature is None else type(shape.params)(temperature=temperature)
    calls = [[Request(shape.prompt, params, shape.num_draft_tokens, seed=i)] for i in range(n)]
    calls += [
        [Request(shape.prompt, params, shape.num_draft_tokens, seed=100 + 2 * i + j) for j in (0, 1)] for i in range(n)
    ]
    return scenario.models(), calls


@pytest.mark.parametrize("runner_class", [InProcessRunner, ProcessRunner])
def test_calls_at_once_return_what_calls_one_by_one_return(runner_class):
    pair, calls = _pair_and_calls(40)
    runner = runner_class("specverify.reference:make_decoder")
    try:
        runner.request("make", "k", pair.target, pair.draft)
        one_by_one = [runner.request("call", "k", requests) for requests in calls]
        at_once, failure = runner.calls("k", calls)
    finally:
        runner.close()
    assert failure is None
    assert [len(c) for c in at_once] == [len(r) for r in calls]
    assert at_once == one_by_one  # seeded requests: the same completions, call by call


def test_a_failing_call_stops_the_batch_there_and_leaves_no_answer_behind():
    pair, calls = _pair_and_calls(3)
    runner = ProcessRunner(f"{F}:raises_on_third_call", timeout_s=60)
    try:
        runner.request("make", "k", pair.target, pair.draft)
        answers, failure = runner.calls("k", calls[:5])
        assert len(answers) == 2, "the two calls before the failing one are answered"
        assert isinstance(failure, DecoderFailure) and "engine error on call 3" in failure.reason
        # the worker made no call after the failure: the next call's answer is its own (three requests, where
        # the batch's calls after the failure held one or two)
        assert len(runner.request("call", "k", calls[4] + calls[0])) == 3
    finally:
        runner.close()


def test_a_hang_inside_a_batch_is_killed_at_the_per_call_timeout_and_named():
    pair, greedy = _pair_and_calls(1, temperature=0.0)
    _, sampled = _pair_and_calls(1, temperature=1.0)
    runner = ProcessRunner(f"{F}:hangs", timeout_s=2.0)
    try:
        runner.request("make", "k", pair.target, pair.draft)
        answers, failure = runner.calls("k", [greedy[0], sampled[0], greedy[1]])
    finally:
        runner.close()
    assert len(answers) == 1
    assert isinstance(failure, DecoderFailure)
    assert "hang: no answer within 2 s" in failure.reason and "call 2 of 3 sent at once" in failure.reason


class _Recording:
    """A runner double: records each op, answers calls with ``answer(requests)``; ``calls`` ends with ``failure``."""

    def __init__(self, answer, failure=None):
        self.answer, self.failure, self.ops = answer, failure, []

    def request(self, op, spec, *args):
        self.ops.append(op)
        return self.answer(args[0])

    def calls(self, spec, batches):
        self.ops.append(f"calls {len(batches)}")
        return [self.answer(b) for b in batches], self.failure


class _Handle:
    class pair:
        spec = "k"
        vocab = matrix("toy")["batch-composition"].models().target.vocab

    reports_metrics = False


def test_session_reports_an_earlier_calls_protocol_violation_before_a_later_calls_crash():
    _, calls = _pair_and_calls(2)
    runner = _Recording(lambda requests: [Completion((), "length")], failure=DecoderFailure("crash in call 3"))
    with pytest.raises(ProtocolViolation) as info:
        Session(runner).call_each(_Handle, calls[:2])
    assert not isinstance(info.value, DecoderFailure)  # the violation of call 1, not call 3's crash
    assert runner.ops == ["calls 2"]


def test_session_raises_the_runners_failure_after_checking_the_calls_before_it():
    pair, calls = _pair_and_calls(2)
    reference = InProcessRunner("specverify.reference:make_decoder")
    reference.request("make", "k", pair.target, pair.draft)
    good = _Recording(lambda requests: reference.request("call", "k", requests), failure=DecoderFailure("crash"))
    with pytest.raises(DecoderFailure, match="crash"):
        Session(good).call_each(_Handle, calls)
    reference.close()


def test_under_a_deadline_calls_go_one_at_a_time_and_stop_when_the_budget_is_spent():
    _, calls = _pair_and_calls(2)
    clock = iter([0.0, 0.5, 2.0, 3.0]).__next__
    inner = _Recording(lambda requests: ["answer"] * len(requests))
    deadline = Deadline(inner, end=1.0, clock=clock)
    with pytest.raises(BudgetSpent):
        deadline.calls("k", calls)
    assert inner.ops == ["call", "call"], "two calls before the deadline, none sent at once"
    inner.ops.clear()
    assert Deadline(inner).calls("k", calls[:3])[1] is None and inner.ops == ["calls 3"]


def test_each_call_wants_a_callable():
    from specverify.certification.run.runner import each_call

    with pytest.raises(InvalidArgument, match="call=None must be callable"):
        each_call(None, [])


def test_batch_composition_decides_the_same_in_the_worker_as_in_process():
    from specverify import certify

    run = dict(level="quick", seed=3, scenarios=["batch-composition"])
    results = [
        {
            s.name: (s.n, s.statistic, s.pvalue)
            for s in certify("specverify.reference:make_decoder", **run, isolation=i).scenarios
        }
        for i in ("none", "process")
    ]
    assert results[0] == results[1] and len(results[0]) == 3


def test_session_sends_calls_at_once_in_messages_of_at_most_calls_at_once_and_stops_at_a_failure():
    from specverify.certification.run.collect import CALLS_AT_ONCE

    pair, calls = _pair_and_calls(CALLS_AT_ONCE)  # 2 × CALLS_AT_ONCE calls
    reference = InProcessRunner("specverify.reference:make_decoder")
    reference.request("make", "k", pair.target, pair.draft)
    runner = _Recording(lambda requests: reference.request("call", "k", requests))
    got = Session(runner).call_each(_Handle, calls + calls[:3])
    assert runner.ops == [f"calls {CALLS_AT_ONCE}", f"calls {CALLS_AT_ONCE}", "calls 3"]
    assert [len(c) for c in got] == [len(r) for r in calls + calls[:3]]
    failing = _Recording(lambda requests: reference.request("call", "k", requests), failure=DecoderFailure("crash"))
    with pytest.raises(DecoderFailure, match="crash"):
        Session(failing).call_each(_Handle, calls)
    assert failing.ops == [f"calls {CALLS_AT_ONCE}"], "no message after the one whose call failed"
    reference.close()
