"""The transformers adapter's decoder (``specverify.adapters.transformers.decoder``) on transformers: set-up, greedy,
seeds, accepted, a small law check, the unset fields, the logits processors, the cache configurations.

Findings these tests pin are written up in docs/findings/transformers.md.
"""

import collections

import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install -e '.[hf]'")

import torch  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402
from transformers.generation.utils import GenerateDecoderOnlyOutput  # noqa: E402

from specverify.adapters import transformers as tfa  # noqa: E402
from specverify.errors import InvalidArgument  # noqa: E402
from specverify.oracles.law import exact_law, greedy_outcome  # noqa: E402
from specverify.oracles.pairs import ToyPairSpec  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402
from specverify.stats import battery  # noqa: E402

FACTORIES = (tfa.assisted, tfa.prompt_lookup, tfa.plain)


@pytest.fixture(scope="module")
def decoders(checkpoint_pair):
    return {f.__name__: f(checkpoint_pair.target, checkpoint_pair.draft) for f in FACTORIES}


# ------------------------------------------------------------------------------------------------ set-up


def test_capabilities_and_bad_models(decoders):
    base = {"temperature", "max_tokens", "repetition_penalty", "min_p", "bad_token_ids", "min_tokens", "stop", "seed"}
    base |= {"logits_processors"}
    assert decoders["plain"].capabilities == frozenset(base)
    assert decoders["assisted"].capabilities == frozenset(base | {"accepted"})
    assert not {"top_k", "top_p", "batch", "frequency_penalty"} & decoders["prompt_lookup"].capabilities
    with pytest.raises(InvalidArgument, match="CheckpointModel"):
        tfa.assisted(object(), object())


# ------------------------------------------------------------------------------------ toy cache vs DynamicCache

# (operation, argument): append the tokens through each model's forward, or crop(argument)


# a StaticCache crops by moving its length back, so crop(-10) past its start would leave a negative length
# (StaticLayer.crop, cache_utils.py:510-521); generate() never crops more than the rejected drafts


# ---------------------------------------------------------------------------------------------------- behaviour

GREEDY_PROMPTS = [(a,) for a in range(5)] + [(a, b) for a in range(3) for b in (1, 3, 4)] + [(0, 1, 2), (4, 2, 0)]
GREEDY_PROMPTS += [(1, 1, 1, 1), (3, 0, 4, 2), (2, 4)]


@pytest.mark.parametrize("name", ["assisted", "prompt_lookup", "plain"])
def test_greedy_equals_target_greedy(decoders, checkpoint_pair, name):
    params = SamplingParams(temperature=0.0, max_tokens=4)
    requests = [Request(p, params, num_draft_tokens=1 + i % 4) for i, p in enumerate(GREEDY_PROMPTS)]
    got = [(c.tokens, c.finish_reason) for c in decoders[name](requests)]
    want = [greedy_outcome(checkpoint_pair.target, p, params) for p in GREEDY_PROMPTS]
    assert got == want


def test_seeded_replay_and_unseeded_independence(toy_pair):
    decoder = tfa.assisted(toy_pair.target, toy_pair.draft)
    params = SamplingParams(max_tokens=4)
    seeded = [Request((0, 1), params, num_draft_tokens=2, seed=s) for s in (7, 8, 9)]
    first = decoder(seeded)
    again = decoder([seeded[1], Request((2,), params), seeded[0], seeded[2]])
    assert [first[1], first[0], first[2]] == [again[0], again[2], again[3]]
    neighbours = {decoder([Request((0, 1), params, seed=s)])[0].tokens for s in range(100, 130)}
    unseeded = {c.tokens for c in decoder([Request((0, 1), params)] * 30)}
    assert len(neighbours) > 3 and len(unseeded) > 3
    assert all(type(t) is int for c in first for t in c.tokens)


def test_accepted_counts(toy_pair):
    copy = ToyPairSpec(draft_distance=0.0).build()  # greedy with a draft equal to the target: all accepted
    decoder = tfa.assisted(copy.target, copy.draft)
    params = SamplingParams(temperature=0.0, max_tokens=5)
    for gamma in (1, 2, 3):
        c = decoder([Request((0, 1), params, num_draft_tokens=gamma)])[0]
        assert c.accepted[0] == min(gamma, len(c.tokens)), c
    sampler = tfa.prompt_lookup(toy_pair.target, toy_pair.draft)
    stop = SamplingParams(max_tokens=5, stop=("ab", " b"))
    for c in sampler([Request((0, 1, 0, 1), stop, num_draft_tokens=3)] * 40):
        assert all(0 <= a <= 3 for a in c.accepted) and sum(c.accepted) <= len(c.tokens)
        assert c.finish_reason in ("eos", "stop", "length")


