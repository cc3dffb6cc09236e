"""CI enforces the house rules: ruff (lint + format), import-linter's layer contracts, doctests."""

import doctest
import importlib
import pathlib
import pkgutil
import shutil
import subprocess
import sys

import pytest

import specverify
from tests.extras import needs

ROOT = pathlib.Path(__file__).parents[1]
# packages with doctest tests of their own (tests/stats, tests/kernels, tests/kernel_checks)
OWN_DOCTESTS = ("specverify.stats", "specverify.kernels", "specverify.kernel_checks")
# modules that import their extra lazily, so they import without it, but whose doctests run it
DOCTEST_EXTRAS = {"specverify.grammar_xgrammar": "grammar"}


def _tool(name):
    path = shutil.which(name, path=str(pathlib.Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]'")
    return path


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["ruff-check", "ruff-format"])
def test_ruff(args):
    result = subprocess.run(
        [_tool("ruff"), *args, "specverify", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    fix = "ruff check --fix" if args == ["check"] else "ruff format"
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\nFix: {fix} specverify tests benchmarks examples"


def test_import_layers():
    result = subprocess.run([_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and "BROKEN" not in result.stdout, result.stdout[-3000:] + result.stderr


def _modules():
    for info in pkgutil.walk_packages(specverify.__path__, "specverify."):
        if not info.name.startswith(OWN_DOCTESTS):
            yield info.name


def _doctest_params():
    for name in sorted(_modules()):
        extra = DOCTEST_EXTRAS.get(name)
        yield pytest.param(name, marks=[needs(extra, f"{name}'s doctests")] if extra else [])


@pytest.mark.parametrize("name", list(_doctest_params()))
def test_doctests(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (xgrammar, ...) is missing
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}; run python -m doctest -v on it"


# what the evidence is read through: typed fields (ScenarioResult.scenario / member / not_run, RunConfig.reproduce),
# never the wording of a note or the text of a name or command line
_READS_TEXT = {
    "a substring test on a note": r"""["'][^"'\n]*["']\s+(not\s+)?in\s+\(?\s*[\w.]*\bnote\b""",
    "a note compared or searched": r"""\bnote\)?\s*(==|!=|\.startswith|\.endswith|\.find\(|\.index\()""",
    "a scenario name split into parts": r"""\bname\)?\.(split|partition|rpartition)\(\s*["']/""",
    "a command line re-parsed": r"""\.(split|partition)\(\s*["']\s*--|\bcommand\b[^\n]*\.(split|partition)\(""",
}
# v1 documents: names split once, notes read, commands parsed
_EXCEPTED = {"specverify/certification/results/migrate.py"}


def test_no_module_reads_evidence_from_its_wording():
    import re

    found = []
    for path in sorted((ROOT / "specverify").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in _EXCEPTED:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for what, pattern in _READS_TEXT.items():
                if re.search(pattern, line):
                    found.append(f"{rel}:{number}: {what}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_patterns_catch_what_they_name():
    import re

    caught = {
        "a substring test on a note": ['if "budget" in r.note:', 'any("budget" in (r.note or "") for r in x)'],
        "a note compared or searched": ["s.note == _BROKE", 'note.startswith("not run")'],
        "a scenario name split into parts": ['r.name.split("/")[0]'],
        "a command line re-parsed": ['records[0].command.split(" --scenario ")[0]', 'x.split(" --seed ")'],
    }
    for what, lines in caught.items():
        for line in lines:
            assert re.search(_READS_TEXT[what], line), (what, line)
    assert not re.search(_READS_TEXT["a note compared or searched"], "note = f'{x}'")


def test_import_cycles_are_a_contract():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert any(c["type"] == "acyclic_siblings" and c["ancestors"] == ["specverify"] for c in contracts)


def test_library_code_never_prints():
    """Only the CLI writes to the terminal (and a module's own ``if __name__ == "__main__":`` script block): the
    library reports through return values, progress callbacks and ``warnings``."""
    import ast

    found = []
    for path in sorted((ROOT / "specverify").rglob("*.py")):
        if path.name == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        scripts = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        skipped = {id(n) for block in scripts for n in ast.walk(block)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print" and id(node) not in skipped:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"print() in library code: {found}; report through a return value, progress or warnings"


def test_certification_and_adapter_modules_live_in_a_folder_named_for_their_job():
    """docs/design.md: ``certification/`` and ``adapters/`` hold packages only (each a job), no loose modules."""
    for package in ("certification", "adapters"):
        loose = [p.name for p in (ROOT / "specverify" / package).glob("*.py") if p.name != "__init__.py"]
        assert not loose, f"specverify/{package}/ holds modules outside a folder: {loose}"
