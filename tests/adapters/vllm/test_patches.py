"""The opt-in workarounds of vLLM bugs (``specverify.adapters.vllm.patches``) without vLLM: the option checks, each
workaround gated to the vLLM version whose code was read, and the draft-probability lookup of findings 14 and 15 on a
stand-in model runner, vLLM's own lookup stood in by its answer for a batch it has no rows for (None: the step is
verified as point masses). With vLLM: test_padded_drafts_engine.py (the kernels, the binding, vLLM's own lookup) and
test_decoder_engine.py (expand-kernel)."""

from types import SimpleNamespace

import pytest
import torch

from specverify.adapters import vllm as va
from specverify.adapters.vllm import patches
from specverify.adapters.vllm.methods import method_options
from specverify.errors import InvalidArgument


def test_the_workaround_is_gated_to_the_version_read(monkeypatch):
    monkeypatch.setattr(patches, "vllm_version", lambda: "0.33.0")
    with pytest.raises(InvalidArgument, match="replaces a function of vLLM 0.32.0 .* but vLLM 0.33.0 is installed"):
        method_options("draft_model", {"workaround": "expand-kernel"})
    monkeypatch.setattr(patches, "vllm_version", lambda: "0.32.0")
    monkeypatch.setattr(patches, "has_triton", lambda: True)
    with pytest.raises(InvalidArgument, match="not register when Triton is present"):
        method_options("draft_model", {"workaround": "expand-kernel"})
    monkeypatch.setattr(patches, "has_triton", lambda: False)
    assert method_options("draft_model", {"workaround": "expand-kernel"})["workaround"] == "expand-kernel"


def test_the_workaround_is_checked_and_recorded(vllm_0_32_on_cpu):
    assert "padded-drafts" in patches.WORKAROUNDS and "padded-drafts" in patches.PROCESS_GLOBAL
    assert patches.workarounds_of(["padded-drafts", "expand-kernel"]) == ("expand-kernel", "padded-drafts")
    with pytest.raises(InvalidArgument, match="not a workaround"):
        patches.workarounds_of("padded-draft")
    assert va.draft_model.engine_configs["patched"].options["workaround"] == list(patches.WORKAROUNDS)


def test_grammar_cut_drafts_needs_the_drafters_probabilities(vllm_0_32_on_cpu):
    with pytest.raises(InvalidArgument, match="grammar-cut-drafts verifies a draft the grammar cuts as a -1 draft"):
        patches.workarounds_of(["padded-drafts", "grammar-cut-drafts"])
    assert "grammar-cut-drafts" in patches.WORKAROUNDS and "grammar-cut-drafts" not in patches.PROCESS_GLOBAL


def test_padded_draft_probs_needs_padded_drafts_on_cpu(vllm_0_32_on_cpu):
    assert "padded-draft-probs" in patches.WORKAROUNDS and "padded-draft-probs" in patches.PROCESS_GLOBAL
    with pytest.raises(InvalidArgument, match="add it: --engine-option"):
        patches.workarounds_of(["padded-draft-probs"])
    both = ("padded-drafts", "padded-draft-probs")
    assert patches.workarounds_of(list(reversed(both))) == both
    with pytest.raises(InvalidArgument, match="missed-draft-probs extends padded-draft-probs"):
        patches.workarounds_of(["padded-drafts", "missed-draft-probs"])


@pytest.fixture
def vllm_lookup(monkeypatch):
    """vLLM's own ``GPUModelRunner._get_spec_decode_draft_probs`` stood in by its answer for these batches, each with a
    request it has no cached row for: None (test_padded_drafts_engine.py checks vLLM's answers). Returns its calls."""
    calls = []

    def lookup(runner, metadata):
        calls.append(metadata)
        return None

    monkeypatch.setitem(patches._ORIGINAL, "draft_probs", lookup)
    return calls


