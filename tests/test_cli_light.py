"""The listing commands (``zoo``, ``scenarios``) import neither torch nor transformers: they list names, in well under
a second. Each runs in a fresh interpreter, so what an earlier test imported cannot hide an import."""

import io
import subprocess
import sys

import pytest

from specverify.cli import ExitCode, main
from specverify.zoo.catalogue import CATALOGUE

HEAVY = ("torch", "transformers", "triton", "hypothesis")


def heavy_imports(*argv: str) -> list:
    """The heavy modules that ``specverify ARGV`` imported (run in a subprocess; its exit code must be 0)."""
    code = (
        "import os, sys; from specverify.cli import main\n"
        f"code = main({list(argv)!r}, out=open(os.devnull, 'w'))\n"
        f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    status, heavy = done.stdout.strip().split(" ", 1)
    assert status == "0", done.stdout + done.stderr
    return eval(heavy)  # a printed list of module names


def test_zoo_imports_no_decoder():
    assert heavy_imports("zoo") == []


@pytest.mark.parametrize("argv", [["scenarios"], ["scenarios", "--drafts", "tree"]], ids=" ".join)
def test_scenarios_import_no_model(argv):
    assert heavy_imports(*argv) == []


def test_checkpoint_scenarios_import_no_model():
    assert heavy_imports("scenarios", "--models", "checkpoint") == []


def test_zoo_lists_every_entry_with_its_draft_family():
    out = io.StringIO()
    assert main(["zoo"], out=out) == ExitCode.MEETS
    lines = out.getvalue().splitlines()
    assert len(lines) == len(CATALOGUE)
    for line, entry in zip(lines, CATALOGUE):
        name, verdict, summary = line.split(None, 2)
        assert (name, verdict) == (f"specverify.zoo:{entry.name}", entry.verdict)
        family = f" [--drafts {entry.drafts}]"
        assert summary == entry.summary + (family if entry.drafts != "ar" else "")
    assert any(line.endswith(" [--drafts tree]") for line in lines) and not any("--drafts ar" in s for s in lines)


def test_an_unknown_factory_is_a_usage_error_before_anything_heavy():
    code = (
        "import io, sys; from specverify.cli import main\n"
        "err = io.StringIO(); code = main(['certify', 'no_such_module:make'], out=io.StringIO(), err=err)\n"
        f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules)); print(err.getvalue())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, message = done.stdout.split("\n", 1)
    assert first == f"{int(ExitCode.USAGE)} []" and "cannot import module 'no_such_module'" in message
