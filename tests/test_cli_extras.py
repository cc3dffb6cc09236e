"""``--report``, ``--plots`` and ``report --html`` need the report extra (matplotlib): without it the command stops
before any work (exit 2, the pip line, no traceback), not after a run. Each case runs in a fresh interpreter with
matplotlib hidden, so what an earlier test imported cannot hide an import."""

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "specverify.certification.execution.certify")
CASES = [
    ["certify", "specverify.reference:make_decoder", "--report", "{tmp}/r.html"],
    ["certify", "specverify.reference:make_decoder", "--level", "standard", "--plots", "{tmp}/plots"],
    ["certify", "no_such_module:make", "--report", "{tmp}/r.html", "--plots", "{tmp}/plots"],
    ["merge", "{tmp}/part-1.json", "--report", "{tmp}/r.html"],
    ["report", "{tmp}/cert.json", "--html", "{tmp}/r.html"],
]


def without_matplotlib(argv: list) -> dict:
    """``specverify ARGV`` in a fresh interpreter where matplotlib cannot be imported: exit code, stderr, seconds,
    and the heavy modules it imported."""
    code = (
        "import io, sys, time; sys.modules['matplotlib'] = None\n"
        "started = time.perf_counter(); from specverify.cli import main\n"
        f"err = io.StringIO(); code = main({argv!r}, err=err)\n"
        "import json; print(json.dumps({'code': int(code), 'err': err.getvalue(), "
        "'seconds': time.perf_counter() - started, "
        f"'heavy': sorted(m for m in {HEAVY!r} if m in sys.modules)}}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(a[:1] + [f for f in a if f.startswith("--")]))
def test_a_visual_output_without_the_report_extra_is_refused_before_any_work(argv, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    done = without_matplotlib(argv)
    assert done["code"] == 2, done
    flags = " and ".join(a for a in argv if a in ("--report", "--plots", "--html"))
    assert done["err"].startswith(f"specverify: error: {flags}: matplotlib is not installed here."), done["err"]
    assert "pip install 'specverify-toolkit[report]'" in done["err"] and f"Or leave out {flags}." in done["err"]
    assert done["heavy"] == [] and done["seconds"] < 5, done  # nothing certified, nothing heavy imported