def _runner(cached, new_request: str) -> SimpleNamespace:
    """A model runner holding the drafter's rows of requests "a" and "b", verifying "b", ``new_request``, "a"."""
    return SimpleNamespace(_draft_probs=cached, _draft_prob_req_ids=["a", "b"],
                           input_batch=SimpleNamespace(req_ids=["b", new_request, "a"]))  # fmt: skip


def test_padded_draft_probs_fills_a_padded_request_and_keeps_vllms_fallback_otherwise(monkeypatch, vllm_lookup):
    """Finding 14: a padded request (drafts all -1) with no cached row gets rows of zeros instead of the whole batch
    going to the point-mass fallback (None); a real request without a row still gets vLLM's fallback."""
    monkeypatch.setitem(patches._MISSED, "on", False)  # padded-draft-probs without missed-draft-probs
    cached = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)  # rows of requests "a" and "b"
    runner = _runner(cached, "new")
    metadata = SimpleNamespace(draft_token_ids=torch.tensor([1, 2, -1, -1, -1, 3]), num_draft_tokens=[2, 3, 1])
    got = patches.padded_draft_probs(runner, metadata)
    assert torch.equal(got, torch.cat([cached[1, :2], torch.zeros(3, 4), cached[0, :1]])) and not vllm_lookup
    real = SimpleNamespace(draft_token_ids=torch.tensor([1, 2, 0, 1, 2, 3]), num_draft_tokens=[2, 3, 1])
    assert patches.padded_draft_probs(runner, real) is None  # a real draft without a row: vLLM's fallback
    none_cached = SimpleNamespace(**{**vars(runner), "_draft_probs": None})
    assert patches.padded_draft_probs(none_cached, metadata) is None
    assert vllm_lookup == [real, metadata]


def test_missed_draft_probs_gives_only_the_request_that_missed_one_hot_rows(monkeypatch, vllm_lookup):
    """Finding 15: with ``missed-draft-probs`` a real request without a cached row (left out of the previous step)
    gets one-hot rows at its own drafts, its ``-1`` drafts zeros, and every other request keeps its cached rows,
    instead of the whole step falling back to point masses; without the option vLLM's fallback stays."""
    cached = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    runner = _runner(cached, "late")
    metadata = SimpleNamespace(draft_token_ids=torch.tensor([1, 2, 3, 0, -1, 3]), num_draft_tokens=[2, 3, 1])
    monkeypatch.setitem(patches._MISSED, "on", False)  # as bind() sets it for padded-draft-probs alone
    assert patches.padded_draft_probs(runner, metadata) is None and vllm_lookup == [metadata]  # vLLM's fallback
    monkeypatch.setitem(patches._MISSED, "on", True)  # ... and with missed-draft-probs
    got = patches.padded_draft_probs(runner, metadata)
    # a step earlier "late" was drafted (its rows cached), then left out of the step that replaced the cache
    earlier = SimpleNamespace(_draft_probs=cached + 100, _draft_prob_req_ids=["late", "a"], requests={"late", "a"},
                              input_batch=SimpleNamespace(req_ids=[]))  # fmt: skip
    patches.padded_draft_probs(earlier, SimpleNamespace(draft_token_ids=torch.tensor([]), num_draft_tokens=[]))
    later = SimpleNamespace(**{**vars(earlier), "_draft_probs": cached, "_draft_prob_req_ids": ["a", "b"],
                               "requests": {"a", "b", "late"}, "input_batch": runner.input_batch})  # fmt: skip
    kept = patches.padded_draft_probs(later, metadata)
    one_hot = torch.zeros(3, 4)
    one_hot[0, 3], one_hot[1, 0] = 1.0, 1.0  # "late": drafts 3, 0 one-hot, its -1 a row of zeros
    assert torch.equal(got, torch.cat([cached[1, :2], one_hot, cached[0, :1]]))
    assert torch.equal(kept, torch.cat([cached[1, :2], cached[0] + 100, cached[0, :1]]))  # its own rows, kept
    assert len(vllm_lookup) == 1
