"""The candidate generators transformers 5.25 ships beyond assisted generation and prompt lookup
(``specverify.adapters.transformers.generators``): each factory reaches the generator it names, greedy equals the
target's greedy, a small law check, the models built beside the target, and every refusal pinned with its reason
(docs/findings/transformers.md, "The newer candidate generators"). Full certifications: benchmarks/
transformers_certify.py --factory early_exit universal mtp dflash.
"""

import collections

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install -e '.[hf]'")

import torch  # noqa: E402

from specverify.adapters import transformers as tfa  # noqa: E402
from specverify.adapters.transformers import configs, generators, hooks  # noqa: E402
from specverify.errors import InvalidArgument  # noqa: E402
from specverify.oracles.law import exact_law, greedy_outcome  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402
from specverify.stats import battery  # noqa: E402

MODES = ("early_exit", "universal", "mtp", "dflash")
PROMPTS = ((0, 1), (3, 2, 4), (1, 1, 0, 3))


@pytest.fixture(scope="module")
def decoders(checkpoint_pair):
    """One decoder per mode; universal with its two workarounds (``assistant_cache="fresh"``: as shipped its greedy
    generator crashes on some requests; ``translator="id-order"``: as shipped USD's law is not the target's; both
    pinned below)."""
    out = {
        m: getattr(tfa, m)(checkpoint_pair.target, checkpoint_pair.draft, workers=0) for m in MODES if m != "universal"
    }
    out["universal"] = tfa.universal(
        checkpoint_pair.target, checkpoint_pair.draft, workers=0, assistant_cache="fresh", translator="id-order"
    )
    return out


@pytest.fixture(scope="module")
def plain(checkpoint_pair):
    return tfa.plain(checkpoint_pair.target, checkpoint_pair.draft, workers=0)


# ------------------------------------------------------------------------------------------------ mechanism


@pytest.mark.parametrize("mode", MODES)
def test_each_factory_reaches_its_generator_and_greedy_equals_the_target(decoders, checkpoint_pair, mode):
    """Greedy: the tokens of plain greedy decoding (the enumerated argmax chain) on three prompts; the calls are
    counted under the generator class transformers built (``calls_<class>``), the one the factory's configurations
    require (universal at temperature 0 runs the greedy twin, AssistedCandidateGeneratorDifferentTokenizers)."""
    decoder = decoders[mode]
    params = SamplingParams(temperature=0.0, max_tokens=8)
    before = dict(decoder.state)
    for prompt in PROMPTS:
        got = decoder([Request(prompt, params, num_draft_tokens=3)])[0]
        want = greedy_outcome(checkpoint_pair.target, prompt, params)
        assert (got.tokens, got.finish_reason) == (tuple(want[0]), want[1]), (mode, prompt)
        if mode == "universal":  # the greedy twin's rounds are not bounded by γ: not reported (finding 12)
            assert got.accepted is None
        else:
            assert got.accepted is not None and sum(a + 1 for a in got.accepted) >= len(got.tokens) - 1
    sampled = decoder([Request((0, 1), SamplingParams(temperature=1.0, max_tokens=6), num_draft_tokens=3, seed=5)])
    assert len(sampled[0].tokens) >= 1 and sampled[0].accepted is not None
    counted = {k: v - before.get(k, 0) for k, v in decoder.state.items() if k.startswith("calls_")}
    want_class = configs.GENERATOR_CLASSES[mode]
    greedy_class = "AssistedCandidateGeneratorDifferentTokenizers" if mode == "universal" else want_class
    assert counted.get(f"calls_{greedy_class}", 0) >= 3 and counted.get(f"calls_{want_class}", 0) >= 1, counted
    reaches = tfa.__dict__[mode].engine_configs["dynamic-cache"].reaches
    assert reaches == {"dynamic_cache_calls": 1, f"calls_{want_class}": 1}


@pytest.mark.parametrize("mode", MODES)
def test_seeded_replay(decoders, mode):
    request = Request((0, 1, 3), SamplingParams(temperature=1.0, max_tokens=8), num_draft_tokens=3, seed=11)
    first, second = decoders[mode]([request, request])
    assert (first.tokens, first.accepted) == (second.tokens, second.accepted)


