"""The state-transaction properties on the reference decoder under random schedules, and the paths they reach."""

from collections import Counter

from hypothesis import event, target

from specverify.fuzz.whitebox import reference_runs, run_schedule
from tests.fuzz._budget import PROFILE, fast_and_full

# paths every schedule-level strategy must reach in >= 10 % of examples (the "interesting paths")
MUST_REACH = ("rejection", "bonus", "finish inside block", "stop or EOS inside block", "rollback after fault")
REACHED: Counter = Counter()


@fast_and_full(100, reference_runs())
def test_reference_keeps_every_state_property_under_random_schedules(run):
    workload, schedule = run
    trace = run_schedule(workload, schedule)
    for path in trace.paths:
        event(path)
    target(float(sum(path in trace.paths for path in MUST_REACH)), label="interesting paths reached")
    REACHED["examples"] += 1
    REACHED.update(trace.paths.keys())


def test_schedules_reach_each_interesting_path_in_at_least_ten_percent_of_examples():
    if not REACHED["examples"]:  # run alone: generate the examples here
        test_reference_keeps_every_state_property_under_random_schedules("fast")
    share = {path: REACHED[path] / REACHED["examples"] for path in MUST_REACH}
    assert min(share.values()) >= 0.10, (PROFILE, share)
