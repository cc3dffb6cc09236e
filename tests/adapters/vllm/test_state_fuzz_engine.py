"""State fuzzing on vLLM (issue #25, deliverable 3; ``specverify.fuzz.vllm_engine``): schedules of adds, steps,
cancellations and preemptions driven through vLLM's engine API; every request that finishes has the greedy output it
has without the events. Run from the vLLM venv:

    VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_state_fuzz_engine.py -q
"""

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import specverify as sv  # noqa: E402
from specverify.adapters import vllm as va  # noqa: E402
from specverify.adapters.vllm.mapping import vllm_params  # noqa: E402
from specverify.certification.matrix.checkpoint import configuration_scenarios  # noqa: E402
from specverify.certification.matrix.scenarios import SCENARIOS  # noqa: E402
from specverify.errors import InvalidArgument  # noqa: E402
from specverify.fuzz.vllm_engine import Resubmit, engine_mismatches, law_under_events, run_engine_schedule  # noqa: E402
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Step  # noqa: E402
from specverify.protocol import Request  # noqa: E402

STATE = configuration_scenarios(SCENARIOS)
PAIR = STATE["multi-turn"].models()
GREEDY = sv.SamplingParams(temperature=0.0, max_tokens=12)
# four prompts: the 31-token turn-1 prompt (its KV crosses a 32-token block while decoding), turn 2, two short ones
PROMPTS = [STATE["long-prompt"].prompt, STATE["multi-turn"].prompt, (1, 2, 3), (4, 5)]


@pytest.fixture(scope="module", params=["plain", "draft_model", "eagle"])
def engine(request):
    decoder = getattr(va, request.param)(PAIR.target, PAIR.draft)
    yield decoder.engine(3)
    decoder.close()


def _params(n: int) -> list:
    return [vllm_params(Request(p, GREEDY, 3), PAIR.target.vocab.size) for p in PROMPTS[:n]]


def test_a_written_schedule_preempts_cancels_and_keeps_every_greedy_output(engine):
    schedule = (Step(0), Add(), Step(0), Preempt(0), Step(0), Add(), Step(0), Cancel(2), Step(0), Preempt(1),
                Step(0), Step(0), Add(), Preempt(0), Step(0))  # fmt: skip
    mismatches, run = engine_mismatches(engine, PROMPTS, _params(4), schedule)
    assert run.preempted >= 2 and len(run.cancelled) == 1  # the state events happened (a late one may find none)
    assert len(run.outputs) == 3 and all(len(o) >= 1 for o in run.outputs.values())
    assert mismatches == [], f"greedy outputs changed by the events: {mismatches} (schedule {schedule!r})"


def test_a_cancelled_and_a_finished_request_resubmitted_under_their_ids_keep_their_outputs(engine):
    steps = (Step(0),) * 14  # both requests finish
    schedule = (Step(0), Add(), Step(0), Cancel(0), Resubmit(0), *steps, Resubmit(0), Step(0), Preempt(0), Step(0))
    mismatches, run = engine_mismatches(engine, PROMPTS, _params(4), schedule)
    assert run.resubmitted == 2 and not run.cancelled and not run.skipped
    assert mismatches == [], f"greedy outputs changed by the events: {mismatches} (schedule {schedule!r})"


EVENTS = st.one_of(st.builds(Step, st.just(0)), st.builds(Add), st.builds(Cancel, st.integers(0, 3)),
                   st.builds(Preempt, st.integers(0, 3)), st.builds(Resubmit, st.integers(0, 3)))  # fmt: skip


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schedule=st.lists(EVENTS, min_size=1, max_size=14))
def test_generated_schedules_keep_every_greedy_output(engine, schedule):
    mismatches, run = engine_mismatches(engine, PROMPTS, _params(4), schedule, initial=2)
    assert mismatches == [], f"greedy outputs changed by the events: {mismatches} (schedule {schedule!r})"


def test_bad_arguments_are_refused(engine):
    with pytest.raises(InvalidArgument, match="must be a built vllm.LLM"):
        run_engine_schedule(object(), PROMPTS, _params(4), ())
    with pytest.raises(InvalidArgument, match="equally long"):
        run_engine_schedule(engine, PROMPTS, _params(2), ())
    with pytest.raises(InvalidArgument, match="events are whitebox.schedules"):
        run_engine_schedule(engine, PROMPTS, _params(4), ("step",))
    with pytest.raises(InvalidArgument, match="slot=-1"):
        Resubmit(-1)
    with pytest.raises(InvalidArgument, match="initial=9"):
        run_engine_schedule(engine, PROMPTS, _params(4), (), initial=9)


def test_sampled_outputs_under_events_as_shipped_keep_the_law_only_without_speculation(engine, request):
    """The control of tests/adapters/vllm/test_state_law_engine.py (the same law, events and N), on these as-shipped
    engines: ``plain`` keeps the law; finding 1 makes the speculative methods reject it."""
    from tests.adapters.vllm.test_state_law_engine import BATCH, LAW, NEIGHBOURS, PROMPT, SCHEDULE, N, _seeded

    method = request.node.callspec.params["engine"]
    result = law_under_events(
        engine, PAIR.target, PROMPT, LAW, _seeded, SCHEDULE, n=N, batch=BATCH, neighbours=NEIGHBOURS
    )
    assert result.n >= N and result.tested_preempted >= BATCH and result.cancelled >= 1
    if method == "plain":
        assert not result.rejected, f"plain left the law under events: p={result.pvalue:.3g} {result.impossible[:3]}"
    else:
        assert result.rejected and result.pvalue < 1e-6, f"{method}: finding 1 not seen, p={result.pvalue:.3g}"