@pytest.mark.parametrize("n", [60, pytest.param(600, marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", MODES)
def test_law_small_n(decoders, checkpoint_pair, mode, n):
    """N = 60 draws (600 with -m slow) of one request (temperature 1, max_tokens 3, γ = 2) against the exact law,
    α = 1e-6 (the quick certificates are the real test: docs/findings/transformers.md). MTP and DFlash declare
    ``prefill_tokens`` = 1."""
    params = SamplingParams(temperature=1.0, max_tokens=3)
    law = exact_law(checkpoint_pair.target, (0, 1), params)
    rng = np.random.default_rng(3)
    requests = [Request((0, 1), params, num_draft_tokens=2, seed=int(s)) for s in rng.integers(0, 2**62, n)]
    completions = decoders[mode](requests)
    counts, impossible = law.align(collections.Counter((c.tokens, c.finish_reason) for c in completions))
    assert not impossible
    assert battery(counts, law.probs, alpha=1e-6, seed=0).passed
    assert getattr(decoders[mode], "prefill_tokens") == (1 if mode in ("mtp", "dflash") else 0)


def test_dflash_drafts_gamma_a_round_and_mtp_one(decoders):
    """DFlash's block is γ + 1 (γ candidates a round after the prefill's empty round, C:1672-1675); MTP drafts one a
    round (its one MTP layer) whatever γ; early exit and USD draft γ (the assistant's constant schedule)."""
    request = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=12, ignore_eos=False), num_draft_tokens=3)
    for mode, first, later in (("dflash", 0, 3), ("mtp", 0, 1), ("early_exit", None, 3), ("universal", None, 3)):
        decoder = decoders[mode]
        seen = []
        for seed in range(4):
            decoder.generator.before_call(request)
            kwargs = decoder.generation_kwargs(Request(request.prompt, request.params, 3, seed=seed))
            with torch.no_grad(), hooks.record_rounds(decoder.model) as log:
                torch.manual_seed(seed)
                decoder.model.generate(torch.tensor([request.prompt]), **kwargs)
            seen.append([len(c) for _, c in log.rounds])
        if mode in ("dflash", "mtp"):  # the prefill's empty round
            assert all(r[0] == first for r in seen), (mode, seen)
        middle = [n for r in seen for n in r[1:-1]]  # the last round may be cut by the length cap
        if mode in ("dflash", "mtp"):  # a fixed block
            assert middle and all(n == later for n in middle), (mode, seen)
        else:  # the assistant's generate() stops drafting at a drafted EOS (universal: at the pruned index of EOS)
            rounds = [n for r in seen for n in r[:-1]]
            assert middle and max(rounds) == later and all(1 <= n <= later for n in rounds), (mode, seen)


def test_the_universal_draft_is_the_family_draft_under_other_ids(checkpoint_pair):
    """Same strings, other ids (a seeded permutation, never the identity), plus the extra string at the last id; the
    rewritten draft's logits at the permuted ids equal the family draft's (rows moved, nothing else changed)."""
    from transformers import AutoModelForCausalLM

    vocab = checkpoint_pair.target.vocab
    perm = generators.universal_permutation(vocab.size)
    assert sorted(perm) == list(range(vocab.size)) and perm != list(range(vocab.size))
    table = generators.draft_table(vocab)
    assert table[generators.EXTRA_STRING] == vocab.size and len(table) == vocab.size + 1
    path = generators.universal_draft_dir(checkpoint_pair.draft.path, vocab)
    rewritten = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float64).eval()
    original = AutoModelForCausalLM.from_pretrained(str(checkpoint_pair.draft.path), dtype=torch.float64).eval()
    prompt = [0, 1, 3, 2]
    with torch.no_grad():
        want = original(torch.tensor([prompt])).logits[0, -1]
        got = rewritten(torch.tensor([[perm[t] for t in prompt]])).logits[0, -1]
    assert torch.allclose(got[perm], want, atol=1e-9, rtol=0)
    tok = generators._unigram_tokenizer(table, generators._eos_text())
    assert tok("aba", add_special_tokens=False)["input_ids"] in ([table["ab"], table["a"]], [table["a"], table["ba"]])


def test_the_mtp_target_keeps_the_target_law(checkpoint_pair):
    """The MTP target's Llama weights are the family target's: identical logits; its MTP layer is extra."""
    from safetensors.numpy import load_file

    path = generators.mtp_target_dir(checkpoint_pair.target.path)
    stored = load_file(str(path / "model.safetensors"))
    source = load_file(str(checkpoint_pair.target.path / "model.safetensors"))
    assert all(np.array_equal(stored[k], v) for k, v in source.items())
    assert {k for k in stored if k not in source} >= {"model.layers.1.eh_proj.weight", "model.layers.1.enorm.weight"}


# ------------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("mode", MODES)
def test_toy_models_are_refused(toy_pair, mode):
    with pytest.raises(InvalidArgument, match="checkpoint model"):
        getattr(tfa, mode)(toy_pair.target, toy_pair.draft, workers=0)


