"""The distribution's name is ours (PyPI's "specverify" is another project) and examples/engine_ci installs on it."""

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python 3.10 needs tomli")

ROOT = pathlib.Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "engine_ci"
TAKEN = "specverify"  # PyPI's, an unrelated project


def _project(path):
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]


def _confusable(name):  # PyPI refuses a name equal to an existing one once case, "-", "_" and "." are dropped
    return re.sub(r"[-_.]", "", name).lower()


def test_the_distribution_name_is_not_pypis_specverify_and_the_all_extra_names_it():
    project = _project(ROOT)
    assert _confusable(project["name"]) != _confusable(TAKEN), project["name"]
    extras = project["optional-dependencies"]
    (everything,) = (Requirement(r) for r in extras["all"])
    assert canonicalize_name(everything.name) == canonicalize_name(project["name"])
    assert everything.extras == set(extras) - {"all"}


def test_the_example_depends_on_this_distribution_and_the_workflow_installs_it_first():
    name = canonicalize_name(_project(ROOT)["name"])
    assert [canonicalize_name(Requirement(r).name) for r in _project(EXAMPLE)["dependencies"]] == [name]
    workflow = (EXAMPLE / ".github" / "workflows" / "specverify.yml").read_text()
    installs = [line for line in workflow.splitlines() if "pip install" in line]
    assert not [line for line in installs if f"{TAKEN}[" in line], installs
    ours = next(i for i, line in enumerate(installs) if f"{_project(ROOT)['name']}[test," in line)
    assert ours < installs.index("      - run: pip install -e .")


def test_the_example_resolves_on_this_checkout_without_an_index(tmp_path):
    pytest.importorskip("setuptools", reason="building the example's metadata needs setuptools in this venv")
    example = tmp_path / "engine_ci"  # a copy: the metadata build leaves the checkout as it was
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation"]
    command += ["--quiet", "--report", str(report), "-e", str(example)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    hint = f"is this checkout installed (pip install -e {ROOT}) under its current name?"
    assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}\n{hint}"
    (engine,) = [item for item in json.loads(report.read_text())["install"] if item["metadata"]["name"] == "my-engine"]
    assert [Requirement(r).name for r in engine["metadata"]["requires_dist"]] == [_project(ROOT)["name"]]
