"""The public surface of specverify.stats: exports, imports, docstrings and doctests."""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import inspect
import pathlib
import subprocess
import sys

import pytest

import specverify.stats as sv_stats

STATS_DIR = pathlib.Path(sv_stats.__file__).parent
MODULES = sorted(p.stem for p in STATS_DIR.glob("*.py") if p.stem != "__init__")
FUNCTIONS = [
    "pooled_cells",
    "goodness_of_fit",
    "plan_sample_size",
    "detectable_tv",
    "tv_estimate",
    "worst_outcomes",
    "surprisal_test",
    "max_cell_test",
    "battery",
    "holm",
    "homogeneity_test",
    "collision_test",
    "collision_probability",
    "family_alpha_per_test",
    "plan_sequential",
    "sequential_decision",
    "battery_directions",
    "side_pvalues",
    "prefix_directions",
    "prefix_score_test",
]
RESULTS = [
    "GofResult",
    "TVResult",
    "OutcomeResidual",
    "SurprisalResult",
    "MaxCellResult",
    "BatteryResult",
    "CollisionResult",
    "SequentialPlan",
    "SequentialDecision",
    "PrefixScoreResult",
]


def test_all_lists_exactly_the_public_names():
    assert set(FUNCTIONS + RESULTS) <= set(sv_stats.__all__)
    public = {
        name
        for name, value in vars(sv_stats).items()
        if name.isidentifier() and not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert public == set(sv_stats.__all__)
    for name in sv_stats.__all__:
        assert getattr(sv_stats, name) is not None


@pytest.mark.parametrize("module", MODULES)
def test_imports_only_numpy_scipy_and_errors(module):
    allowed = {"numpy", "scipy", "specverify.errors"}
    tree = ast.parse((STATS_DIR / f"{module}.py").read_text())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            ok = top in sys.stdlib_module_names or top in allowed or name in allowed
            ok = ok or name.startswith("specverify.stats")
            assert ok, f"specverify/stats/{module}.py imports {name}"


def test_importing_stats_does_not_import_torch():
    code = "import sys, specverify.stats; print('torch' in sys.modules, 'hypothesis' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["False", "False"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_public_functions_have_numpydoc_notes(name):
    doc = getattr(sv_stats, name).__doc__
    for section in ("Parameters", "Returns", "Notes"):
        assert f"{section}\n    {'-' * len(section)}" in doc, f"{name} lacks a {section} section"


@pytest.mark.parametrize("name", RESULTS)
def test_results_are_frozen_dataclasses(name):
    cls = getattr(sv_stats, name)
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"specverify.stats.{module}"), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