def test_early_exit_must_exit_before_the_last_layer(checkpoint_pair):
    with pytest.raises(InvalidArgument, match="exit_layer=1 must be below the target's 1 layers"):
        tfa.early_exit(checkpoint_pair.target, checkpoint_pair.draft, workers=0, exit_layer=1)


@pytest.mark.parametrize("mode", ("universal", "mtp", "dflash"))
def test_finding_static_cache_overflows_at_the_length_cap(checkpoint_pair, mode):
    """Finding (docs/findings/transformers.md): with ``cache_implementation="static"`` the target's StaticCache holds
    ``max_length - 1`` positions (generation/utils.py:2966), which assisted generation respects by capping each draft
    at ``max_length - cur_len - 1`` (candidate_generator.py:292-297). MTP drafts its layers' count uncapped
    (C:1432-1521), DFlash proposes ``block_size - 1`` candidates whatever budget is left (C:1622-1624 only stops at
    0; C:1672-1698), the greedy different-tokenizer generator caps at ``max_length`` (C:634-635), one past the cache:
    the verification forward writes past the cache and ``StaticLayer.update`` raises an IndexError. The dynamic
    cache grows instead (the same requests pass above). USD (temperature > 0) caps like assisted and runs."""
    decoder = getattr(tfa, mode)(checkpoint_pair.target, checkpoint_pair.draft, workers=0, cache="static")
    greedy = Request((0, 1, 3, 2), SamplingParams(temperature=0.0, max_tokens=10), num_draft_tokens=3)
    with pytest.raises(IndexError, match="out of bounds"):
        decoder([greedy])
    if mode == "universal":
        sampled = Request((0, 1, 3, 2), SamplingParams(temperature=1.0, max_tokens=10), num_draft_tokens=3, seed=1)
        assert len(decoder([sampled])[0].tokens) >= 1
    # the workaround (configuration static-cache-headroom): the StaticCache sized γ + 1 longer (max_cache_len)
    options = {"assistant_cache": "fresh"} if mode == "universal" else {}
    roomy = getattr(tfa, mode)(
        checkpoint_pair.target, checkpoint_pair.draft, workers=0, cache="static-headroom", **options
    )
    got = roomy([greedy])[0]
    want = greedy_outcome(checkpoint_pair.target, greedy.prompt, greedy.params)
    assert (got.tokens, got.finish_reason) == (tuple(want[0]), want[1])
    assert roomy.engine_info["state"]["static_cache_calls"] == 1
    assert "static-cache-headroom" in getattr(tfa, mode).engine_configs


def test_finding_the_greedy_different_tokenizer_assistant_cache_is_mis_cropped(checkpoint_pair):
    """Finding (docs/findings/transformers.md): AssistedCandidateGeneratorDifferentTokenizers keeps ``_last_ids_length``
    in target tokens (candidate_generator.py:552-555) but ``_update_past_and_masks`` subtracts the assistant's
    input length (C:299-305) and crops only when that is >= 0; where the tokenizers segment differently ("a" "b"
    for the target, "ab" for the draft) the assistant's cache outgrows its input until its forward gets no token.
    As shipped, prompt (0, 1) greedy raises; with ``assistant_cache="fresh"`` (the workaround) the same request
    gives the target's greedy tokens."""
    params = SamplingParams(temperature=0.0, max_tokens=8)
    request = Request((0, 1), params, num_draft_tokens=3)
    shipped = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    with pytest.raises(RuntimeError, match="cannot reshape tensor of 0 elements"):
        shipped([request])
    fixed = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0, assistant_cache="fresh")
    got = fixed([request])[0]
    want = greedy_outcome(checkpoint_pair.target, (0, 1), params)
    assert (got.tokens, got.finish_reason) == (tuple(want[0]), want[1])
    assert fixed.engine_info["effective"]["workaround"] == {
        "greedy_assistant": "an unpruned copy, its cache dropped every round, its own processors"
    }


def test_finding_a_sampled_usd_call_prunes_the_assistant_for_later_greedy_calls(checkpoint_pair):
    """Finding: the first sampled call prunes the assistant model in place (generation/utils.py:1372-1378,
    C:746-757); a later greedy call with the same assistant raises. The workaround hands greedy calls a copy."""
    greedy = Request((3, 2, 4), SamplingParams(temperature=0.0, max_tokens=8), num_draft_tokens=3)
    sampled = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=4), num_draft_tokens=3, seed=1)
    want = greedy_outcome(checkpoint_pair.target, greedy.prompt, greedy.params)
    shipped = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    assert shipped([greedy])[0].tokens == tuple(want[0])
    shipped([sampled])
    assert type(shipped.assistant.get_output_embeddings()).__name__ == "_PruneReindexingLMHead"
    embedding = shipped.assistant.get_input_embeddings()
    state = f"input embedding {type(embedding).__name__}, map={getattr(embedding, 'map', None)!r}"
    try:  # attention shapes (the mapped embedding gives one position for the prompt's), or an id past the pruned head
        got = shipped([greedy])
    except (RuntimeError, IndexError):
        pass
    else:  # once seen in an xdist worker, never alone: say what the assistant looked like
        pytest.fail(f"the greedy call after the prune did not raise: {got!r}; {state}; rerun this test alone")
    fixed = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0, assistant_cache="fresh")
    fixed([sampled])
    assert fixed([greedy])[0].tokens == tuple(want[0])


