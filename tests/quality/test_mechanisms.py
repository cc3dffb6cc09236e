"""One catalogue of mechanisms: every zoo entry and every fuzz mutant names an id of ``specverify.mechanisms``, and
the mechanisms the zoo and the fuzzer both implement point at the same id."""

import ast
import importlib.util
import inspect
import re

import pytest

from specverify.errors import InvalidArgument
from specverify.fuzz.whitebox import mutants
from specverify.mechanisms import MECHANISMS, SEED, Mechanism
from specverify.zoo import ZOO
from tests.fuzz.test_recurrent import ReplaysRejected

MUTANT_NAMES = sorted(mutants.MUTANTS) + sorted(mutants.BATCH_MUTANTS)
#: implemented twice, once per harness: a zoo decoder for the certifier, a white-box mutant for the fuzzer
SHARED = {
    "penalty-history-not-rolled-back",
    "stop-state-not-rolled-back",
    "grammar-state-not-rolled-back",
    "target-kv-not-cropped",
}
BUGS_MD_ENTRY = re.compile(
    r"^(FlashInfer|SGLang|vLLM|transformers|TensorRT-LLM|llama\.cpp|1Cat-vLLM|vllm-ascend|DeepSpec|z-lab/dflash|rMLX"
    r"|pegainfer|tpu-inference|Relax|ATOM|xLLM|LiteRT-LM|ik_llama\.cpp|vmlx|speculators|ds4|mlx-lm|mlxcel|imp"
    r"|model-serving-minefield) (PR )?#\d+$"
)


def mutant_mechanisms() -> dict:
    return {name: getattr(mutants, name).mechanism for name in MUTANT_NAMES}


def component_mechanisms() -> dict:
    """Broken components the fuzz tests hunt (not decoders), by the mechanism they stand for."""
    found = {"ReplaysRejected": ReplaysRejected.mechanism}
    if importlib.util.find_spec("xgrammar") is not None:
        from tests.fuzz.test_xgrammar import NoRollback

        found["NoRollback"] = NoRollback.mechanism
    return found


def test_every_mutant_of_the_module_is_listed_and_names_a_mechanism():
    classes = {
        name
        for name, obj in vars(mutants).items()
        if inspect.isclass(obj) and obj.__module__ == mutants.__name__ and not name.startswith("_")
    }
    assert classes == set(MUTANT_NAMES)
    named = {**mutant_mechanisms(), **component_mechanisms()}
    unknown = {name: m for name, m in named.items() if m not in MECHANISMS}
    assert not unknown, f"mutants name ids missing from MECHANISMS: {unknown}"


def test_every_zoo_entry_names_a_mechanism():
    unknown = {name: e.mechanism for name, e in ZOO.items() if e.mechanism not in MECHANISMS}
    assert not unknown, f"zoo entries name ids missing from MECHANISMS: {unknown}"


def test_the_catalogue_holds_exactly_the_mechanisms_in_use():
    used = {e.mechanism for e in ZOO.values()} | set(mutant_mechanisms().values())
    used |= set(component_mechanisms().values())
    assert used == set(MECHANISMS), f"unused: {sorted(set(MECHANISMS) - used)}"


def test_the_state_rollback_mechanisms_are_shared_by_zoo_and_fuzz():
    shared = {e.mechanism for e in ZOO.values()} & set(mutant_mechanisms().values())
    assert SHARED <= shared, f"not shared: {sorted(SHARED - shared)}"


@pytest.mark.parametrize("mechanism", list(MECHANISMS.values()), ids=list(MECHANISMS))
def test_record_is_well_formed(mechanism):
    assert MECHANISMS[mechanism.id] is mechanism and mechanism.title and mechanism.state
    assert len(set(mechanism.bugs)) == len(mechanism.bugs)
    assert all(b == SEED or BUGS_MD_ENTRY.match(b) for b in mechanism.bugs), mechanism.bugs


def test_bad_records_raise_invalid_argument_with_the_fix():
    with pytest.raises(InvalidArgument, match=r"id='Penalty History' must be a kebab-case id"):
        Mechanism("Penalty History", "t", "s")
    with pytest.raises(InvalidArgument, match=r"holds \['#12'\]: write each as 'project #number' or 'seed'"):
        Mechanism("x-y", "t", "s", ("#12",))


def test_the_catalogue_imports_nothing_from_specverify_but_errors():
    import specverify.mechanisms as module

    tree = ast.parse(inspect.getsource(module))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    data = "specverify._mechanisms_processors"  # one section of the catalogue, apart for its size: data too
    assert {m for m in imported if m.split(".")[0] == "specverify"} == {
        "specverify.errors",
        "specverify._mechanism",
        data,
    }
    import specverify._mechanism as kind
    import specverify._mechanisms_processors as section

    for part, allowed in ((kind, {"specverify.errors"}), (section, {"specverify._mechanism"})):
        tree = ast.parse(inspect.getsource(part))
        assert {
            n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module.startswith("specverify")
        } == allowed
