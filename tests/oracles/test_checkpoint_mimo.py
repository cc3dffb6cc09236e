"""The MiMo checkpoint (Qwen2 + MTP layers): its deterministic build, its own float64 forward cross-checked against
transformers' Qwen2ForCausalLM, and what a checkpoint pair serves (exact law, greedy outcome, margins, batch cache)."""

import hashlib
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the checkpoint family needs transformers: pip install -e '.[hf]'")

import torch  # noqa: E402

from specverify.errors import InvalidArgument  # noqa: E402
from specverify.oracles import checkpoint as ck  # noqa: E402
from specverify.oracles import checkpoint_mimo as cm  # noqa: E402
from specverify.oracles import checkpoint_spec as cs  # noqa: E402
from specverify.oracles.law import boundary_margin, exact_law, greedy_outcome  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402

_RNG = np.random.default_rng(0)
#: every prefix up to length 3, and 60 drawn prefixes of lengths 4-8
PREFIXES = [p for n in range(1, 4) for p in itertools.product(range(6), repeat=n)] + [
    tuple(int(t) for t in _RNG.integers(0, 6, n)) for n in _RNG.integers(4, 9, 60)
]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoints")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ck.CACHE_ENV, str(path))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield path


@pytest.fixture(scope="module")
def pair(root):
    from specverify.certification.matrix.checkpoint import MIMO_PAIRS

    return MIMO_PAIRS["mimo"].build()


class _Float64Torch:
    """``torch`` as transformers' Qwen2 module sees it, with ``float32`` (and ``float``) read as float64: its rotary
    tables, RMSNorm and eager softmax, which it computes in float32 even in a float64 model, then run in float64."""

    float32 = torch.float64
    float = torch.float64

    def __getattr__(self, name):
        return getattr(torch, name)


def _transformers_logits(path, monkeypatch=None):  # -> [len(PREFIXES), V] float64
    from transformers import Qwen2ForCausalLM
    from transformers.models.qwen2 import modeling_qwen2

    if monkeypatch is not None:
        monkeypatch.setattr(modeling_qwen2, "torch", _Float64Torch())
    with ck.quiet_transformers():
        model = Qwen2ForCausalLM.from_pretrained(str(path), dtype=torch.float64, attn_implementation="eager").eval()
    lengths = sorted({len(p) for p in PREFIXES})
    with torch.no_grad():
        rows = {n: model(input_ids=torch.tensor([p for p in PREFIXES if len(p) == n])).logits[:, -1] for n in lengths}
    at = {n: iter(rows[n]) for n in lengths}
    return torch.stack([next(at[len(p)]) for p in PREFIXES])  # [len(PREFIXES), V], in PREFIXES' order


