"""The llama.cpp adapter on real engines (the checkpoint family): a small law check and greedy equality per factory,
the same-seed check, set-up errors; its mappings on stand-ins are in test_bindings.py, test_server.py and
test_example.py. Run in the llama.cpp venv of .ci/llamacpp:

    SPECVERIFY_LLAMACPP_BIN=<build>/bin .venv-llama/bin/python -m pytest tests/adapters/llamacpp -q

The law checks pin what llama.cpp (llama-cpp-python 0.3.36's vendored tree) does today (docs/findings/llamacpp.md):
plain, the two Python speculative paths and both server factories pass; ``llama-speculative`` writes tokens past EOS
and past ``-n`` (finding 6: reported, not cut, so it is invalid), its law up to the first finishing token is rejected
(finding 1: it drafts the draft's most likely token but verifies as if the draft had been sampled), and with tree
drafts it aborts (finding 4: no unified KV cache for tokens shared by branches).
"""

import collections
import re

import numpy as np
import pytest

from specverify.adapters.boundary.finish import EngineStoppedEarly, Finisher
from specverify.params import SamplingParams
from specverify.protocol import Request
from tests.adapters.llamacpp._engines import needs_example, needs_llama, needs_server

LAW_N = 3000
EXAMPLE_N = 400


# ------------------------------------------------------------------------------------------------ engine


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


def _up_to_the_end(vocab, completion, params):
    from specverify.oracles.law import first_finish

    end = first_finish(vocab, completion.tokens, params)
    if end is None:
        return completion.tokens, completion.finish_reason
    return completion.tokens[: end[0] + 1], end[1]


def _law_check(decoder, pair, n, gamma=3, *, up_to_the_end=False):
    from specverify.oracles.law import exact_law
    from specverify.stats import battery

    params = SamplingParams(temperature=1.0, max_tokens=3)
    law = exact_law(pair.target, (0, 1), params)
    out = decoder([Request((0, 1), params, gamma) for _ in range(n)])
    outcomes = [(c.tokens, c.finish_reason) for c in out]
    if up_to_the_end:
        outcomes = [_up_to_the_end(pair.target.vocab, c, params) for c in out]
    vec, impossible = law.align(collections.Counter(outcomes))
    return battery(vec, law.probs, alpha=1e-6, seed=0), impossible, out


def _greedy_mismatches(decoder, pair, *, up_to_the_end=False):
    from specverify.oracles.law import greedy_outcome

    rng = np.random.default_rng(7)
    prompts = [tuple(int(t) for t in rng.integers(0, 5, size=int(rng.integers(1, 6)))) for _ in range(20)]
    params = SamplingParams(temperature=0.0, max_tokens=5)
    got = decoder([Request(p, params, 2 + i % 2) for i, p in enumerate(prompts)])
    if up_to_the_end:
        got = [_up_to_the_end(pair.target.vocab, c, params) for c in got]
    else:
        got = [(c.tokens, c.finish_reason) for c in got]
    want = [greedy_outcome(pair.target, p, params) for p in prompts]
    return [(p, c[0], w[0]) for p, c, w in zip(prompts, got, want) if c != w]


def _consistent_with_prefill(completion, gamma, prefill):
    """metrics.acceptance's consistency rule for one completion with ``prefill`` tokens before the first round."""
    full = sum(a + 1 for a in completion.accepted)
    return (
        all(0 <= a <= gamma for a in completion.accepted)
        and full - 1 + prefill <= len(completion.tokens) <= full + prefill
    )


PYTHON = ("plain", "python_draft_model", "python_prompt_lookup")
SERVER = ("server_plain", "server_draft_model")


