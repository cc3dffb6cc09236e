"""The GGUF export of the checkpoint models (``specverify.adapters.boundary.gguf_export``) read by llama.cpp itself:
its logits match the oracle on every prefix, its toy pieces detokenise to the toy strings. Run in the llama.cpp venv
of .ci/llamacpp."""

import numpy as np
import pytest

from specverify.adapters.boundary import gguf_export as lg
from tests.adapters.llamacpp._engines import needs_llama


@pytest.fixture(scope="module")
def pair():
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    return CHECKPOINT_PAIRS["main"].build()


@needs_llama
@pytest.mark.parametrize("name", ["main", "sharp-close", "far-eos"])
def test_gguf_logits_agree_with_the_oracle_on_every_prefix(name):
    """Every prefix of every length-3 sequence and of 20 random length-12 ones, target and draft: llama.cpp's
    float32 logits (one batched evaluation per sequence, F32 KV cache) within 1e-5 of the float64 oracle, relative
    to max(1, |logit|) (the sharp pair's logits reach 10: float32 rounding alone gives 1.3e-5 there), and every
    next-token probability within 1e-5."""
    import itertools

    from specverify.adapters.llamacpp.bindings import _llama, import_llama_cpp
    from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS

    models = CHECKPOINT_PAIRS[name].build()
    rng = np.random.default_rng(3)
    size = models.target.vocab.size
    seqs = [list(s) for s in itertools.product(range(size), repeat=3)]
    seqs += [rng.integers(0, size, 12).tolist() for _ in range(20)]
    for model in (models.target, models.draft):
        llm = _llama(import_llama_cpp(), lg.gguf_file(model, "toy"), logits_all=True)
        worst, worst_prob = 0.0, 0.0
        for seq in seqs:
            llm.reset()
            llm.eval(seq)
            got = np.array(llm.scores[: len(seq)], dtype=np.float64)
            want = model.logits([seq[: i + 1] for i in range(len(seq))]).numpy()
            worst = max(worst, float((np.abs(got - want) / np.maximum(1.0, np.abs(want))).max()))
            worst_prob = max(worst_prob, float(np.abs(_softmax(got) - _softmax(want)).max()))
        assert worst < 1e-5 and worst_prob < 1e-5, (name, model, worst, worst_prob)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@needs_llama
def test_toy_pieces_detokenise_to_the_toy_strings(pair):
    from specverify.adapters.llamacpp.bindings import _llama, import_llama_cpp

    llm = _llama(import_llama_cpp(), lg.gguf_file(pair.target, "toy"))
    vocab = pair.target.vocab
    for i, s in enumerate(vocab.strings):
        assert llm.detokenize([i]).decode() == s, i
    char = _llama(import_llama_cpp(), lg.gguf_file(pair.target, "char"))
    tokens = [0, 1, 2, 3, 4, 0, 1]
    assert char.tokenize(lg.char_text(tokens, 5).encode(), add_bos=False, special=True) == tokens
