"""The zoo's catalogue: every entry is an importable factory, documented, tagged and a small mutation."""

import importlib
import inspect
import re

import pytest

from specverify.enums import Verdict
from specverify.mechanisms import MECHANISMS
from specverify.reference.vectorized import VectorizedDecoder
from specverify.zoo import SHOWCASES, ZOO, ZooEntry, zoo_entries
from specverify.zoo.showcases import models

PROJECTS = r"FlashInfer|SGLang|vLLM|transformers|TensorRT-LLM|llama\.cpp|1Cat-vLLM|vllm-ascend|DeepSpec|z-lab/dflash"
MORE = r"rMLX|pegainfer|tpu-inference|Relax|ATOM|xLLM|LiteRT-LM|ik_llama\.cpp|vmlx|speculators"
FIELD = r"ds4|mlx-lm|mlxcel|imp|model-serving-minefield"  # issue 45
BUG_ID = re.compile(rf"^({PROJECTS}|{MORE}|{FIELD}) (PR )?#\d+$|^seed$")
HOOK_MODULES = ("specverify.zoo._hooks", "specverify.zoo._counting")  # shared bases, not mutations


def test_the_zoo_holds_every_verdict_and_enough_mechanisms():
    entries = zoo_entries()
    assert len(entries) >= 15 and entries == list(ZOO.values())
    assert {e.verdict for e in entries} == set(Verdict.decoder_verdicts())
    assert all(isinstance(e.verdict, Verdict) for e in entries)
    assert sum(e.verdict == "exact" for e in entries) >= 3
    assert len({e.mechanism for e in entries}) == len(entries), "one zoo entry per mechanism"


@pytest.mark.parametrize("name", list(ZOO))
def test_entry_is_an_importable_documented_factory(name):
    entry = ZOO[name]
    assert isinstance(entry, ZooEntry) and entry.name == name == entry.factory.__name__
    assert getattr(importlib.import_module("specverify.zoo"), name) is entry.factory  # specverify.zoo:NAME
    doc = inspect.getdoc(entry.factory)
    assert entry.summary == doc.splitlines()[0]
    assert f"Verdict: {entry.verdict}" in doc, "the docstring derives the tag"
    assert entry.mechanism in MECHANISMS and entry.bugs == MECHANISMS[entry.mechanism].bugs
    for bug in entry.bugs:
        assert BUG_ID.match(bug), bug
        number = bug.split(" ")[-1]
        assert bug == "seed" or number in doc or number.lstrip("#") in doc, f"{bug} is not named in the docstring"
    if "seed" in entry.bugs:
        assert "seed" in doc, "a seed failure mode says so in the docstring"
    assert entry.showcases and all(s in SHOWCASES for s in entry.showcases)


@pytest.mark.parametrize("name", list(ZOO))
def test_entry_is_a_small_mutation_of_the_reference(name):
    entry = ZOO[name]
    if entry.drafts == "ar":
        decoder = entry.factory(*models())
    else:  # its family's own draft object (docs/adapters.md)
        from specverify.certification.matrix.drafts import DraftPairSpec

        pair = DraftPairSpec(drafts=entry.drafts).build()
        decoder = entry.factory(pair.target, pair.draft)
    assert isinstance(decoder, VectorizedDecoder)
    assert sum(decoder.sample(SHOWCASES["plain"].request(seed=0), 50).outcomes.values()) == 50
    for cls in type(decoder).__mro__:
        if cls.__module__.startswith("specverify.zoo") and cls.__module__ not in HOOK_MODULES:
            lines = [ln for ln in inspect.getsource(cls).splitlines() if ln.strip()]
            assert len(lines) <= 25, f"{cls.__name__} has {len(lines)} lines: a zoo mutation stays small"
