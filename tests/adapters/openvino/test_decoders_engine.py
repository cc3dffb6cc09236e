"""The OpenVINO GenAI adapter on the engine (the checkpoint family converted by optimum-intel): the controls pass a
small law check at temperature 1 and greedy equality; what the engine does wrong is pinned (docs/findings/openvino.md).
Run in the venvs of .ci/openvino:

    SPECVERIFY_OPTIMUM_CLI=.venv-ovconvert/bin/optimum-cli \
        .venv-openvino/bin/python -m pytest tests/adapters/openvino -q

- finding 1: draft-model speculation at temperature > 0 accepts a draft with the ratio of the draft's probability of
  its candidate to the target's probability of the token the target sampled, and keeps that sampled token after a
  rejection: the law is wrong (TV ≈ 0.3 at temperature 1), greedy is right;
- finding 2: with prefix caching on (the engine's default) draft-model speculation at temperature > 0 fails an
  assertion in ``Sequence::get_hash`` within a few requests of one prompt (a rejected last candidate leaves the
  group's processed-token count one too high); greedy, which never takes that branch, runs;
- finding 3: the continuous-batching pipeline with a draft, in batches, keeps a draft token the target never checked
  (a request whose prompt the draft finished before the target, then scheduled up to its prompt's end only): greedy
  returns the draft's argmax, and tokens after an EOS come back; a step budget no call reaches avoids it (the
  configuration ``f32-no-prefix-cache-whole-batch``);
- finding 5: with speculation, ``min_new_tokens`` is counted wrongly after a rejected candidate (the sampler sets the
  logit processor's generated count to prompt + generated − 1): EOS comes back before ``min_tokens`` for prompts of
  two or more tokens, at temperature 1 too; a one-token prompt, where the two counts agree, and ``plain`` never do;
- ``draft_model_confidence``: the threshold reaches the engine and changes the drafts, but not at ``max_tokens`` 3,
  where the engine lets the draft propose one token a round whatever γ or the threshold.
"""

import pytest

from specverify.params import SamplingParams
from specverify.protocol import Request
from tests.adapters._law import greedy_mismatches, law_check

pytest.importorskip("openvino_genai", reason="openvino-genai not installed here: see .ci/openvino")


def _has_converter() -> bool:
    from specverify.adapters.openvino.export import optimum_cli

    try:
        optimum_cli()
    except RuntimeError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    not _has_converter(), reason="no optimum-cli: set SPECVERIFY_OPTIMUM_CLI (.ci/openvino makes its venv)"
)
LAW_N = 4000
NO_CACHE = {"prefix_caching": False}


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


def _make(name, pair, **options):
    from specverify.adapters import openvino

    return getattr(openvino, name)(pair.target, pair.draft, **options)


REPEATS = (0, 1, 2, 0, 1, 2, 0, 1)  # a prompt whose last bigram occurs earlier: prompt lookup has drafts to propose


@pytest.mark.parametrize(
    "name, options, prompt",
    [("plain", {}, (0, 1)), ("cb_plain", {}, (0, 1)), ("prompt_lookup", NO_CACHE, REPEATS)],
)
def test_controls_and_prompt_lookup_pass_the_law_check_and_greedy(name, options, prompt, pair):
    decoder = _make(name, pair, **options)
    result, impossible, _ = law_check(decoder, pair, LAW_N, seed=11, prompt=prompt)
    assert result.passed and not impossible, (name, result.pvalue_min, result.tv.estimate)
    assert not greedy_mismatches(decoder, pair)


@pytest.mark.parametrize("name", ["draft_model", "draft_model_confidence"])
def test_draft_model_sampling_law_is_wrong_and_greedy_right_finding_1(name, pair):
    decoder = _make(name, pair, **NO_CACHE)
    result, impossible, _ = law_check(decoder, pair, LAW_N, seed=11)
    assert not result.passed and result.tv.estimate > 0.15, (result.pvalue_min, result.tv.estimate)
    assert not greedy_mismatches(decoder, pair)
    assert decoder.reported_metrics()["num_accepted_tokens"] > 0  # it did speculate


def test_prefix_caching_with_a_draft_fails_an_assertion_finding_2(pair):
    decoder = _make("draft_model", pair)  # prefix caching on: the engine's default
    greedy = [Request((0, 1, 2), SamplingParams(temperature=0.0, max_tokens=4), 3) for _ in range(200)]
    assert len(decoder(greedy)) == 200  # greedy rejections rewind the count: no assertion
    requests = [Request((0, 1, 2), SamplingParams(max_tokens=4), 3, seed=s) for s in range(200)]
    with pytest.raises(RuntimeError, match="content_length <= prompt_ids.size"):
        decoder(requests)


