"""The toy family through transformers (``specverify.adapters.transformers.toy_model``): its cache, a
``DynamicCache`` or a ``StaticCache`` of the installed transformers, runs the same operation sequences as a real
Llama's, with the logits read only from what is stored."""

import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install -e '.[hf]'")

import torch  # noqa: E402

OPS = [("append", [0, 1, 2]), ("crop", 0), ("append", [3]), ("crop", -2), ("crop", 0), ("crop", -1), ("crop", 2)]
OPS += [("append", [1, 1]), ("crop", -10), ("crop", -1), ("append", [2]), ("crop", 1), ("append", [0, 3])]


STATIC_OPS = [op for op in OPS if op != ("crop", -10)]


def _run_ops(model, cache, probe, ops=OPS):
    """Apply ``ops``; after each, the stored length, the exception (if any) and the logits after the stored prefix
    plus ``probe`` computed through the cache (then cropped away again)."""
    trace = []
    for op, arg in ops:
        error = None
        try:
            if op == "append":
                model(input_ids=torch.tensor([arg]), cache=cache, use_cache=True)
            else:
                cache.crop(arg)
        except Exception as exc:  # noqa: BLE001 - the exception type is what is compared
            error = type(exc).__name__
        length = int(cache.get_seq_length())  # a StaticCache returns its length tensor, mutated in place later
        logits = model(input_ids=torch.tensor([[probe]]), cache=cache, use_cache=True).logits[0, -1]
        cache.crop(-1)
        trace.append((op, arg, error, length, logits))
    return trace


def test_toy_cache_conformance(toy_pair, checkpoint_pair):
    """The same operation sequence on the toy model's cache and on a real Llama's DynamicCache: same lengths and
    errors (crop(0) a no-op, crop(-n) removes n, crop(+n) raises), and logits only from what is stored."""
    from transformers import DynamicCache, LlamaForCausalLM

    from specverify.adapters.transformers.toy_model import stored_prefix_keys, wrap_toy

    toy = wrap_toy(toy_pair.target)
    llama = LlamaForCausalLM.from_pretrained(str(checkpoint_pair.target.path), dtype=torch.float32).eval()
    toy_cache, llama_cache = DynamicCache(config=toy.config), DynamicCache(config=llama.config)
    out = toy.generate(torch.tensor([[0, 1]]), max_new_tokens=2, do_sample=False, return_dict_in_generate=True)
    assert type(out.cache) is type(toy_cache) and [type(x) for x in out.cache.layers] == [type(toy_cache.layers[0])]
    with torch.no_grad():
        toy_trace = _run_ops(toy, toy_cache, probe=2)
        llama_trace = _run_ops(llama, llama_cache, probe=2)
    stored = []  # what DynamicCache's documented semantics leave stored
    for (op, arg, error, length, logits), (_, _, llama_error, llama_length, llama_logits) in zip(
        toy_trace, llama_trace
    ):
        if op == "append":
            stored += arg
        elif arg < 0:
            stored = stored[:arg] if -arg < len(stored) else []
        assert (error, length) == (llama_error, llama_length) == (error, len(stored)), (op, arg)
        expect = toy_pair.target.logits([tuple(stored) + (2,)])[0].to(torch.float32)
        assert torch.equal(logits, expect), (op, arg)
        llama_expect = checkpoint_pair.target.logits([tuple(stored) + (2,)])[0].to(torch.float32)
        assert torch.allclose(llama_logits, llama_expect, atol=1e-4), (op, arg)
    assert [e for _, _, e, _, _ in toy_trace].count("ValueError") == 2  # crop(2) and crop(1): positive
    assert len(stored_prefix_keys(toy_cache)) == len(stored)


def test_toy_static_cache_conformance(toy_pair, checkpoint_pair):
    """The static-cache configuration: the same operation sequence on the toy model's StaticCache and on a real
    Llama's, same lengths and errors (crop(+n) raises), the toy's logits only from what is stored up to the
    cache's length (its tensors are preallocated: the tail past the length is stale and never read)."""
    from transformers import LlamaForCausalLM, StaticCache

    from specverify.adapters.transformers.toy_model import stored_prefix_keys, wrap_toy

    toy = wrap_toy(toy_pair.target)
    llama = LlamaForCausalLM.from_pretrained(str(checkpoint_pair.target.path), dtype=torch.float32).eval()
    out = toy.generate(torch.tensor([[0, 1]]), max_new_tokens=2, do_sample=False, return_dict_in_generate=True,
                       cache_implementation="static")  # fmt: skip
    assert type(out.cache) is StaticCache and type(out.cache.layers[0]).__name__ == "StaticLayer"
    toy_cache = StaticCache(config=toy.config, max_cache_len=16)
    llama_cache = StaticCache(config=llama.config, max_cache_len=16)
    with torch.no_grad():
        toy_trace = _run_ops(toy, toy_cache, probe=2, ops=STATIC_OPS)
        llama_trace = _run_ops(llama, llama_cache, probe=2, ops=STATIC_OPS)
    stored = []
    for (op, arg, error, length, logits), (_, _, llama_error, llama_length, llama_logits) in zip(
        toy_trace, llama_trace
    ):
        if op == "append":
            stored += arg
        elif error is None and arg < 0:
            stored = stored[:arg]
        assert (error, length) == (llama_error, llama_length) == (error, len(stored)), (op, arg)
        expect = toy_pair.target.logits([tuple(stored) + (2,)])[0].to(torch.float32)
        assert torch.equal(logits, expect), (op, arg)
        llama_expect = checkpoint_pair.target.logits([tuple(stored) + (2,)])[0].to(torch.float32)
        assert torch.allclose(llama_logits, llama_expect, atol=1e-4), (op, arg)
    assert [e for _, _, e, _, _ in toy_trace].count("RuntimeError") == 2  # crop(2) and crop(1): positive
    assert len(stored_prefix_keys(toy_cache)) == len(stored)
