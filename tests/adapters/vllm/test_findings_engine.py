"""vLLM 0.32.0 (CPU) findings pinned (docs/findings/vllm.md: finding 8, the pinned refusals): min_tokens masks EOS
on the bonus row one round too long (greedy output wrong, a local patch makes it exact), and the speculative set-ups
that vLLM's CPU path refuses or runs as something else (mlp_speculator, dspark, synthetic and block rejection).
Run from the vLLM venv:

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_findings_engine.py -q -p no:cacheprovider

Each test asserts what vLLM does today; if an upgrade changes it, the test fails: that is the notice.
"""

import itertools
import os

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

from specverify.adapters import vllm as va  # noqa: E402
from specverify.adapters.vllm.engine import ENV, MAX_MODEL_LEN, HideLlvmliteLib, shutdown  # noqa: E402
from specverify.certification.checks.judge import MIN_MARGIN  # noqa: E402
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS  # noqa: E402
from specverify.oracles.law import boundary_margin, greedy_outcome  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402

# the greedy-masks scenario's request shape (specverify/certification/scenarios.py) on its pair (far-eos)
MASKS = SamplingParams(temperature=0.0, max_tokens=4, min_tokens=2, bad_token_ids=(1,))


@pytest.fixture(scope="module")
def far_eos():
    return CHECKPOINT_PAIRS["far-eos"].build()


@pytest.fixture(scope="module")
def short_prompts(far_eos):
    """Every prompt of one or two tokens (EOS excluded) whose greedy path keeps >= MIN_MARGIN from a tie, as the
    greedy check asks of float32 engines, with the target's greedy outcome with and without min_tokens."""
    out = {}
    for params in (MASKS, SamplingParams(temperature=0.0, max_tokens=4, bad_token_ids=(1,))):
        prompts = [p for n in (1, 2) for p in itertools.product(range(5), repeat=n)]
        prompts = [p for p in prompts if boundary_margin(far_eos.target, p, params) >= MIN_MARGIN]
        out[params.min_tokens] = (params, {p: greedy_outcome(far_eos.target, p, params) for p in prompts})
    return out


def _mismatches(decoder, table: tuple, gamma: int) -> dict:
    params, want = table
    prompts = list(want)
    got = decoder([Request(p, params, gamma) for p in prompts])
    return {p: (c.tokens, c.finish_reason) for p, c in zip(prompts, got) if (c.tokens, c.finish_reason) != want[p]}


# ------------------------------------------------------------------------------------------------ min_tokens, bonus row


def test_min_tokens_masks_eos_on_the_bonus_row(far_eos, short_prompts):
    """FINDING 8 (vllm.md): after the prefill's token (1 committed, min_tokens 2) the round verifies its drafts and the
    bonus row sits at position 1 + drafts >= 2, yet it is sampled with EOS masked (v1/sample/logits_processor/
    builtin.py:279-288 via v1/sample/sampler.py:403-404, called for the bonus rows at rejection_sampler.py:148-161),
    because the committed output is still shorter than min_tokens; the draft rows are masked right (builtin.py:338).
    When every draft is accepted and the target's argmax there is EOS, vLLM emits the best non-EOS token instead:
    one token more than the target. Without min_tokens greedy is exact on every short prompt (and with the
    ``min-tokens-bonus`` workaround: the next test). The certificate's case: ngram, γ 3, prompt [4]. draft_model_greedy
    shows it too (γ 1, prompt [3, 3]: [2, 2, 2, 5] for [2, 2, 5]); it is left out here because the adapter's γ-3
    set-up engine would make it two engine starts."""
    gamma, prompt, wrong = 3, (4,), (4, 4, 4, 5)
    eos = far_eos.target.vocab.eos_token_id
    assert wrong[-1] == eos
    decoder = va.ngram(far_eos.target, far_eos.draft)
    try:
        assert short_prompts[2][1][prompt] == (wrong[:-2] + (eos,), "eos")  # the target ends at position 2
        bad = _mismatches(decoder, short_prompts[2], gamma)
        assert bad.get(prompt) == (wrong, "eos"), "vLLM's bonus-row mask changed: see docs/findings/vllm.md, finding 8"
        # every mismatch on the short prompts is this one: the target's EOS at position >= min_tokens replaced by
        # another token, the tokens before it equal
        for p, (tokens, _) in bad.items():
            target = short_prompts[2][1][p][0]
            assert target[-1] == eos and len(target) - 1 >= MASKS.min_tokens, (p, tokens, target)
            assert tokens[: len(target) - 1] == target[:-1] and tokens[len(target) - 1] != eos, (p, tokens, target)
        assert not _mismatches(decoder, short_prompts[0], gamma)  # no min_tokens: exact
    finally:
        decoder.close()


