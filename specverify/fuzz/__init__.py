"""Fuzzing speculative decoders: hypothesis strategies, a white-box decoder protocol and the state-transaction
properties (the seed's 状态事务 and 正确性契约), run against the reference or a user's decoder.

Importing this module imports hypothesis (``import specverify`` does not).
"""

from specverify.fuzz.harness import PROPERTIES, PropertyFailure, Trace, run_schedule, run_solo, state_diff
from specverify.fuzz.protocol import (FAULT_KINDS, REQUIRED_COMPONENTS, STANDARD_COMPONENTS, BlockUse, Cancelled,
                                      Fault, InjectedFault, RoundReport, WhiteBoxDecoder, check_white_box)
from specverify.fuzz.reference import ReferenceWhiteBox
from specverify.fuzz.scenarios import reference_runs, reference_scenarios, schedules, steps, toy_family
from specverify.fuzz.schedules import Add, Cancel, Preempt, Resume, Scenario, Step
from specverify.fuzz.laws import (RoundPlan, batch_outcomes, check_batch_independence, check_law,
                                  preempt_every_round, sample_outcomes, switch_every_round)
from specverify.fuzz.strategies import (gamma_sequences, law_pairs, probability_vectors, prompts, requests,
                                        sampling_params, stop_sets, toy_grammars)

__all__ = [
    "Add", "BlockUse", "RoundPlan", "batch_outcomes", "check_batch_independence", "check_law", "preempt_every_round",
    "sample_outcomes", "switch_every_round", "requests", "Cancel", "Cancelled", "FAULT_KINDS", "Fault", "InjectedFault", "PROPERTIES", "Preempt",
    "PropertyFailure", "REQUIRED_COMPONENTS", "ReferenceWhiteBox", "Resume", "RoundReport", "STANDARD_COMPONENTS",
    "Scenario", "Step", "Trace", "WhiteBoxDecoder", "check_white_box", "gamma_sequences", "law_pairs",
    "probability_vectors", "prompts", "reference_runs", "reference_scenarios", "run_schedule", "run_solo", "sampling_params",
    "schedules", "state_diff", "steps", "stop_sets", "toy_family", "toy_grammars",
]
