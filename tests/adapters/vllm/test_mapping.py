"""How the vLLM adapter maps requests onto vLLM and its outputs back (``specverify.adapters.vllm.mapping``), without
vLLM: the keyword arguments of vLLM's ``SamplingParams`` (only the fields a request set: docs/adapters.md, unset
fields), the refusals, the grammars it maps, and the ``Completion`` of a ``CompletionOutput`` (the finish rule,
``accepted`` clipped)."""

import types

import pytest

from specverify.adapters.boundary.finish import EngineStoppedEarly
from specverify.adapters.vllm.mapping import check_request, completion, vllm_kwargs
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS, structured_grammar
from specverify.certification.matrix.scenarios import DEAD_END_GRAMMAR
from specverify.errors import InvalidArgument
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams
from specverify.protocol import Request


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


def test_vllm_gets_only_the_set_fields_and_always_max_tokens():
    always = {"max_tokens": 4, "seed": None, "skip_special_tokens": True}
    assert vllm_kwargs(Request((0,), SamplingParams()), 6) == always
    assert vllm_kwargs(Request((0,), SamplingParams(top_k=2, max_tokens=5), seed=3), 6) == always | {
        "top_k": 2,
        "max_tokens": 5,
        "seed": 3,
    }
    explicit = vllm_kwargs(Request((0,), SamplingParams(temperature=1.0, min_tokens=0)), 6)
    assert explicit == always | {"temperature": 1.0, "min_tokens": 0}  # set to the default value: still sent
    masked = vllm_kwargs(Request((0,), SamplingParams(bad_token_ids=(0, 2), stop=("ab",))), 6)
    assert masked["allowed_token_ids"] == [1, 3, 4, 5] and masked["stop"] == ["ab"] and "temperature" not in masked


def test_vllm_refuses_logits_processors_per_request():
    request = Request((0,), SamplingParams(logits_processors=(parity_processor,)))
    with pytest.raises(InvalidArgument, match="vLLM V1 takes logits processors only as classes"):
        check_request(request, "plain")


def test_parameter_mapping_and_refusals():
    kwargs = vllm_kwargs(Request((0,), SamplingParams(bad_token_ids=(0, 2), stop=("ab",), max_tokens=3), 2), 6)
    assert kwargs["allowed_token_ids"] == [1, 3, 4, 5] and kwargs["stop"] == ["ab"] and kwargs["max_tokens"] == 3
    for bad, method in [
        (SamplingParams(min_p=0.1), "draft_model"),
        (SamplingParams(min_p=0.1, top_k=2), "plain"),
        (SamplingParams(top_k=2), "ngram"),
        (SamplingParams(stop=("a",), min_tokens=1), "plain"),
        (SamplingParams(ignore_eos=True), "plain"),
    ]:
        with pytest.raises(InvalidArgument):
            check_request(Request((0,), bad), method)
    check_request(Request((0,), SamplingParams(stop=("a",), min_tokens=1, stop_after_min_tokens=True)), "plain")


def _request(grammar, temperature=1.0):
    return Request((0, 1), SamplingParams(temperature=temperature, max_tokens=3, grammar=grammar), 3)


@pytest.mark.parametrize("method", ["draft_model", "eagle", "plain"])
def test_a_regex_grammar_is_mapped_only_under_structured(method):
    check_request(_request(structured_grammar()), method, True)
    with pytest.raises(InvalidArgument, match="structured_outputs=true"):
        check_request(_request(structured_grammar()), method, False)


def test_a_token_level_grammar_is_never_mapped():
    for structured in (False, True):
        with pytest.raises(InvalidArgument, match="no text form"):
            check_request(_request(DEAD_END_GRAMMAR), "draft_model", structured)


def _output(tokens, per_step=None, finish_reason="length"):
    """A vLLM ``CompletionOutput`` as the adapter reads it."""
    metrics = types.SimpleNamespace(per_step_accepted=list(per_step)) if per_step is not None else None
    return types.SimpleNamespace(token_ids=list(tokens), finish_reason=finish_reason, spec_decode_metrics=metrics)


def test_completion_reports_tokens_past_the_end_and_clips_accepted_to_them(pair):
    """vLLM is asked to honour EOS, stop and max_tokens: its tokens are returned uncut (the certifier reports tokens
    after the finishing one); accepted drafts counted past the returned tokens are dropped (scheduler.py:2118)."""
    vocab = pair.target.vocab
    eos = vocab.eos_token_id
    request = Request((0, 1), SamplingParams(max_tokens=6), 3)
    c = completion(request, _output([2, 2, eos, 1], [3]), vocab, "draft_model")
    assert (c.tokens, c.finish_reason, c.accepted) == ((2, 2, eos, 1), "eos", (3,))
    c = completion(request, _output([2, eos], [3, 3], "stop"), vocab, "draft_model")
    assert (c.tokens, c.finish_reason, c.accepted) == ((2, eos), "eos", (1,))  # EOS was the first accepted draft
    c = completion(request, _output([2, 2, 2, 2, 2, 2, 2]), vocab, "plain")
    assert c.tokens == (2,) * 7 and c.accepted is None  # past max_tokens: 7 > 6, reported
    three = Request((0, 1), SamplingParams(max_tokens=3), 3)
    c = completion(three, _output([2, 2, 2]), vocab, "draft_model")  # metrics lost (a stop string, in vLLM)
    assert c.tokens == (2, 2, 2) and c.accepted is None  # not reported, never "no round"
    c = completion(Request((0, 1), SamplingParams(max_tokens=1), 3), _output([2]), vocab, "draft_model")
    assert c.accepted == ()  # the prefill's token only: no round to lose
    five = Request((0, 1), SamplingParams(max_tokens=5), 3)
    c = completion(five, _output([2, 2, 2, 2, 2], [0, 0, 0, 0, 0]), vocab, "ngram")
    assert c.accepted == (0, 0, 0, 0)  # the prefill's token, then four rounds of one token


def test_an_early_stop_is_the_one_exception_not_no_token(pair):
    vocab = pair.target.vocab
    with pytest.raises(EngineStoppedEarly, match="vLLM stopped after 2 tokens .* finish_reason 'abort'"):
        completion(Request((0, 1), SamplingParams(max_tokens=6), 3), _output([2, 2], [], "abort"), vocab, "ngram")
