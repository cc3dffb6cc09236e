"""The vLLM adapter's table of methods and its options (``specverify.adapters.vllm.methods``) and the factories made
from it (``factories``), without vLLM: names, pickling, option checks, the speculative configs that refuse before any
engine starts."""

import pickle

import pytest

from specverify.adapters import vllm as va
from specverify.adapters.vllm import patches
from specverify.adapters.vllm.methods import METHODS, method_options
from specverify.certification.matrix.checkpoint import CHECKPOINT_PAIRS
from specverify.errors import InvalidArgument


@pytest.fixture(scope="module")
def pair():
    return CHECKPOINT_PAIRS["main"].build()


def test_every_method_has_a_module_level_factory(vllm_0_32_on_cpu):
    """The factories are made from the table, named as ``specverify.adapters.vllm:NAME``, picklable for the worker
    process, and declare the AR draft family (the checkpoint matrix)."""
    assert {"draft_model", "draft_model_greedy", "ngram", "plain"} <= set(va.METHODS)
    for name, spec in va.METHODS.items():
        factory = getattr(va, name)
        assert (factory.__name__, factory.__qualname__, factory.__module__) == (name, name, va.__name__)
        assert pickle.loads(pickle.dumps(factory)) is factory and factory.draft_family == "ar"
        patched = method_options(name, factory.engine_configs["patched"].options)  # --engine-config patched
        assert patched["workaround"] == list(patches.WORKAROUNDS)
        options = method_options(name, {})
        assert set(options) == set(va.COMMON_OPTIONS) | set(spec.options)
        assert pickle.loads(pickle.dumps(options)) == options
    assert method_options("draft_model", {})["draft_sample_method"] == "probabilistic"
    assert method_options("draft_model_greedy", {})["draft_sample_method"] == "greedy"
    assert va.METHODS["draft_model"].law({"draft_sample_method": "greedy"}) == "model-argmax"
    assert va.METHODS["draft_model_greedy"].law({"draft_sample_method": "probabilistic"}) == "model-temperature"
    spec = va.METHODS["ngram"].speculative_config("t", None, 4, method_options("ngram", {"prompt_lookup_max": 3}))
    assert spec == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3, "prompt_lookup_min": 1}


def test_unknown_or_malformed_engine_options_are_refused(vllm_0_32_on_cpu):
    accepted = r"it accepts \['declare_seed', 'draft_sample_method'"
    with pytest.raises(InvalidArgument, match=r"foo=1 not accepted .*:draft_model: " + accepted):
        method_options("draft_model", {"foo": 1})
    with pytest.raises(InvalidArgument, match="draft_sample_method='greedy' not accepted .*:ngram"):
        method_options("ngram", {"draft_sample_method": "greedy"})
    with pytest.raises(InvalidArgument, match="draft_sample_method='sampled' must be one of"):
        method_options("draft_model", {"draft_sample_method": "sampled"})
    with pytest.raises(InvalidArgument, match="prompt_lookup_min=0 must be an int >= 1"):
        method_options("ngram", {"prompt_lookup_min": 0})
    with pytest.raises(InvalidArgument, match="threads=0 must be an int >= 1"):
        method_options("ngram", {"threads": 0})
    with pytest.raises(InvalidArgument, match="workaround='patch-everything' is not a workaround"):
        method_options("plain", {"workaround": "patch-everything"})
    with pytest.raises(InvalidArgument, match="workaround=3 must be a name or a list of names"):
        method_options("plain", {"workaround": 3})
    both = method_options("ngram", {"workaround": ["stop-metrics", "expand-kernel"]})["workaround"]
    assert patches.workarounds_of(both) == ("expand-kernel", "stop-metrics")


def test_mtp_checks_its_target_and_gamma(pair, tmp_path):
    """No vLLM: the mtp config refuses a target without MTP layers, and γ above the layer count unless divisible."""
    from specverify.oracles.checkpoint_mimo import mimo_dir
    from specverify.oracles.checkpoint_spec import MimoSpec

    assert va.mtp.checkpoint_pairs == "mimo" and va.eagle.checkpoint_pairs == "llama"
    with pytest.raises(InvalidArgument, match="without MTP layers"):
        va.mtp(pair.target, pair.draft)  # a Llama target: refused before vLLM is imported
    config, options = METHODS["mtp"].speculative_config, {"draft_sample_method": "greedy"}
    two = str(mimo_dir(MimoSpec(mtp_layers=2), root=tmp_path))
    assert [config(two, None, g, options)["num_speculative_tokens"] for g in (1, 2, 4)] == [1, 2, 4]
    with pytest.raises(InvalidArgument, match="divisible"):
        config(two, None, 3, options)
    assert "model" not in config(two, None, 2, options)  # the drafts come from the target's directory


def test_suffix_options_are_checked(pair):
    with pytest.raises(InvalidArgument, match="reset_suffix_cache='yes' must be true or false"):
        va.suffix(pair.target, pair.draft, reset_suffix_cache="yes")
    with pytest.raises(InvalidArgument, match="prompt_lookup_min"):
        va.suffix(pair.target, pair.draft, prompt_lookup_min=1)  # an ngram option: not suffix's


def test_every_factory_declares_the_options_it_takes_so_a_wrong_key_is_refused_before_any_work(capsys):
    """``factory.engine_options`` is what ``method_options`` accepts; the CLI refuses a key outside it at once,
    without importing vLLM (issue 41: a bad option reported in seconds, not after the engine starts)."""
    import sys

    import specverify.adapters.vllm as va
    from specverify.adapters.vllm.methods import COMMON_OPTIONS, METHODS
    from specverify.cli import ExitCode, main

    for name in METHODS:
        assert getattr(va, name).engine_options == {**COMMON_OPTIONS, **METHODS[name].options}, name
    before = "vllm" in sys.modules  # the engine suite imports it before this test
    code = main(["certify", "specverify.adapters.vllm:draft_model", "--models", "checkpoint", "--engine-option",
                 "no_such_option=1"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "--engine-option no_such_option=1: draft_model takes [" in err, err
    assert ("vllm" in sys.modules) == before  # refused before the engine was imported
