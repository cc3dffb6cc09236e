"""SamplingParams records the fields a request set (docs/design.md, unset fields), and logits processors run at
their place in the canonical order."""

import pickle
from dataclasses import replace

import pytest
import torch

from specverify import InvalidArgument, SamplingParams
from specverify.oracles import exact_law, make_vocab, random_target
from specverify.oracles.processors import parity_processor
from specverify.params import CANONICAL_DEFAULTS, PROCESSOR_FIELDS
from specverify.sampling import next_token_probs, process_logits

SEEN = []


def recording_processor(histories, logits):  # records what it is handed, adds 1.5 to token 0
    SEEN.append((tuple(histories), logits.clone()))
    out = logits.clone()
    out[:, 0] += 1.5
    return out


def wrong_shape(histories, logits):
    return logits[:, :1]


def not_a_number(histories, logits):
    return logits * float("nan")


def test_unset_fields_read_as_their_canonical_defaults():
    p = SamplingParams()
    assert p.set_fields == frozenset() and repr(p) == "SamplingParams()"
    assert {name: getattr(p, name) for name in CANONICAL_DEFAULTS} == CANONICAL_DEFAULTS
    assert set(CANONICAL_DEFAULTS) == set(PROCESSOR_FIELDS)
    q = SamplingParams(top_k=2, max_tokens=5)
    assert q.temperature == 1.0 and not q.is_set("temperature") and q.is_set("top_k")
    assert q.set_fields == {"top_k", "max_tokens"} and repr(q) == "SamplingParams(top_k=2, max_tokens=5)"


def test_setting_a_default_value_still_sets_it_and_is_another_request():
    explicit = SamplingParams(temperature=1.0, top_k=2)
    implicit = SamplingParams(top_k=2)
    assert explicit.is_set("temperature") and not implicit.is_set("temperature")
    assert explicit != implicit and explicit.active() == implicit.active() == {"top_k"}
    assert len({explicit, implicit, SamplingParams(top_k=2)}) == 2


def test_replace_keeps_what_was_set_and_sets_what_changed():
    p = SamplingParams(top_k=2, max_tokens=5)
    assert replace(p, temperature=0.7).set_fields == {"temperature", "top_k", "max_tokens"}
    assert replace(p, temperature=1.0) == p  # the default: the law and the request stay the same
    zeroed = replace(p, top_k=0)  # set to its default value: still set, sent as 0
    assert zeroed.is_set("top_k") and zeroed.top_k == 0
    assert replace(p, temperature=0.0).unset("temperature") == p
    with pytest.raises(InvalidArgument, match="name='tempreature' is not a SamplingParams field"):
        p.unset("tempreature")


def test_equality_hash_pickle_and_dict_round_trips():
    params = [
        SamplingParams(),
        SamplingParams(temperature=1.0),
        SamplingParams(top_k=2, stop=["ab"], bad_token_ids=[3, 1, 3]),
        SamplingParams(temperature=0.0, logits_processors=[parity_processor], max_tokens=3),
    ]
    for p in params:
        again = pickle.loads(pickle.dumps(p))
        assert again == p and hash(again) == hash(p) and again.set_fields == p.set_fields
        assert SamplingParams(**p.to_dict()) == p
        assert replace(p) == p
    assert params[2].to_dict() == {"top_k": 2, "bad_token_ids": (1, 3), "stop": ("ab",)}


def test_set_fields_is_validated():
    with pytest.raises(InvalidArgument, match="set_fields=.*must name SamplingParams fields"):
        SamplingParams(set_fields={"temperature", "seed"})


@pytest.mark.parametrize(
    "processors, match",
    [
        ((lambda h, x: x,), "cannot be pickled .* define the processor at module level"),
        (("not callable",), "must be a tuple of callables"),
        (parity_processor, "must be a tuple of callables"),
    ],
)
def test_processors_must_be_picklable_callables(processors, match):
    with pytest.raises(InvalidArgument, match=match):
        SamplingParams(logits_processors=processors)


def test_processors_run_after_the_penalties_and_before_the_temperature():
    SEEN.clear()
    logits = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    params = SamplingParams(repetition_penalty=2.0, temperature=0.5, logits_processors=(recording_processor,))
    seen = torch.tensor([[False, False, True]])
    probs = process_logits(logits, params, seen=seen, histories=[(2, 1)])
    [(histories, handed)] = SEEN
    assert histories == ((2, 1),)
    assert torch.allclose(handed, torch.tensor([[0.0, 1.0, 1.0]], dtype=torch.float64))  # 2 / 2: penalised first
    want = torch.softmax(torch.tensor([1.5, 1.0, 1.0], dtype=torch.float64) / 0.5, -1)
    assert torch.allclose(probs[0], want, atol=1e-12)


def test_processors_see_prompt_plus_generated_and_move_the_greedy_argmax():
    SEEN.clear()
    row = torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64)
    params = SamplingParams(temperature=0.0, logits_processors=(recording_processor,))
    probs = next_token_probs(row, params, prompt=[2], generated=[1, 0])
    assert SEEN[0][0] == ((2, 1, 0),) and probs.tolist() == [1.0, 0.0, 0.0]  # 0 + 1.5 beats 1.0


def test_processors_returning_garbage_are_invalid_arguments():
    logits = torch.zeros((1, 3), dtype=torch.float64)
    with pytest.raises(InvalidArgument, match="returned Tensor of shape \\(1, 1\\); expected .*\\(1, 3\\)"):
        process_logits(logits, SamplingParams(logits_processors=(wrong_shape,)), histories=[(0,)])
    with pytest.raises(InvalidArgument, match="returned NaN or \\+inf"):
        process_logits(logits, SamplingParams(logits_processors=(not_a_number,)), histories=[(0,)])
    with pytest.raises(InvalidArgument, match="need histories"):
        process_logits(logits, SamplingParams(logits_processors=(parity_processor,)))


def test_the_parity_processor_moves_the_law_far():
    """Skipping the scenarios' processor must be loud: TV > 0.3 between the two laws on the toy target."""
    target = random_target(make_vocab(5), seed=3, eos_bias=-1.0)
    with_it = exact_law(target, (0, 1), SamplingParams(max_tokens=4, logits_processors=(parity_processor,)))
    without = exact_law(target, (0, 1), SamplingParams(max_tokens=4))
    outcomes = set(with_it.outcomes) | set(without.outcomes)
    tv = 0.5 * sum(abs(with_it.prob(o) - without.prob(o)) for o in outcomes)
    assert tv > 0.3, tv
