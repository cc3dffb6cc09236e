"""The white-box protocol, the reference adapter's bad-input handling, and a finding about the bare reference."""

from functools import partial

import pytest

from specverify.errors import InvalidArgument
from specverify.fuzz import PropertyFailure
from specverify.fuzz.whitebox import (
    STANDARD_COMPONENTS,
    Fault,
    ReferenceWhiteBox,
    Step,
    WhiteBoxDecoder,
    Workload,
    check_white_box,
    run_schedule,
    state_diff,
    toy_family,
)
from specverify.fuzz.whitebox.reference import InjectedOutOfBlocks
from specverify.params import SamplingParams
from specverify.protocol import Request
from specverify.reference.paged import OutOfBlocks
from specverify.reference.transactional import TransactionalDecoder

TARGET, DRAFTS = toy_family(6, 1, (0.6, 1.0))
REQUEST = Request((0, 1, 2), SamplingParams(max_tokens=5, stop=("ab",)), 1, seed=3)


def box(**options):
    return ReferenceWhiteBox(TARGET, DRAFTS, **{"block_size": 2, "num_blocks": 64, **options})


def test_reference_implements_the_protocol_with_the_standard_components():
    decoder = box()
    assert isinstance(decoder, WhiteBoxDecoder) and check_white_box(decoder) == decoder.faults
    handle = decoder.open(REQUEST, 3)
    assert tuple(decoder.state(handle)) == STANDARD_COMPONENTS
    assert state_diff(decoder.rebuild(REQUEST, (), finish_reason=None), decoder.state(handle)) == {}
    decoder.close(handle)
    assert decoder.num_free_blocks() == 64


def test_a_failed_round_is_rolled_back_and_the_request_continues_unchanged():
    decoder = box(block_size=1)
    handle = decoder.open(REQUEST, 3)
    before, free = decoder.state(handle), decoder.num_free_blocks()
    with pytest.raises(InjectedOutOfBlocks):
        decoder.step(handle, num_draft_tokens=3, fault=Fault("alloc_failure", after=1))
    assert state_diff(before, decoder.state(handle)) == {} and decoder.num_free_blocks() == free
    assert isinstance(InjectedOutOfBlocks("x"), OutOfBlocks)  # engines that catch OutOfBlocks see it as one


def test_bad_input_raises_invalid_argument_with_name_value_and_fix():
    decoder = box()
    with pytest.raises(InvalidArgument, match=r"kind='oom' must be one of"):
        Fault("oom")
    with pytest.raises(InvalidArgument, match=r"during='later' must be one of"):
        Step(0, during="later")
    with pytest.raises(InvalidArgument, match=r"initial=3 must lie in \[1, 1\]"):
        Workload(make=box, requests=(REQUEST,), initial=3)
    with pytest.raises(InvalidArgument, match=r"explicit seeds"):
        Workload(make=box, requests=(Request((0,), SamplingParams()),))
    with pytest.raises(InvalidArgument, match=r"seed=-1 must be an int in \[0, 2\*\*63\)"):
        decoder.open(REQUEST, -1)
    handle = decoder.open(REQUEST, 3)
    with pytest.raises(InvalidArgument, match=r"num_draft_tokens=0 must be an int >= 1"):
        decoder.step(handle, num_draft_tokens=0)
    with pytest.raises(InvalidArgument, match=r"num_draft_tokens=0 must be an int >= 1"):
        Step(0, num_draft_tokens=0)
    with pytest.raises(InvalidArgument, match=r"fault.version=5 but there are 2 draft versions"):
        decoder.step(handle, num_draft_tokens=1, fault=Fault("draft_switch", version=5))
    decoder.close(handle)
    with pytest.raises(InvalidArgument, match=r"is not an open handle"):
        decoder.step(handle, num_draft_tokens=1)
    with pytest.raises(InvalidArgument, match=r"committed=\(4, 5\) already finished"):
        decoder.open(Request((0,), SamplingParams(max_tokens=2), 1), 1, committed=(4, 5))


def test_run_schedule_reports_the_property_and_the_components_that_differ():
    from specverify.fuzz.whitebox import mutants

    workload = Workload(
        make=partial(mutants.TargetKVNotCropped, TARGET, DRAFTS, block_size=2, num_blocks=64),
        requests=(Request((0, 1), SamplingParams(max_tokens=6, ignore_eos=True), 1, seed=2),),
    )
    with pytest.raises(PropertyFailure, match=r"\[round_state\] slot 0 .* target_kv: expected") as failure:
        run_schedule(workload, [Step(0, num_draft_tokens=4)] * 6)
    assert failure.value.prop == "round_state"


def test_bare_transactional_round_leaves_the_state_it_found_when_it_raises():
    decoder = TransactionalDecoder(TARGET, DRAFTS[0], block_size=1, num_blocks=64)
    state = decoder.start(REQUEST, 3)
    before, free = state.view(), decoder.pool.num_free
    allocate, calls = decoder.pool.allocate, []

    def failing():
        calls.append(1)
        if len(calls) == 3:
            raise OutOfBlocks("injected")
        return allocate()

    decoder.pool.allocate = failing
    with pytest.raises(OutOfBlocks):
        decoder.round(state)
    assert before.diff(state.view()) == [] and decoder.pool.num_free == free