def test_finding_usd_scatters_the_draft_logits_in_another_order(checkpoint_pair):
    """Finding (docs/findings/transformers.md): USD's pruned logit i is the draft probability of assistant id
    ``overlap[i]`` (the order ``get_vocab()`` iterates, C:739-745, 787-795; drafts are mapped that way, C:830-834),
    but ``get_target_logits`` gives it to the target id of the i-th smallest mapped assistant id (C:843-852): the
    q that speculative sampling uses is the true one only when ``get_vocab()`` iterates by ascending id (a fast
    tokenizer's vocabulary is a hash map: the order, hence the law, can change from one process to the next).
    The patched translator (``translator="id-order"``) always places each logit at its drafted token; the law check
    with it passes (test_law_small_n)."""
    from specverify.adapters.transformers.generators import (
        _eos_text,
        _unigram_tokenizer,
        draft_table,
        target_table,
    )

    vocab = checkpoint_pair.target.vocab
    decoder = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    target_tok = _unigram_tokenizer(target_table(vocab), _eos_text())
    draft_tok = _unigram_tokenizer(draft_table(vocab), _eos_text())
    drafted, placed = generators.translator_orders(target_tok, draft_tok, vocab.size, decoder.assistant)
    table = draft_table(vocab)
    overlap = [table[text] for text in draft_tok.get_vocab() if text != generators.EXTRA_STRING]
    assert sorted(drafted) == sorted(placed) == list(range(vocab.size))
    assert (drafted == placed) == (overlap == sorted(overlap))  # shipped: right only in ascending-id order
    fixed = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0, translator="id-order")
    assert fixed.engine_info["effective"]["workaround"] == {"usd_target_logits": "scattered in the pruned head's order"}


def test_refusal_single_position_needs_a_gemma4_assistant(checkpoint_pair):
    """SinglePositionMultiTokenCandidateGenerator only takes a Gemma4(Unified)Assistant draft (C:1284-1292) over a
    Gemma 4 / Gemma 3n target (generation/utils.py:1346-1354): a Llama pair never reaches it (generate() builds the
    plain AssistedCandidateGenerator), and handing it the family's Llama draft is refused. The family's law is a
    Llama target's, which no Gemma target computes: no factory."""
    from transformers import AutoModelForCausalLM
    from transformers.generation.candidate_generator import SinglePositionMultiTokenCandidateGenerator

    draft = AutoModelForCausalLM.from_pretrained(str(checkpoint_pair.draft.path))
    with pytest.raises(ValueError, match="Expected assistant_model to be a Gemma4AssistantForCausalLM"):
        SinglePositionMultiTokenCandidateGenerator(draft, draft.get_input_embeddings(), draft.generation_config)


