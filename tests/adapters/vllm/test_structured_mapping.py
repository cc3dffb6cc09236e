"""The ``structured`` configuration without vLLM: which grammars the adapter maps, the preset, the scenarios' law."""

import re

import pytest

from specverify.adapters.vllm import configs, mapping
from specverify.adapters.vllm.methods import method_options
from specverify.certification.matrix_checkpoint import STRUCTURED_PATTERN, configuration_scenarios, structured_grammar
from specverify.certification.scenarios import DEAD_END_GRAMMAR, SCENARIOS
from specverify.errors import InvalidArgument
from specverify.params import SamplingParams
from specverify.protocol import Request


def _request(grammar, temperature=1.0):
    return Request((0, 1), SamplingParams(temperature=temperature, max_tokens=3, grammar=grammar), 3)


@pytest.mark.parametrize("method", ["draft_model", "eagle", "plain"])
def test_a_regex_grammar_is_mapped_only_under_structured(method):
    mapping.check_request(_request(structured_grammar()), method, True)
    with pytest.raises(InvalidArgument, match="structured_outputs=true"):
        mapping.check_request(_request(structured_grammar()), method, False)


def test_a_token_level_grammar_is_never_mapped():
    for structured in (False, True):
        with pytest.raises(InvalidArgument, match="no text form"):
            mapping.check_request(_request(DEAD_END_GRAMMAR), "draft_model", structured)


def test_the_preset_declares_its_option_and_evidence():
    preset = configs.ENGINE_CONFIGS["structured"]
    assert preset.options == {"structured_outputs": True}
    assert dict(preset.reaches) == {"structured_requests": 1, "drafts_cut": 1}
    assert preset.scenarios == ("structured", "greedy-structured")
    assert method_options("draft_model", {})["structured_outputs"] is False
    with pytest.raises(InvalidArgument, match="structured_outputs"):
        method_options("draft_model", {"structured_outputs": "yes"})
    assert {"structured_requests", "drafts_cut"} <= set(configs.new_state())


def test_the_structured_scenarios_law_stays_inside_the_grammar():
    from specverify.oracles import exact_law, make_vocab, random_target

    scenarios = configuration_scenarios(SCENARIOS)
    grammar = scenarios["structured"].params.grammar
    assert grammar.pattern == STRUCTURED_PATTERN and scenarios["greedy-structured"].params.temperature == 0
    vocab = make_vocab(6)
    assert grammar.strings == vocab.strings
    law = exact_law(random_target(vocab, seed=0), (0, 1), scenarios["structured"].params)
    assert abs(law.probs.sum() - 1) < 1e-9 and len(law) > 5
    for (tokens, reason), prob in zip(law.outcomes, law.probs):
        text = vocab.text(tokens)
        if reason == "eos":
            assert re.fullmatch(STRUCTURED_PATTERN, text), (tokens, prob)
        assert grammar.dfa.step(0, text) is not None, (tokens, reason)  # every emitted text a live prefix