def _make(name, pair):
    from specverify.adapters import llamacpp

    return getattr(llamacpp, name)(pair.target, pair.draft)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=needs_llama) for n in PYTHON] + [pytest.param(n, marks=needs_server) for n in SERVER]
)
def test_exact_paths_pass_the_law_check_and_greedy(name, pair):
    decoder = _make(name, pair)
    try:
        result, impossible, out = _law_check(decoder, pair, LAW_N)
        assert result.passed and not impossible, (name, result.pvalue_min, result.tv.estimate)
        assert not _greedy_mismatches(decoder, pair)
        if name.startswith("python_"):
            assert any(c.accepted and max(c.accepted) > 0 for c in out)  # speculation happened
            # one token from the prompt's evaluation, then rounds (llama.py:973-1018): prefill_tokens = 1 fits all
            assert decoder.prefill_tokens == 1 and all(_consistent_with_prefill(c, 3, 1) for c in out)
        if name == "server_draft_model":
            assert decoder.engine_counters["draft_n_accepted"] > 0
    finally:
        getattr(decoder, "close", lambda: None)()


@needs_example
def test_speculative_example_is_rejected_finding_1(pair):
    """FINDING 1 (docs/findings/llamacpp.md): examples/speculative/speculative.cpp drafts ``cur_p->data[0]`` (the
    draft's most likely token after sorting) yet accepts with min(1, p/q) and resamples from (p - q)+, the rule for
    a *sampled* draft. Greedy verification is unaffected. Judged up to the first finishing token: what the example
    writes after it is finding 6."""
    from specverify.stats import battery

    decoder = _make("speculative_example", pair)
    result, _, out = _law_check(decoder, pair, EXAMPLE_N, up_to_the_end=True)
    assert not result.passed and result.tv.estimate > 0.15, (result.pvalue_min, result.tv.estimate)
    # ... and the outcomes follow the modelled argmax-draft rule (enumerated by argmax_draft_law) instead
    params = SamplingParams(temperature=1.0, max_tokens=3)
    model = argmax_draft_law(pair, (0, 1), params, 3)
    counts = collections.Counter(_up_to_the_end(pair.target.vocab, c, params) for c in out)
    assert set(counts) <= set(model), sorted(set(counts) - set(model))[:5]
    keys = sorted(model)
    probs = np.array([model[k] for k in keys])
    fit = battery(np.array([counts.get(k, 0) for k in keys]), probs / probs.sum(), alpha=1e-6, seed=0)
    assert fit.passed, (fit.pvalue_min, fit.tv.estimate)
    assert not _greedy_mismatches(decoder, pair, up_to_the_end=True)


@needs_example
def test_speculative_example_writes_past_eos_and_max_tokens_finding_6(pair):
    """FINDING 6: the example stops only after a round, once ``n_predict > params.n_predict`` or an EOS was
    written (speculative.cpp:485), so it emits max_tokens + 1 or more tokens, and tokens after an EOS accepted
    inside a round. The adapter returns them uncut (specverify/adapters/boundary/finish.py): the certifier's protocol
    check reports them (invalid)."""
    from specverify.oracles.law import first_finish

    decoder = _make("speculative_example", pair)
    params = SamplingParams(temperature=0.0, max_tokens=3)
    out = decoder([Request((0, 1), params, 3, seed=s) for s in range(4)])
    assert all(len(c.tokens) > params.max_tokens for c in out), [c.tokens for c in out]
    assert decoder.overshoot == len(out)
    for c in out:  # what protocol validation sees: a finish before the last token, past max_tokens
        end = first_finish(pair.target.vocab, c.tokens, params)
        assert end is not None and end[0] < len(c.tokens) - 1 and c.finish_reason == end[1]


