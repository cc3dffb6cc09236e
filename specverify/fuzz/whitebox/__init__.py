"""The white-box harness: drive a decoder round by round, look inside its state, and check the state transaction.

The seed's 状态事务 and 正确性契约: after every round the request's state (KV of both models, tokens, RNG counter,
penalty history, grammar and stop-matcher state, stream cursor, finish reason) equals the state built from scratch
from the committed tokens; a round that fails leaves the state it found; provisional blocks are never shared or
published and every block comes back; streams never repeat; seeded output does not depend on the batch, faults,
cancellations or preemptions around it. A decoder opts in by implementing ``WhiteBoxDecoder``;
``ReferenceWhiteBox`` is the reference behind it, and ``mutants`` holds one deliberately broken decoder per property.

- protocol: ``WhiteBoxDecoder``, ``RoundReport``, ``BlockUse``, ``Fault`` / ``FAULT_KINDS``, ``InjectedFault``,
  ``Cancelled``, ``check_white_box``.
- schedules: ``Workload`` (seeded requests + a decoder factory) and the events ``Step``, ``Cancel``, ``Preempt``,
  ``Resume``, ``Add``; strategies ``schedules``, ``steps``, ``reference_workloads``, ``reference_runs``.
- ``run_schedule`` checks ``PROPERTIES``; ``sample_outcomes`` with ``switch_every_round`` / ``preempt_every_round``
  feeds ``specverify.fuzz.check_law``.
- submodules (imported on use): ``mutants``, ``paged`` (paged KV under random operations), ``recurrent``
  (recurrent-state replay).

The public, black-box part (strategies of inputs, law and batch properties) is ``specverify.fuzz``. Importing this
package imports hypothesis.
"""

from specverify.fuzz.whitebox.harness import PROPERTIES, Trace, run_schedule, run_solo, state_diff
from specverify.fuzz.whitebox.laws import RoundPlan, preempt_every_round, sample_outcomes, switch_every_round
from specverify.fuzz.whitebox.protocol import (
    FAULT_KINDS,
    REQUIRED_COMPONENTS,
    STANDARD_COMPONENTS,
    BlockUse,
    Cancelled,
    Fault,
    InjectedFault,
    RoundReport,
    WhiteBoxDecoder,
    check_white_box,
)
from specverify.fuzz.whitebox.reference import ReferenceWhiteBox
from specverify.fuzz.whitebox.schedules import Add, Cancel, Preempt, Resume, Step, Workload
from specverify.fuzz.whitebox.strategies import reference_runs, reference_workloads, schedules, steps, toy_family

__all__ = [
    # protocol
    "WhiteBoxDecoder",
    "RoundReport",
    "BlockUse",
    "Fault",
    "FAULT_KINDS",
    "InjectedFault",
    "Cancelled",
    "REQUIRED_COMPONENTS",
    "STANDARD_COMPONENTS",
    "check_white_box",
    # what a schedule runs on, and its events
    "Workload",
    "Step",
    "Cancel",
    "Preempt",
    "Resume",
    "Add",
    # the harness
    "PROPERTIES",
    "Trace",
    "run_schedule",
    "run_solo",
    "state_diff",
    # laws under interruptions
    "RoundPlan",
    "sample_outcomes",
    "switch_every_round",
    "preempt_every_round",
    # the reference and strategies over it
    "ReferenceWhiteBox",
    "schedules",
    "steps",
    "reference_workloads",
    "reference_runs",
    "toy_family",
]