def test_the_min_tokens_bonus_workaround_makes_greedy_exact(far_eos, short_prompts):
    """``--engine-option workaround=min-tokens-bonus`` (patches: finding 8's local patch, opt-in): the bonus
    row is masked only while the committed output plus its drafts is shorter than min_tokens, and greedy is exact on
    every short prompt; the engine's effective configuration says the patch ran."""
    decoder = va.ngram(far_eos.target, far_eos.draft, workaround="min-tokens-bonus")
    try:
        assert not _mismatches(decoder, short_prompts[2], 3)
        effective = decoder.engine_info["effective"]["3"]
        assert effective["min_tokens_bonus"] is True and effective["workaround"] == ["min-tokens-bonus"]
    finally:
        decoder.close()


def test_min_tokens_is_exact_without_drafts(far_eos, short_prompts):
    """The control: vLLM's own sampler (no drafts, no bonus row) masks EOS exactly as the target's law does."""
    decoder = va.plain(far_eos.target, far_eos.draft)
    try:
        assert not _mismatches(decoder, short_prompts[2], 1)  # γ is ignored without speculation
    finally:
        decoder.close()


# ------------------------------------------------------------------------------------------------ refused on CPU


@pytest.fixture(scope="module")
def main_pair():
    return CHECKPOINT_PAIRS["main"].build()


def _llm(target_path: str, speculative_config: dict):
    """vLLM's engine as the adapter starts it (in-process, float32, eager), with a speculative config the adapter does
    not offer. llvmlite is hidden during start-up (finding 4: an n-gram engine earlier in the process imported it)."""
    for key, value in ENV.items():
        os.environ.setdefault(key, value)
    from vllm import LLM

    with HideLlvmliteLib():
        return LLM(
            model=target_path,
            dtype="float32",
            enforce_eager=True,
            max_model_len=MAX_MODEL_LEN,
            block_size=32,
            max_num_seqs=64,
            speculative_config=speculative_config,
        )


def test_mlp_speculator_is_refused(main_pair, tmp_path):
    """REFUSED (vllm.md): vLLM 0.32.0 has no MLP speculator. Its architecture is commented out of the model registry
    ("Temporarily disabled ... once the MLP Speculator is supported in V1", model_executor/models/registry.py:704-706),
    so an MLPSpeculator checkpoint is refused when the config is built (registry.py:1206), and method="mlp_speculator"
    with any other draft is an unsupported method (config/speculative.py:1389). Behind both: no V1 proposer
    (v1/worker/gpu_model_runner.py:658, "Unknown speculative decoding method") and V2 lists it unsupported
    (config/vllm.py:2931)."""
    from vllm.model_executor.models.registry import ModelRegistry

    assert "MLPSpeculatorPreTrainedModel" not in ModelRegistry.get_supported_archs()
    with pytest.raises(NotImplementedError, match=r"Unsupported speculative method: 'mlp_speculator'"):
        _llm(
            str(main_pair.target.path),
            {"method": "mlp_speculator", "model": str(main_pair.draft.path), "num_speculative_tokens": 3},
        )
    speculator = tmp_path / "mlp-speculator"  # a config alone: the refusal comes before any weight is read
    speculator.mkdir()
    (speculator / "config.json").write_text(
        '{"model_type": "mlp_speculator", "architectures": ["MLPSpeculatorPreTrainedModel"], "vocab_size": 6, '
        '"emb_dim": 64, "inner_dim": 16, "n_predict": 3, "top_k_tokens_per_head": [1, 1, 1], "n_candidates": 1}'
    )
    with pytest.raises(Exception, match=r"MLPSpeculatorPreTrainedModel'\] are not supported for now"):
        _llm(str(main_pair.target.path), {"model": str(speculator), "num_speculative_tokens": 3})