def test_refusal_mtp_on_a_llama_target_as_shipped(checkpoint_pair):
    """Without the workaround (``generators.Mtp``), MtpModel finds no MTP weight pattern on a Llama target
    (modeling_layers.py:619-634) and generate() raises."""
    decoder = tfa.mtp(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    decoder.model._keys_to_ignore_on_load_unexpected = set()  # as LlamaForCausalLM sets it (modeling_utils.py:1308)
    with pytest.raises(ValueError, match="does not seem to register any known MTP layer patterns"):
        decoder([Request((0, 1), SamplingParams(temperature=0.0, max_tokens=4), num_draft_tokens=1)])


def test_refusal_different_tokenizers_of_equal_size(checkpoint_pair):
    """Two tokenizers of equal vocabulary size (same strings, other ids) are refused: generate() takes equal sizes
    for one tokenizer ("assistant_tokenizer is not required", generation/utils.py:1907-1912); hence the universal
    draft's extra string. And the family's word-level tokenizer cannot encode a concatenation ("aba"), which the
    different-tokenizer generators' text round trips need (C:492-509): the factory hands generate() Unigram
    tokenizers over the same tables."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = AutoModelForCausalLM.from_pretrained(str(checkpoint_pair.target.path)).eval()
    draft = AutoModelForCausalLM.from_pretrained(str(checkpoint_pair.draft.path)).eval()
    tok = AutoTokenizer.from_pretrained(str(checkpoint_pair.target.path))
    with pytest.raises(ValueError, match="assistant_tokenizer` is not required"):
        target.generate(
            torch.tensor([[0, 1]]), assistant_model=draft, tokenizer=tok, assistant_tokenizer=tok, max_new_tokens=2
        )
    with pytest.raises(Exception, match="(?i)unk|missing"):
        tok("aba", add_special_tokens=False)


def test_sample_reports_no_acceptance_when_some_draws_have_no_round(decoders):
    """mtp and dflash commit their first token from the prefill (``prefill_tokens`` = 1): a draw that ends there has
    no round, so ``sample()`` reports no first-round counts for that call (they must cover all n draws) and the
    outcomes still count every draw; with room for rounds (and, for these seeded draws, no EOS first) every draw
    reports one."""
    one = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=1), num_draft_tokens=2, seed=4)
    more = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=4), num_draft_tokens=2, seed=4)
    for mode in ("mtp", "dflash"):
        short = decoders[mode].sample(one, 8)
        assert sum(short.outcomes.values()) == 8 and short.accepted is None
        full = decoders[mode].sample(more, 8)
        assert sum(full.accepted.values()) == 8


def test_finding_greedy_different_tokenizers_with_a_bad_token_crash(checkpoint_pair):
    """Finding (docs/findings/transformers.md): the greedy different-tokenizer generator hands the target's processor
    instances to the assistant (C:172, 316-324); NoBadWordsLogitsProcessor sizes its bias on the first scores it
    sees (logits_process.py:1322-1323, 1344), the assistant's 7, and the target's 6 then fail (U:4116). The
    workaround's own processor copies give the target's greedy tokens (the bad token never emitted)."""
    params = SamplingParams(temperature=0.0, max_tokens=6, bad_token_ids=(1,))
    request = Request((0, 1, 3), params, num_draft_tokens=3)
    shipped = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        shipped([request])
    fixed = tfa.universal(checkpoint_pair.target, checkpoint_pair.draft, workers=0, assistant_cache="fresh")
    got = fixed([request])[0]
    want = greedy_outcome(checkpoint_pair.target, request.prompt, params)
    assert (got.tokens, got.finish_reason) == (tuple(want[0]), want[1]) and 1 not in got.tokens


def test_finding_greedy_different_tokenizer_rounds_exceed_gamma_so_acceptance_is_not_reported(monkeypatch):
    """Finding 12 (docs/findings/transformers.md): the greedy different-tokenizer generator bounds the assistant's
    tokens by ``num_assistant_tokens`` (C:524) and hands back every target token their text re-encodes to (C:613-631),
    so a round at γ 1 can hold two drafts. The adapter reports no ``accepted`` for that generator's calls (the
    protocol's counts are per drafts ≤ γ); USD's sampled calls keep theirs, each round ≤ γ. The pair, parameters and
    prompt are those of the certifier's run that found it (``greedy-masks``, checkpoint family)."""
    from specverify.certification.matrix.scenarios import matrix

    scenario = matrix("checkpoint")["greedy-masks"]
    pair = scenario.models()
    rounds = []
    record = hooks.RoundLog.accepted

    def spy(log, prompt_len, tokens):
        rounds.append((log.generator, [len(candidates) for _, candidates in log.rounds]))
        return record(log, prompt_len, tokens)

    monkeypatch.setattr(hooks.RoundLog, "accepted", spy)
    decoder = tfa.universal(pair.target, pair.draft, workers=0, assistant_cache="fresh", translator="id-order")
    request = Request((3, 4, 2, 0), scenario.params, num_draft_tokens=1)
    got = decoder([request])[0]
    want = greedy_outcome(pair.target, request.prompt, request.params)
    assert (got.tokens, got.finish_reason) == (tuple(want[0]), want[1])
    generator, sizes = rounds[-1]
    assert generator in generators.UNBOUNDED_DRAFTS and max(sizes) > request.num_draft_tokens, rounds
    assert got.accepted is None
    mark = len(rounds)
    sampled = Request((0, 1), SamplingParams(temperature=1.0, max_tokens=4), num_draft_tokens=2, seed=3)
    completions = decoder([sampled] * 8)
    assert {generator for generator, _ in rounds[mark:]} == {"UniversalSpeculativeDecodingGenerator"}
    assert all(c.accepted and all(0 <= a <= 2 for a in c.accepted) for c in completions), completions
