"""``specverify.zoo.catalogue`` (what ``specverify zoo`` lists without importing a decoder) is the live registry, and
importing the zoo package is light until a name of it is used."""

import subprocess
import sys
from pathlib import Path

from specverify.zoo import catalogue
from specverify.zoo.catalogue import CATALOGUE, live_catalogue, render

REGENERATE = "python -m specverify.zoo.catalogue"


def python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_the_catalogue_is_the_live_registry():
    live = live_catalogue()
    listed, registered = {e.name: e for e in CATALOGUE}, {e.name: e for e in live}
    stale = sorted(n for n in listed.keys() | registered.keys() if listed.get(n) != registered.get(n))
    assert not stale, f"specverify/zoo/catalogue.py is stale for {stale}: regenerate it with `{REGENERATE}`"
    assert CATALOGUE == live, f"the catalogue's order is not the registry's: regenerate it with `{REGENERATE}`"


def test_the_catalogue_module_holds_what_the_generator_writes():
    live = live_catalogue()
    namespace = {}
    exec(render(live), namespace)  # our own generated source: it reads back as what it was written from
    assert tuple(catalogue._entry(*row) for row in namespace["_ROWS"]) == live
    source = Path(catalogue.__file__).read_text(encoding="utf-8")
    assert render(live) in source, f"the generated block was edited by hand: regenerate it with `{REGENERATE}`"


def test_the_factories_are_where_the_catalogue_says():
    import importlib

    for entry in CATALOGUE:
        module, attr = entry.factory.split(":")
        assert getattr(importlib.import_module(module), attr).__name__ == entry.name


def test_importing_the_zoo_and_its_catalogue_is_light():
    code = "import sys, specverify.zoo, specverify.zoo.catalogue; print('torch' in sys.modules)"
    assert python(code) == "False"


def test_the_registry_order_does_not_depend_on_which_module_came_first():
    code = (
        "import specverify.zoo.state, specverify.zoo.drafts\n"
        "from specverify.zoo import zoo_entries\n"
        "print(' '.join(e.name for e in zoo_entries()))"
    )
    assert python(code).split() == [e.name for e in CATALOGUE]


def test_a_zoo_module_run_again_replaces_its_own_entries():
    code = (
        "import importlib, sys\n"
        "import specverify.zoo.rule as rule\n"
        "from specverify.zoo._registry import registered\n"
        "importlib.reload(rule)\n"
        "del sys.modules['specverify.zoo.rule']\n"
        "import specverify.zoo.rule as again\n"
        "print(registered()['shared_uniform'].factory is again.shared_uniform, len(registered()))"
    )
    assert python(code) == f"True {sum(e.factory.startswith('specverify.zoo.rule:') for e in CATALOGUE)}"