@pytest.mark.parametrize("n", [200, pytest.param(1500, marks=pytest.mark.slow)])
def test_law_plain_and_assisted_small_n(decoders, checkpoint_pair, n):
    """N = 1500 outcomes of one request (temperature 1, max_tokens 3, γ = 3) against the exact law (-m slow; 200 in
    the fast suite, the same assertions at less power, ~3 s). Observed at 1500: both pass, the assisted
    first round accepts 2 drafts in 91 % of requests (docs/findings/transformers.md, "small-N law check")."""
    params = SamplingParams(temperature=1.0, max_tokens=3)
    law = exact_law(checkpoint_pair.target, (0, 1), params)
    verdicts = {}
    for name in ("plain", "assisted"):
        completions = decoders[name]([Request((0, 1), params, num_draft_tokens=3)] * n)
        counts, impossible = law.align(collections.Counter((c.tokens, c.finish_reason) for c in completions))
        assert not impossible
        verdicts[name] = battery(counts, law.probs, alpha=1e-6, seed=0).passed
        if name == "assisted":
            first = collections.Counter(c.accepted[0] for c in completions)
            assert set(first) <= {0, 1, 2, 3} and first[2] > 2 * n / 3  # γ capped at max_tokens - 1 = 2
    assert verdicts == {"plain": True, "assisted": True}


def test_finish_rule_cuts_only_at_stop_strings(toy_pair):
    """The adapter matches stop strings itself and cuts there; EOS and max_new_tokens are transformers' to honour, so
    tokens past them are returned for the certifier to report (specverify/adapters/boundary/finish.py)."""
    from specverify.adapters.boundary.finish import EngineStoppedEarly

    decoder = tfa.plain(toy_pair.target, toy_pair.draft)
    eos = toy_pair.target.vocab.eos_token_id
    params = SamplingParams(max_tokens=5, stop=("ab",))
    assert decoder._finish((0, 1, 2, 0, 1), params) == ((0, 1), "stop")
    assert decoder._finish((1, eos, 0), params) == ((1, eos, 0), "eos")  # not cut: tokens after EOS
    assert decoder._finish((1, 1, 1, 1, 1, 1), params) == ((1, 1, 1, 1, 1, 1), "length")  # past max_new_tokens
    with pytest.raises(EngineStoppedEarly, match=r"transformers' generate\(\) stopped after 2 tokens \(1, 1\)"):
        decoder._finish((1, 1), params)


@pytest.mark.parametrize("name", ["assisted", "prompt_lookup"])
def test_tokens_after_eos_from_generate_are_reported_not_cut(toy_pair, monkeypatch, name):
    """generate() faked to run on past EOS (transformers #47912's mechanism): the completion keeps every token and
    ``accepted`` counts the drafts among them; an early stop is the one exception."""
    from specverify.adapters.boundary.finish import EngineStoppedEarly

    decoder = getattr(tfa, name)(toy_pair.target, toy_pair.draft)
    assert decoder.prefill_tokens == 0
    eos = toy_pair.target.vocab.eos_token_id
    prompt, tail = (0, 1), [eos, 1, eos]
    fake = {"out": torch.tensor([list(prompt) + [2] + tail])}

    def generate(input_ids, **kw):  # what generate(return_dict_in_generate=True) returns
        return GenerateDecoderOnlyOutput(sequences=fake["out"], cache=DynamicCache())

    monkeypatch.setattr(decoder.model, "generate", generate, raising=False)
    c = decoder([Request(prompt, SamplingParams(max_tokens=6), num_draft_tokens=2)])[0]
    assert (c.tokens, c.finish_reason) == ((2, eos, 1, eos), "eos") and c.accepted == ()
    fake["out"] = torch.tensor([list(prompt) + [2, 2]])
    with pytest.raises(EngineStoppedEarly, match="without EOS, a stop string or max_tokens=6"):
        decoder([Request(prompt, SamplingParams(max_tokens=6), num_draft_tokens=2)])
    assert not hasattr(tfa.plain(toy_pair.target, toy_pair.draft), "prefill_tokens")


# ------------------------------------------------------------------------------- unset fields, logits processors


def test_unset_fields_are_left_to_generate(toy_pair):
    """Only the fields a request set reach the GenerationConfig (docs/adapters.md, unset fields); do_sample is no
    field, so it follows the temperature (unset: sampling, transformers' own default would be greedy)."""
    decoder = tfa.plain(toy_pair.target, toy_pair.draft)
    config = decoder.generation_kwargs(Request((0,), SamplingParams(top_k=2, max_tokens=3)))["generation_config"]
    assert (config.do_sample, config.temperature, config.top_k, config.top_p) == (True, None, 2, None)
    assert (config.repetition_penalty, config.min_new_tokens, config.max_new_tokens) == (None, None, 3)
    config = decoder.generation_kwargs(Request((0,), SamplingParams(temperature=1.0)))["generation_config"]
    assert (config.do_sample, config.temperature, config.top_k) == (True, 1.0, None)
    config = decoder.generation_kwargs(Request((0,), SamplingParams(temperature=0.0, top_k=3)))["generation_config"]
    assert (config.do_sample, config.temperature, config.top_k) == (False, None, None)
    assert "logits_processor" not in decoder.generation_kwargs(Request((0,), SamplingParams()))


