"""The checkpoint family: deterministic tiny Llama checkpoints, their tokenizer, float64 logits and batch cache."""

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the checkpoint family needs transformers: pip install -e '.[hf]'")

import torch  # noqa: E402

from specverify.errors import InvalidArgument  # noqa: E402
from specverify.oracles import checkpoint as ck  # noqa: E402
from specverify.oracles import checkpoint_spec as cs  # noqa: E402
from specverify.oracles.checkpoint_tokenizer import MAX_POSITIONS  # noqa: E402
from specverify.oracles.law import boundary_margin, exact_law, greedy_outcome  # noqa: E402
from specverify.oracles.models import make_vocab  # noqa: E402
from specverify.oracles.pairs import ToyPairSpec  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402

PROMPTS = [(0, 1), (2, 1), (0,), (3, 4, 1)]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoints")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ck.CACHE_ENV, str(path))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield path


@pytest.fixture(scope="module")
def pair(root):
    return cs.CheckpointPairSpec().build()


def _sha(path):
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def _tv(a, b):
    return float(0.5 * (torch.softmax(a, -1) - torch.softmax(b, -1)).abs().sum())


def test_import_does_not_load_transformers():
    code = "import sys, specverify.oracles.checkpoint; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_specs_are_hashable_and_checked():
    spec = cs.CheckpointSpec()
    assert cs.CheckpointSpec.family == cs.CheckpointPairSpec.family == "checkpoint"
    assert {spec: 1}[cs.CheckpointSpec(init_scale=0.2)] == 1
    assert spec.key() == cs.CheckpointSpec().key() != cs.CheckpointSpec(seed=1).key()
    assert cs.CheckpointPairSpec().key() != cs.CheckpointPairSpec(draft_sigma=0.01).key()
    for bad in ({"vocab_size": 1}, {"head_dim": 24}, {"init_scale": 0.0}, {"seed": -1}, {"eos_scale": math.inf}):
        with pytest.raises(InvalidArgument):
            cs.CheckpointSpec(**bad)
    with pytest.raises(InvalidArgument, match="draft_sigma"):
        cs.CheckpointPairSpec(draft_sigma=-0.1)


def test_build_is_deterministic(tmp_path):
    from safetensors.numpy import load_file

    spec = cs.CheckpointSpec()
    first, second = ck.target_dir(spec, root=tmp_path / "a"), ck.target_dir(spec, root=tmp_path / "b")
    assert _sha(first) == _sha(second)
    assert (first / "tokenizer.json").read_bytes() == (second / "tokenizer.json").read_bytes()
    assert _sha(ck.target_dir(cs.CheckpointSpec(seed=1), root=tmp_path / "a")) != _sha(first)
    copy_dir = ck.draft_dir(cs.CheckpointPairSpec(draft_sigma=0.0), root=tmp_path / "a")
    copy = load_file(str(copy_dir / "model.safetensors"))
    stored = load_file(str(first / "model.safetensors"))
    assert sorted(copy) == sorted(stored) and all(np.array_equal(copy[k], stored[k]) for k in stored)
    assert np.all(stored["model.norm.weight"] == 1) and stored["lm_head.weight"].dtype == np.float32
    assert abs(float(stored["model.embed_tokens.weight"].std()) - 0.2) < 0.03
    scaled = load_file(str(ck.target_dir(cs.CheckpointSpec(eos_scale=0.0), root=tmp_path / "a") / "model.safetensors"))
    assert np.all(scaled["lm_head.weight"][-1] == 0)
    assert np.array_equal(scaled["lm_head.weight"][:-1], stored["lm_head.weight"][:-1])


def test_cache_env_var_is_respected(tmp_path, monkeypatch):
    monkeypatch.setenv(ck.CACHE_ENV, str(tmp_path / "cache"))
    assert ck.cache_root() == tmp_path / "cache"
    built = cs.CheckpointPairSpec(draft_sigma=0.0).build()
    assert built.target.path.parent == tmp_path / "cache" == built.draft.path.parent
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()) == ["draft", "target"]
    monkeypatch.delenv(ck.CACHE_ENV)
    assert ck.cache_root() == Path.home() / ".cache" / "specverify" / "checkpoints"