@needs_example
def test_speculative_example_tree_aborts_finding_4(pair):
    """FINDING 4: with tree drafts (``-np 2``) the example puts a drafted token in several sequences but never asks
    for a unified KV cache (``-kvu`` is not among its flags), so the target batch cannot be split
    (src/llama-batch.cpp, ``split_equal``) and sampling aborts (common/sampling.cpp, GGML_ASSERT) once a branch
    splits off: a crash in a call, with the engine's message. A certification is ``invalid`` at its first call,
    by this abort or by finding 6 (a request that did not split writes past ``-n``), whichever comes first."""
    from specverify import certify

    cert = certify(
        "specverify.adapters.llamacpp:speculative_example_tree",
        level="quick",
        models="checkpoint",
        scenarios=["temperature-1", "greedy"],
        isolation="none",
        sequential=True,
    )
    assert cert.verdict == "invalid", cert.reason
    # finding 6 names the scenario's own max_tokens; scenarios run by (pair, gamma), so either may come first
    assert "coupled sequences" in cert.reason or re.search(r"\d+ tokens > max_tokens=\d+ in", cert.reason), cert.reason
    decoder = _make("speculative_example_tree", pair)
    errors = []
    for seed in range(10):  # most seeds split a branch (finding 5: 6 of 10 with -lv 5)
        try:
            decoder([Request((0, 1), SamplingParams(temperature=1.0, max_tokens=3), 3, seed=seed)])
        except RuntimeError as exc:
            errors.append(str(exc))
    assert any("coupled sequences" in e and "GGML_ASSERT" in e for e in errors), errors[:1]


@needs_llama
def test_greedy_draft_acceptance_meets_its_expectation_when_declared(pair):
    """python_draft_model drafts the draft GGUF's greedy tokens (``draft_law = "model-argmax"``): its reported
    acceptance, every round, sits inside the exact expectation of that draft (judged as samples of the draft, the
    same counts fail: docs/metrics.md); prompt lookup is not modelled."""
    from specverify import certify

    cert = certify(
        "specverify.adapters.llamacpp:python_draft_model",
        level="quick",
        models="checkpoint",
        scenarios=["gamma-1"],
        isolation="none",
    )
    first = cert.scenarios[0]
    assert first.passed and cert.metrics_ok is True, cert.metrics_note
    assert first.metrics["draft_law"] == "model-argmax" and first.accepted_pvalue > 1e-6, first.accepted_pvalue
    assert _make("python_prompt_lookup", pair).draft_law == "unmodelled"


# ----------------------------------------------------------------- the finish rule at each path's boundary (fakes)


@needs_llama
def test_python_path_reads_up_to_its_own_end_and_an_early_stop_is_the_one_exception(pair, monkeypatch):
    """generate() never stops (llama.py:976-1025), so the adapter implements every end and stops reading there; a
    generator that ends before any end is EngineStoppedEarly, as on every engine."""
    decoder = _make("plain", pair)
    eos = pair.target.vocab.eos_token_id
    closed = []

    def fake(tokens):
        def generate(prompt, **kwargs):
            try:
                yield from tokens
            finally:
                closed.append(True)

        return generate

    monkeypatch.setattr(decoder.llm, "generate", fake([2, eos, 1, 1, 1]))
    c = decoder([Request((0, 1), SamplingParams(max_tokens=4), 3)])[0]
    assert (c.tokens, c.finish_reason) == ((2, eos), "eos") and closed
    monkeypatch.setattr(decoder.llm, "generate", fake([2, 2]))
    with pytest.raises(EngineStoppedEarly, match=r"generate\(\) stopped after 2 tokens \(2, 2\)"):
        decoder([Request((0, 1), SamplingParams(max_tokens=4), 3)])


@needs_llama
def test_same_seed_with_and_without_draft(pair):
    """The named check: generate() draws one uniform per emitted token from one seeded stream, so the same seed
    gives the same output with and without a draft model (evidence of the RNG discipline, not the law)."""
    from specverify.adapters.llamacpp.checks import same_seed_check

    params = SamplingParams(temperature=1.0, max_tokens=6)
    requests = [Request((0, 1), params, 3, seed=s) for s in range(200)]
    check = same_seed_check(_make("python_draft_model", pair), _make("plain", pair), requests)
    assert check["equal"] >= 198, check  # float rounding of batched vs single-token logits may flip a rare draw


