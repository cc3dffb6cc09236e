"""Adapters pass an engine only the fields a request set (docs/adapters.md, unset fields): the vLLM mapping, which
needs no vLLM to build its keyword arguments (the transformers adapter's are tested in test_transformers.py)."""

import pytest

from specverify.adapters.vllm.mapping import check_request, vllm_kwargs
from specverify.errors import InvalidArgument
from specverify.oracles.processors import parity_processor
from specverify.params import SamplingParams
from specverify.protocol import Request


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
