"""The vLLM adapter's engine configurations without vLLM (``specverify.adapters.vllm.configs``): each preset maps onto
checked options, ``parallel_n``'s packing, the ``structured`` preset and its scenarios' law, and vLLM's grammar backend
(xgrammar, no model run) allowing what our automaton allows. Their states on a real engine: test_configs_engine.py,
test_structured_engine.py."""

import re

import pytest

import specverify as sv
from specverify.adapters import vllm as va
from specverify.adapters.vllm import configs
from specverify.adapters.vllm.methods import method_options
from specverify.certification.matrix.checkpoint import (
    CONFIGURATION_SCENARIOS,
    STRUCTURED_PATTERN,
    configuration_scenarios,
)
from specverify.certification.matrix.scenarios import SCENARIOS
from specverify.errors import InvalidArgument
from specverify.grammar_regex import RegexGrammar
from specverify.protocol import Request

STATE = configuration_scenarios(SCENARIOS)


def test_every_preset_maps_onto_checked_options(vllm_0_32_on_cpu):
    presets = va.draft_model.engine_configs
    assert va.draft_model.default_engine_config == "prefix-cache" and presets["prefix-cache"].options == {}
    structured = presets["structured"].scenarios  # the adapter names the matrix's configuration scenarios
    assert (*configs.STATE_SCENARIOS, *configs.LONG_SCENARIOS, *structured) == CONFIGURATION_SCENARIOS
    long = {n for n, p in presets.items() if set(configs.LONG_SCENARIOS) <= set(p.scenarios)}
    assert long == {"prefix-cache", "no-prefix-cache"}  # the long pair of turns: the prefix-cache presets only
    for name, preset in presets.items():
        if preset.unreachable:
            continue
        options = method_options("eagle", preset.options)  # every key accepted by every method, every value checked
        assert options["workaround"] == preset.options.get("workaround")
    assert {n for n, p in presets.items() if p.unreachable} == {"async-scheduling", "dynamic-gamma"}
    assert "forced off on CPU" in presets["async-scheduling"].unreachable
    assert presets["chunked-prefill"].options == {"max_num_batched_tokens": 64}
    assert presets["preempt"].reaches == {"preemptions": 1} and presets["parallel-n"].options == {"parallel_n": True}
    for key, bad in [("enable_prefix_caching", "yes"), ("max_num_batched_tokens", 1), ("num_gpu_blocks_override", 1.5),
                     ("parallel_n", None), ("declare_seed", 0)]:  # fmt: skip
        with pytest.raises(InvalidArgument, match=key):
            method_options("draft_model", {key: bad})


def test_packing_groups_identical_unseeded_requests_only():
    a, b = STATE["long-prompt"], STATE["multi-turn"]
    requests = [Request(a.prompt, a.params, 3), Request(b.prompt, b.params, 3), Request(a.prompt, a.params, 3),
                Request(a.prompt, a.params, 3, seed=7), Request(a.prompt, a.params, 2)]  # fmt: skip
    greedy = Request(a.prompt, sv.SamplingParams(temperature=0.0, max_tokens=3), 3)
    assert configs.packed(requests + [greedy, greedy]) == [[0, 2], [1], [3], [4], [5], [6]]


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

    scenarios = STATE
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


PATTERNS = (STRUCTURED_PATTERN, "(ab|b)+ ?", "[ab]+( [ab]+)?", "(a|ba)*", "b?a+ ")


def _xgrammar_allowed(pattern: str, vocab) -> dict:
    """{token path: allowed ids} from vLLM's grammar backend, its TokenizerInfo built as vLLM builds it for a
    Hugging Face tokenizer (v1/structured_output/backend_xgrammar.py:69)."""
    import xgrammar as xgr

    from specverify.oracles.checkpoint_tokenizer import build_tokenizer

    info = xgr.TokenizerInfo.from_huggingface(build_tokenizer(vocab), vocab_size=vocab.size)
    assert info.vocab_type == xgr.VocabType.RAW and list(info.stop_token_ids) == [vocab.eos_token_id]
    ctx = xgr.GrammarCompiler(info).compile_regex(pattern)
    grammar = RegexGrammar(pattern, vocab.strings, vocab.eos_token_id)
    paths = {0: ()}  # a token path to every reachable state of our grammar, breadth first
    for s in range(grammar.num_states):
        for tok, nxt in grammar.toy.transitions[s].items():
            paths.setdefault(nxt, paths[s] + (tok,))
    out = {}
    for state, path in paths.items():
        matcher = xgr.GrammarMatcher(ctx)
        assert all(matcher.accept_token(t) for t in path), (pattern, path)
        bitmask = xgr.allocate_token_bitmask(1, vocab.size)
        matcher.fill_next_token_bitmask(bitmask)
        word = int(bitmask[0, 0])
        ours = set(grammar.allowed(state)) | ({vocab.eos_token_id} if grammar.accepting(state) else set())
        out[path] = (ours, {i for i in range(vocab.size) if (word >> i) & 1})
    return out


@pytest.mark.parametrize("pattern", PATTERNS)
def test_vllm_grammar_backend_allows_what_our_automaton_allows(pattern):
    pytest.importorskip("xgrammar", reason="vLLM's grammar backend is not installed: pip install -e '.[grammar]'")
    vocab = STATE["structured"].models().target.vocab
    for path, (ours, theirs) in _xgrammar_allowed(pattern, vocab).items():
        assert ours == theirs, (
            f"pattern {pattern!r} after tokens {path}: ours {sorted(ours)}, xgrammar {sorted(theirs)}"
        )