def test_dspark_is_refused_on_the_v1_runner(main_pair):
    """REFUSED (vllm.md): without Triton the CPU uses Model Runner V1 (config/vllm.py:724-728), and DSpark exists only
    in V2: "Model Runner V1 does not support: dspark speculative decoding" (config/vllm.py:2976-2979, raised at
    :3199-3202) before any model loads."""
    from vllm.triton_utils import HAS_TRITON

    assert not HAS_TRITON
    with pytest.raises(Exception, match="Model Runner V1 does not support: dspark speculative decoding"):
        _llm(
            str(main_pair.target.path),
            {"method": "dspark", "model": str(main_pair.draft.path), "num_speculative_tokens": 3},
        )


def test_synthetic_rejection_fails_at_the_first_verification(main_pair):
    """REFUSED (vllm.md): rejection_sample_method="synthetic" starts (the config accepts it), then the first step that
    verifies drafts fails: the CPU kernels assert "Synthetic acceptance not supported with CPU sampling"
    (utils/cpu_triton_utils.py:330 greedy, :369 random). The same with a draft model (measured)."""
    from vllm import SamplingParams as VllmParams

    llm = _llm(
        str(main_pair.target.path),
        {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 2,
            "prompt_lookup_min": 1,
            "rejection_sample_method": "synthetic",
            "synthetic_acceptance_length": 2.0,
        },
    )  # ngram: no draft to load
    try:
        with pytest.raises(AssertionError, match="Synthetic acceptance not supported with CPU sampling"):
            # a repeating prompt: the n-gram proposer drafts from the prefill on, so the first step verifies drafts
            llm.generate(
                [{"prompt_token_ids": [0, 1, 0, 1]}] * 4, VllmParams(temperature=1.0, max_tokens=4), use_tqdm=False
            )
    finally:
        shutdown(llm)


@pytest.mark.parametrize("method", ["block", "standard"])
def test_block_rejection_is_point_mass_verification_on_v1(main_pair, monkeypatch, method):
    """NOT BLOCK VERIFICATION (vllm.md): block verification exists only in Model Runner V2
    (v1/worker/gpu/spec_decode/rejection_sampler.py:174); the CPU runs V1, whose RejectionSampler has no block path.
    There "block" only turns the drafter's cached draft probabilities off (v1/spec_decode/llm_base_proposer.py:258),
    so every verification gets draft_probs=None and the drafts are verified as point masses (the NO_DRAFT_PROBS kernel
    flag, set at v1/sample/rejection_sampler.py:949 and handed to the CPU kernel at utils/cpu_triton_utils.py:384).
    "standard" (the control) passes the draft's probabilities."""
    from vllm import SamplingParams as VllmParams
    from vllm.v1.sample import rejection_sampler as rs

    seen = []
    forward = rs.RejectionSampler.forward

    def recording(self, metadata, draft_probs, logits, sampling_metadata):
        if sum(metadata.num_draft_tokens):
            seen.append(draft_probs is None)
        return forward(self, metadata, draft_probs, logits, sampling_metadata)

    monkeypatch.setattr(rs.RejectionSampler, "forward", recording)
    llm = _llm(
        str(main_pair.target.path),
        {
            "method": "draft_model",
            "model": str(main_pair.draft.path),
            "num_speculative_tokens": 3,
            "draft_sample_method": "probabilistic",
            "rejection_sample_method": method,
        },
    )
    try:
        runner = type(llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner)
        assert runner.__module__ == "vllm.v1.worker.cpu_model_runner", runner  # V1, not vllm.v1.worker.cpu (V2)
        llm.generate([{"prompt_token_ids": [0, 1]}] * 20, VllmParams(temperature=1.0, max_tokens=4), use_tqdm=False)
    finally:
        shutdown(llm)
    assert seen, "no verification step carried drafts"
    if method == "block":
        assert all(seen), seen  # never the draft's probabilities: point masses
    else:  # a step may lack cached probabilities (docs/findings/vllm.md, 6), but most carry them
        assert seen.count(False) > len(seen) / 2, seen