@pytest.mark.parametrize("name", ["assisted", "plain"])
def test_logits_processors_reach_every_position(toy_pair, name):
    """The parity processor (its mask gives outcomes of probability 0 when skipped, or handed a history without the
    drafts): greedy equals greedy_outcome with it, and 300 sampled outcomes are all possible and pass the battery."""
    from specverify.oracles.processors import parity_processor

    decoder = getattr(tfa, name)(toy_pair.target, toy_pair.draft)
    greedy = SamplingParams(temperature=0.0, max_tokens=4, logits_processors=(parity_processor,))
    prompts = [p for p in GREEDY_PROMPTS if max(p) < toy_pair.target.vocab.size]
    requests = [Request(p, greedy, num_draft_tokens=1 + i % 4) for i, p in enumerate(prompts)]
    got = [(c.tokens, c.finish_reason) for c in decoder(requests)]
    assert got == [greedy_outcome(toy_pair.target, p, greedy) for p in prompts]
    params = SamplingParams(max_tokens=3, logits_processors=(parity_processor,))
    law = exact_law(toy_pair.target, (0, 1), params)
    completions = decoder([Request((0, 1), params, num_draft_tokens=3, seed=s) for s in range(300)])
    counts, impossible = law.align(collections.Counter((c.tokens, c.finish_reason) for c in completions))
    assert not impossible and battery(counts, law.probs, alpha=1e-6, seed=0).passed


# ------------------------------------------------------------------------------- engine configurations (caches)


def test_cache_configurations_map_onto_cache_implementation_and_report_the_class_used(toy_pair):
    """dynamic-cache (the default: cache_implementation unset) and static-cache ('static'); the evidence is the class
    of the cache generate() returned, counted per call; a seeded request gives the same tokens with either cache
    (the toy cache reads the entry at the stored length, so a StaticCache's preallocated tail is never read)."""
    from specverify.protocol import engine_configs_of

    for factory in FACTORIES:
        presets, default = engine_configs_of(factory)
        assert default == "dynamic-cache" and list(presets) == ["dynamic-cache", "static-cache"]
        assert presets["dynamic-cache"].options == {"cache": "dynamic"}
        assert presets["static-cache"].reaches == {"static_cache_calls": 1}
    request = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=5), num_draft_tokens=3, seed=7)
    outputs = {}
    for cache, cls in (("dynamic", "DynamicCache"), ("static", "StaticCache")):
        decoder = tfa.assisted(toy_pair.target, toy_pair.draft, workers=0, cache=cache)
        config = decoder.generation_kwargs(request)["generation_config"]
        assert config.cache_implementation == (None if cache == "dynamic" else "static")
        outputs[cache] = decoder([request, request])
        info = decoder.engine_info
        assert info["requested"]["cache"] == cache and info["effective"]["target_cache_classes"] == [cls]
        assert info["state"][f"{cache}_cache_calls"] == 2 and sum(info["state"].values()) == 2
        assert decoder.take_state() == {f"{cache}_cache_calls": 2} and decoder.take_state() == {}
        assert presets[f"{cache}-cache"].shortfall(info) is None
        other = "static" if cache == "dynamic" else "dynamic"
        assert "static_cache_calls = 0" in presets["static-cache"].shortfall({"state": {"static_cache_calls": 0}})
        assert presets[f"{other}-cache"].shortfall(info) is not None  # one cache's run never reaches the other's
    assert [c.tokens for c in outputs["dynamic"]] == [c.tokens for c in outputs["static"]]
    with pytest.raises(InvalidArgument, match="cache='paged' must be one of"):
        tfa.plain(toy_pair.target, toy_pair.draft, cache="paged")


def test_the_assistant_keeps_a_dynamic_cache_under_static_cache(toy_pair):
    """transformers clears cache_implementation on the assistant's config (candidate_generator.py:182-184): under
    static-cache only the target's cache is static, which the adapter's docstring and findings say."""
    decoder = tfa.assisted(toy_pair.target, toy_pair.draft, workers=0, cache="static")
    seen = []
    hook = decoder.assistant.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(type(kwargs.get("cache")).__name__), with_kwargs=True
    )
    try:
        decoder([Request((0, 1), SamplingParams(temperature=1.0, max_tokens=4), num_draft_tokens=2, seed=3)])
    finally:
        hook.remove()
    assert seen and set(seen) == {"DynamicCache"}
    assert decoder.engine_info["state"]["static_cache_calls"] == 1