def test_continuous_batching_with_a_draft_keeps_an_unchecked_draft_token_in_batches_finding_3(pair):
    from specverify.adapters.openvino.decoder import CB_CHUNK
    from specverify.adapters.openvino.factories import CONFIGS
    from specverify.oracles.law import greedy_outcome

    # prompt (0, 2): the draft's argmax is EOS, the target's 3. generate() calls of 512 requests at the default
    # scheduler (256 tokens a step) cut some prompts at their end after the draft has proposed for them: ~16 of 2048
    # here, which ones varies from run to run (the scheduling does), 16-17 in four runs
    decoder, params = _make("cb_draft_model", pair, **NO_CACHE), SamplingParams(temperature=0.0, max_tokens=3)
    want = greedy_outcome(pair.target, (0, 2), params)
    out = decoder([Request((0, 2), params, 3) for _ in range(4 * CB_CHUNK)])
    wrong = [c.tokens for c in out if (c.tokens, c.finish_reason) != want]
    assert wrong and all(t[0] == pair.target.vocab.eos_token_id and len(t) > 1 for t in wrong), (want, wrong)
    assert len(wrong) < CB_CHUNK // 2  # most requests are scheduled whole: those are right
    # the workaround: a step budget no call reaches, so no prompt is cut between steps
    whole = _make("cb_draft_model", pair, **CONFIGS["f32-no-prefix-cache-whole-batch"].options)
    assert whole.engine_info["requested"]["max_num_batched_tokens"] == 2**20
    out = whole([Request((0, 2), params, 3) for _ in range(4 * CB_CHUNK)])
    assert all((c.tokens, c.finish_reason) == want for c in out)


def test_min_tokens_under_speculation_lets_eos_out_early_after_a_rejection_finding_5(pair):
    eos = pair.target.vocab.eos_token_id
    params = SamplingParams(min_tokens=4, max_tokens=5)  # temperature 1: EOS has mass at every position

    def early(name, prompt, options=None):
        decoder = _make(name, pair, **(options or {}))
        out = decoder([Request(prompt, params, 2, seed=s) for s in range(300)])
        return sorted(c.tokens.index(eos) for c in out if eos in c.tokens[:4])

    # plain masks EOS up to min_tokens: no completion ends before it
    assert early("plain", (1, 4, 0)) == []
    # prompt lookup (the certified configuration, prefix caching on): prompt lookup pads its candidates, so every
    # round rejects one and the sampler then sets the EOS mask's count to prompt (3) + generated − 1 >= 4 from the
    # second round on: EOS at positions 2 and 3 (27 of 300 here, 2026-12-06)
    got = early("prompt_lookup", (1, 4, 0))
    assert got and set(got) <= {2, 3}, (
        f"{len(got)} of 300 prompt-lookup completions end in EOS before min_tokens 4 (positions {got}): if none, the "
        "engine no longer sets the count in prompt + generated units (sampler.cpp:1803 at da1db86): finding 5 may be "
        "fixed, update docs/findings/openvino.md and this test"
    )
    # a one-token prompt: prompt + generated − 1 is the generated count, so the under-count cannot happen
    assert early("prompt_lookup", (1,)) == []


def test_confidence_threshold_changes_the_drafts_but_not_at_max_tokens_3(pair):
    confident, fixed = _make("draft_model_confidence", pair, **NO_CACHE), _make("draft_model", pair, **NO_CACHE)

    def completions(decoder, max_tokens, gamma):
        params = SamplingParams(max_tokens=max_tokens)
        return [c.tokens for c in decoder([Request((0, 1), params, gamma, seed=s) for s in range(100)])]

    # max_tokens 3: one draft token a round, whatever γ or the threshold (the law check's counts were the same)
    assert completions(confident, 3, 3) == completions(fixed, 3, 3) == completions(fixed, 3, 1)
    # max_tokens 8: the threshold, not the engine's default of 5 drafts, decides how many the draft proposes
    differ = sum(a != b for a, b in zip(completions(confident, 8, 5), completions(fixed, 8, 5)))
    assert differ >= 20, differ


def test_cb_plain_seeds_are_per_request_within_a_batch(pair):
    decoder = _make("cb_plain", pair)
    params = SamplingParams(max_tokens=4)
    alone = [decoder([Request((0, 1, 2), params, 1, seed=s)])[0].tokens for s in range(20)]
    mixed = decoder([Request((0, 1, 2), params, 1, seed=s) for s in range(20)] * 2)
    assert [c.tokens for c in mixed[:20]] == alone == [c.tokens for c in mixed[20:]]