def test_specs_are_light_hashable_and_checked():
    code = (
        "import sys\n"
        "from specverify.oracles.checkpoint_spec import MimoPairSpec, MimoSpec\n"
        "MimoPairSpec(MimoSpec(seed=3)).key()\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
    spec = cs.MimoSpec()
    assert cs.MimoSpec.family == cs.MimoPairSpec.family == "checkpoint" and cs.MimoPairSpec.pair_set == "mimo"
    assert spec.key() == cs.MimoPairSpec().key() != cs.MimoSpec(seed=1).key() != cs.CheckpointSpec().key()
    for bad in ({"vocab_size": 1}, {"head_dim": 24}, {"kv_heads": 3}, {"mtp_layers": 0}, {"init_scale": 0.0}):
        with pytest.raises(InvalidArgument):
            cs.MimoSpec(**bad)
    with pytest.raises(InvalidArgument, match="must be a MimoSpec"):
        cs.MimoPairSpec(cs.CheckpointSpec())
    with pytest.raises(InvalidArgument, match="must be a CheckpointSpec"):
        ck.target_dir(spec)  # the Llama recipe refuses a MiMo spec
    with pytest.raises(InvalidArgument, match="must be a MimoSpec"):
        cm.mimo_dir(cs.CheckpointSpec())


def test_build_is_deterministic_with_the_layout_vllm_reads(tmp_path):
    from safetensors.numpy import load_file

    spec = cs.MimoSpec(seed=1)
    first, second = cm.mimo_dir(spec, root=tmp_path / "a"), cm.mimo_dir(spec, root=tmp_path / "b")
    sha = [hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest() for d in (first, second)]
    assert sha[0] == sha[1] and first.name == f"mimo-{spec.key()}"
    assert (first / "tokenizer.json").read_bytes() == (second / "tokenizer.json").read_bytes()
    config = json.loads((first / "config.json").read_text())
    assert config["architectures"] == ["MiMoForCausalLM"] and config["model_type"] == "qwen2"
    assert config["num_nextn_predict_layers"] == 1 and config["eos_token_id"] == 5
    w = load_file(str(first / "model.safetensors"))
    assert all(v.dtype == np.float32 for v in w.values())
    assert abs(float(w["model.layers.0.self_attn.q_proj.bias"].std()) - 0.2) < 0.06  # biases are drawn
    assert np.all(w["model.norm.weight"] == 1)
    mtp = "model.mtp_layers.0."
    assert np.array_equal(w[mtp + "self_attn.k_proj.weight"], w["model.layers.0.self_attn.k_proj.weight"])
    proj = w[mtp + "input_proj.weight"]  # [H, 2H] over [previous hidden | next token's embedding]
    assert proj.shape == (64, 128) and np.all(proj[:, :64] == 0) and np.allclose(proj[:, 64:], 0.2 * np.eye(64))
    assert {mtp + n + ".weight" for n in ("token_layernorm", "hidden_layernorm", "final_layernorm")} <= set(w)
    other = load_file(str(cm.mimo_dir(cs.MimoSpec(seed=2), root=tmp_path / "a") / "model.safetensors"))
    assert not np.array_equal(other["lm_head.weight"], w["lm_head.weight"])


def test_the_forward_matches_transformers_qwen2_in_float64(pair, monkeypatch):
    """Every prefix up to length 3 and 60 longer ones: < 1e-9 from transformers' Qwen2 with its three float32 steps
    run in float64, and within float32 rounding of it as shipped (transformers ignores the MTP layers: they are no
    part of the law)."""
    mine = pair.target.logits(PREFIXES)  # [318, V]
    assert mine.dtype == torch.float64 and mine.shape == (len(PREFIXES), 6)
    shipped = _transformers_logits(pair.target.path)
    assert 1e-9 < float((shipped - mine).abs().max()) < 1e-5
    lifted = _transformers_logits(pair.target.path, monkeypatch)
    assert float((lifted - mine).abs().max()) < 1e-9


def test_grouped_key_value_heads_match_transformers(root, monkeypatch):
    spec = cs.MimoSpec(hidden_size=64, head_dim=16, kv_heads=2, seed=3)  # 4 heads share 2 key/value heads
    model = cm.MimoModel(cm.mimo_dir(spec))
    lifted = _transformers_logits(model.path, monkeypatch)
    assert float((lifted - model.logits(PREFIXES)).abs().max()) < 1e-9


def test_the_pair_serves_the_law_the_greedy_outcome_and_the_batch_cache(pair):
    assert pair.draft is pair.target and pair.spec.pair_set == "mimo"
    law = exact_law(pair.target, (0, 1), SamplingParams(max_tokens=3))
    assert abs(law.probs.sum() - 1) < 1e-12 and len(law) > 20
    assert {reason for _, reason in law.outcomes} == {"eos", "length"}
    greedy = SamplingParams(temperature=0.0, max_tokens=4)
    tokens, reason = greedy_outcome(pair.target, (0, 1), greedy)
    assert boundary_margin(pair.target, (0, 1), greedy) > 1e-3 and reason in ("eos", "length")
    want = [int(pair.target.logits([(0, 1) + tokens[:i]])[0].argmax()) for i in range(len(tokens))]
    assert list(tokens) == want
    cache = pair.target.new_batch_cache(2, 6)
    out = cache.forward(np.array([0, 1]), np.array([[0, 1, 2], [3, 3, 4]]))  # [2, 3, V]
    assert torch.equal(out[1], pair.target.logits([(3,), (3, 3), (3, 3, 4)]))
    cache.crop(np.array([0]), np.array([1]))
    assert torch.equal(cache.forward(np.array([0]), np.array([[4]]))[0, 0], pair.target.logits([(0, 4)])[0])
    with pytest.raises(InvalidArgument, match="not a MiMoForCausalLM"):
        cm.MimoModel(ck.target_dir(cs.CheckpointSpec(), root=pair.target.path.parent))


def test_the_vectorized_reference_is_exact_on_the_mimo_pair(pair):
    from specverify.reference import make_decoder
    from specverify.stats import battery

    params = SamplingParams(max_tokens=3)
    counts = make_decoder(pair.target, pair.draft).sample(Request((0, 1), params, 2, seed=1), 3000)
    law = exact_law(pair.target, (0, 1), params)
    observed, impossible = law.align(counts.outcomes)
    assert impossible == [] and observed.sum() == 3000
    assert battery(observed, law.probs, alpha=1e-6, seed=0).passed