def test_a_concurrent_writer_wins_the_rename(tmp_path, monkeypatch):
    """The target directory appears while ours is being written: ours is discarded, theirs is kept."""
    spec, final = cs.CheckpointSpec(), tmp_path / f"target-{cs.CheckpointSpec().key()}"
    write = ck._write_checkpoint

    def racing_write(directory, *args):
        write(directory, *args)
        rival = tmp_path / "rival"
        rival.mkdir()
        write(rival, *args)
        (rival / "rival-was-here").write_text("")
        os.rename(rival, final)

    monkeypatch.setattr(ck, "_write_checkpoint", racing_write)
    assert ck.target_dir(spec, root=tmp_path) == final
    assert (final / "rival-was-here").exists()
    assert [p.name for p in tmp_path.iterdir()] == [final.name]  # our temporary directory is gone
    assert ck.target_dir(spec, root=tmp_path) == final  # already there: nothing is written


def test_tokenizer_round_trip(pair, tmp_path):
    from transformers import AutoTokenizer

    from specverify.oracles.checkpoint_tokenizer import EOS_TOKEN, save_tokenizer

    save_tokenizer(make_vocab(16), tmp_path)  # the largest toy vocabulary holds " ", "  " and "b "
    rng = np.random.default_rng(0)
    for vocab, path in ((pair.vocab, pair.target.path), (make_vocab(16), tmp_path)):
        tok = AutoTokenizer.from_pretrained(str(path))
        assert tok.eos_token == EOS_TOKEN and tok.eos_token_id == vocab.eos_token_id == len(tok) - 1
        for _ in range(200):
            ids = rng.integers(0, vocab.size, rng.integers(1, 12)).tolist()
            assert tok.decode(ids, skip_special_tokens=True) == vocab.text(ids)
        assert tok.decode([3, 3, 0, 3], skip_special_tokens=True) == "  a "
        if vocab.size == 16:
            assert tok.decode([10, 6, 10], skip_special_tokens=True) == "  b   "


def test_logits_match_a_float32_reload(pair):
    from transformers import LlamaForCausalLM

    model32 = LlamaForCausalLM.from_pretrained(str(pair.target.path))
    assert model32.dtype == torch.float32 and model32.config.eos_token_id == pair.vocab.eos_token_id
    rng = np.random.default_rng(1)
    prefixes = [tuple(rng.integers(0, 6, n).tolist()) for n in (1, 1, 2, 3, 3, 5, 8)]
    got = pair.target.logits(prefixes)  # [B, V]
    assert got.dtype == torch.float64 and got.shape == (len(prefixes), 6)
    with torch.no_grad():
        want = torch.stack([model32(input_ids=torch.tensor([p])).logits[0, -1] for p in prefixes]).double()
    assert float((got - want).abs().max()) < 1e-4
    assert torch.equal(pair.target.logits(prefixes[::-1]), got.flip(0))  # memoised rows are pure
    for bad in ([()], [(0, 6)], [(0,) * (MAX_POSITIONS + 1)], []):
        with pytest.raises(InvalidArgument):
            pair.target.logits(bad)


def test_batch_cache_matches_logits(pair):
    model, rng = pair.target, np.random.default_rng(2)
    cache = model.new_batch_cache(3, 10)
    stored = [[], [], []]
    for _ in range(12):
        rows = np.sort(rng.choice(3, rng.integers(1, 4), replace=False))
        if rng.random() < 0.35:
            lengths = np.array([rng.integers(0, len(stored[r]) + 1) for r in rows])
            cache.crop(rows, lengths)
            for r, n in zip(rows, lengths):
                del stored[r][n:]
            continue
        k = int(rng.integers(1, 4))
        k = min(k, 10 - max(len(stored[r]) for r in rows))
        if k < 1:
            continue
        tokens = rng.integers(0, 6, (rows.size, k))
        out = cache.forward(rows, tokens)  # [n, k, V]
        assert out.shape == (rows.size, k, 6) and out.dtype == torch.float64
        for i, r in enumerate(rows):
            stored[r].extend(tokens[i].tolist())
            start = len(stored[r]) - k
            assert torch.equal(out[i], model.logits([tuple(stored[r][: start + j + 1]) for j in range(k)]))
        assert cache.lengths.tolist() == [len(s) for s in stored]
    with pytest.raises(InvalidArgument, match="capacity"):
        cache.forward(np.array([0]), np.zeros((1, 11), dtype=np.int64))
    with pytest.raises(InvalidArgument):
        cache.crop(np.array([0]), np.array([11]))
    with pytest.raises(InvalidArgument):
        model.new_batch_cache(0, 4)