@needs_server
def test_server_same_seed_with_and_without_draft(pair):
    """The same named check for llama-server: per-request seeds, sample and compare in every slot."""
    from specverify.adapters.llamacpp.checks import same_seed_check

    speculative, control = _make("server_draft_model", pair), _make("server_plain", pair)
    try:
        params = SamplingParams(temperature=1.0, max_tokens=6)
        check = same_seed_check(speculative, control, [Request((0, 1), params, 3, seed=s) for s in range(200)])
        assert check["equal"] >= 198 and speculative.engine_counters["draft_n_accepted"] > 0, check
    finally:
        speculative.close()
        control.close()


@needs_llama
def test_logits_processors_see_unverified_drafts_finding_2(pair):
    """FINDING 2: with a draft model, the ``input_ids`` handed to a logits processor end with the drafts evaluated
    in that round, not at the position being sampled (llama.py, ``_init_sampler``'s ``apply_func`` passes
    ``self._input_ids`` = ``input_ids[: n_tokens]``). The adapter counts calls instead, so its own masks are exact."""
    decoder = _make("python_draft_model", pair)
    decoder([Request((0, 1), SamplingParams(min_tokens=2, max_tokens=6), 3, seed=s) for s in range(20)])
    ahead = [(pos, seen) for pos, seen in decoder.processor_history if seen != pos]
    assert ahead and all(seen > pos for pos, seen in ahead), decoder.processor_history[:10]
    plain = _make("plain", pair)
    plain([Request((0, 1), SamplingParams(min_tokens=2, max_tokens=6), 3, seed=s) for s in range(20)])
    assert all(seen == pos for pos, seen in plain.processor_history)


@needs_llama
def test_toy_models_are_a_setup_error():
    from specverify.adapters import llamacpp
    from specverify.errors import InvalidArgument
    from specverify.oracles.pairs import ToyPairSpec

    toy = ToyPairSpec().build()
    with pytest.raises(InvalidArgument, match="no .path"):
        llamacpp.plain(toy.target, toy.draft)


def argmax_draft_law(pair, prompt, params, gamma):
    """The output law of finding 1's rule, enumerated: each round drafts γ tokens as the draft's argmax chain,
    accepts a draft x with probability min(1, p(x)/q(x)), else samples (p - q)+ renormalised; a bonus from p
    after γ acceptances. Outcomes are cut at the first finishing token (temperature 1, no processors)."""
    import torch

    def probs(model, hist):
        return torch.softmax(model.logits([tuple(hist)])[0], -1).numpy()

    law = collections.defaultdict(float)

    def emit(hist, gen, token, weight):  # returns the finished outcome or None
        reason = Finisher(pair.target.vocab, params)
        for t in gen + [token]:
            r = reason.push(t)
        if r:
            law[(tuple(gen + [token]), r)] += weight
            return True
        return False

    def round_from(hist, gen, weight):
        drafts, h = [], list(hist)
        for _ in range(gamma):
            drafts.append(int(np.argmax(probs(pair.draft, h))))
            h.append(drafts[-1])
        h, g, w = list(hist), list(gen), weight
        for d in drafts:
            p, q = probs(pair.target, h), probs(pair.draft, h)
            accept = min(1.0, p[d] / q[d])
            residual = np.maximum(p - q, 0.0)
            residual /= residual.sum()
            for t in range(len(p)):
                if residual[t] > 0 and w * (1 - accept) * residual[t] > 1e-12:
                    if not emit(h, g, t, w * (1 - accept) * residual[t]):
                        round_from(h + [t], g + [t], w * (1 - accept) * residual[t])
            w *= accept
            if emit(h, g, d, w):
                return
            h, g = h + [d], g + [d]
        p = probs(pair.target, h)
        for t in range(len(p)):
            if not emit(h, g, t, w * p[t]):
                round_from(h + [t], g + [t], w * p[t])

    first = probs(pair.target, list(prompt))
    for t in range(len(first)):
        if not emit(list(prompt), [], t, first[t]):
            round_from(list(prompt) + [t], [t], first[t])
    return dict(law)