def test_exact_law_matches_transformers(pair):
    """Each outcome's probability, recomputed as a product of float32 softmax rows from full-sequence forwards."""
    from transformers import LlamaForCausalLM

    model32 = LlamaForCausalLM.from_pretrained(str(pair.target.path))
    prompt = (0, 1)
    law = exact_law(pair.target, prompt, SamplingParams(max_tokens=3))
    assert abs(law.probs.sum() - 1) < 1e-12 and len(law) > 20
    reasons = {reason for _, reason in law.outcomes}
    assert reasons == {"eos", "length"}
    by_length = {}
    for i, (tokens, _) in enumerate(law.outcomes):
        by_length.setdefault(len(tokens), []).append(i)
    for n, members in by_length.items():
        seqs = torch.tensor([prompt + law.outcomes[i][0] for i in members])  # [m, len(prompt) + n]
        with torch.no_grad():
            probs = torch.softmax(model32(input_ids=seqs[:, :-1]).logits.double(), -1)  # [m, L - 1, V]
        steps = probs[:, len(prompt) - 1 :].gather(-1, seqs[:, len(prompt) :, None])[..., 0]  # [m, n]
        assert np.allclose(steps.prod(-1).numpy(), law.probs[members], rtol=0, atol=1e-6)  # the issue: 1e-6 per outcome


def test_default_pair_is_context_dependent_and_the_draft_dial_works(pair, root):
    rows = ck.describe_pair(pair, PROMPTS)
    assert [r["prompt"] for r in rows] == PROMPTS
    for r in rows:
        assert 0.3 < r["entropy"] < math.log(6) and r["max_prob"] < 0.95 and 0.0 < r["tv"] < 0.3
    after = pair.target.logits([(0, 1), (2, 1)])
    assert _tv(after[0], after[1]) > 0.05  # same last token, different context
    mean_tv = []
    for sigma in (0.0, 0.001, 0.003, 0.01):
        built = cs.CheckpointPairSpec(draft_sigma=sigma).build()
        mean_tv.append(float(np.mean([r["tv"] for r in ck.describe_pair(built, PROMPTS)])))
    toy = ck.describe_pair(ToyPairSpec().build(), [(0, 1)])[0]  # any pair with logits() works
    assert 0 < toy["tv"] < 1 and 0 < toy["max_prob"] < 1
    assert mean_tv[0] == 0.0 and all(a < b for a, b in zip(mean_tv, mean_tv[1:])), mean_tv


def test_vectorized_reference_runs_on_a_checkpoint_pair(pair):
    from specverify.reference import make_decoder

    params = SamplingParams(max_tokens=3)
    counts = make_decoder(pair.target, pair.draft).sample(Request((0, 1), params, 2, seed=1), 2000)
    law = exact_law(pair.target, (0, 1), params)
    assert sum(counts.outcomes.values()) == 2000
    observed, impossible = law.align(counts.outcomes)
    assert impossible == [] and observed.sum() == 2000
    assert 0.5 * np.abs(observed / 2000 - law.probs).sum() < 0.12  # seeded draws: a fixed number, about 0.07


def test_greedy_matches_transformers_cached_generation(pair):
    """transformers' own KV-cached ``generate`` (float32) gives the oracle's greedy outcome and the same logits."""
    from transformers import LlamaForCausalLM

    model32 = LlamaForCausalLM.from_pretrained(str(pair.target.path))
    eos = pair.vocab.eos_token_id
    for prompt in PROMPTS:
        params = SamplingParams(max_tokens=4, temperature=0.0)
        assert boundary_margin(pair.target, prompt, params) > 1e-3  # float32 cannot flip an argmax
        tokens, _ = greedy_outcome(pair.target, prompt, params)
        out = model32.generate(
            torch.tensor([prompt]),
            do_sample=False,
            max_new_tokens=4,
            eos_token_id=eos,
            pad_token_id=eos,
            output_logits=True,
            return_dict_in_generate=True,
        )
        assert tuple(out.sequences[0, len(prompt) :].tolist()) == tokens
        scores = torch.cat(out.logits).double()  # [len(tokens), V]
        want = pair.target.logits([prompt + tokens[:i] for i in range(len(tokens))])
        assert float((scores - want).abs().max()) < 1e-4


def test_a_two_layer_eight_token_pair_builds(root):
    built = cs.CheckpointPairSpec(cs.CheckpointSpec(vocab_size=8, num_layers=2, seed=5), draft_sigma=0.002).build()
    assert built.vocab == make_vocab(8) and built.target.logits([(0, 7, 1)]).shape == (1, 8)
    law = exact_law(built.target, (6, 2), SamplingParams(max_tokens=2))
    assert abs(law.probs.sum() - 1) < 1e-12
