"""Run examples/engine_ci's CI workflow as a team that copied it would: a fresh venv, the workflow's own ``run:``
commands in order, in a copy of the example outside this checkout. Then check what the job leaves: junit.xml with the
decoder's verdict, the certificate and the HTML report.

Two things differ from GitHub Actions, both about where packages come from: torch comes from this machine's pip
configuration (a local CPU wheel) instead of PyTorch's CPU index, and ``SPECVERIFY_URL`` points at this checkout
(``file://``, built and installed as the workflow's VCS URL would be: not editable). Every other command runs as
written. ``tests/plugin/test_example.py`` runs it (``-m slow``) and ``.ci/run`` runs it as its example step:

    python tests/plugin/example_workflow.py WORKDIR
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "engine_ci"
WORKFLOW = EXAMPLE / ".github" / "workflows" / "specverify.yml"
TORCH_INDEX = re.compile(r" --index-url https://download\.pytorch\.org/\S+")
MARKED = "tests/test_speculative_decoding.py::test_speculative_decoding_is_exact"
STORED = "specverify_baselines/my_engine.adapter--speculative.json"


def run_commands(workflow: Path = WORKFLOW) -> list:
    """The workflow's ``run:`` commands, in order (one line each: the example keeps them so)."""
    commands = []
    for line in workflow.read_text().splitlines():
        match = re.match(r"\s*(?:- )?run:\s*(.*)$", line)
        if match:
            assert match[1] not in ("|", ">"), f"{workflow}: a multi-line run: block; keep each command on one line"
            commands.append(match[1])
    return commands


def local(command: str) -> str:
    """``command`` as it runs here: the torch install from this machine's pip configuration."""
    return TORCH_INDEX.sub("", command) if command.startswith("pip install torch") else command


def run_workflow(workdir: Path, checkout: Path = ROOT, *, log=None) -> dict:
    """Copy the example into ``workdir/engine_ci``, make ``workdir/venv`` and run the workflow's commands there;
    ``{"steps": [(command, seconds, returncode)], "output": the last step's output, "dir": the example's copy,
    "venv": the venv}``.
    Stops at the first command that fails."""
    workdir = Path(workdir).resolve()  # absolute: the venv's bin goes first on PATH, the commands run elsewhere
    example, venv = workdir / "engine_ci", workdir / "venv"
    shutil.rmtree(example, ignore_errors=True)
    shutil.rmtree(venv, ignore_errors=True)
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    env.update(SPECVERIFY_URL=f"file://{Path(checkout).resolve()}", PIP_QUIET="1")
    for tool in ("pip", "python"):  # never install into the interpreter that runs this script
        found = subprocess.run(
            ["bash", "-c", f"command -v {tool}"], cwd=example, env=env, capture_output=True, text=True
        )
        assert found.stdout.strip() == str(venv / "bin" / tool), f"{tool} resolves to {found.stdout.strip()!r}"
    steps, output = [], ""
    for command in map(local, run_commands()):
        started = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=example, env=env, capture_output=True, text=True)
        steps.append((command, time.perf_counter() - started, done.returncode))
        output = done.stdout + done.stderr
        if log is not None:
            log(f"example workflow: {steps[-1][1]:6.1f} s  exit {done.returncode}  {command}")
        if done.returncode != 0:
            break
    return {"steps": steps, "output": output, "dir": example, "venv": venv}


def verdict_of(junit: Path) -> str:
    """The marked test's decoder verdict, as junit.xml carries it (a testsuite property)."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    return props.get(f"specverify_verdict[{MARKED}]", "")


def problems(run: dict) -> list:
    """What is missing from a green job: every command passed, junit.xml with the verdict, one certificate for the
    decoder and the fixture's named apart, an HTML report with its plots, and a stored baseline that is byte for
    byte what this run's certificate stores (the shipped one is current)."""
    out = [f"exit {rc}: {command}" for command, _, rc in run["steps"] if rc != 0]
    if len(run["steps"]) != len(run_commands()):
        out.append(f"ran {len(run['steps'])} of {len(run_commands())} commands")
    where = run["dir"]
    junit, html = where / "junit.xml", where / "certificate.html"
    if not junit.exists():
        out.append("no junit.xml")
    elif not verdict_of(junit).startswith("exact (meets: exact meets require=exact"):
        out.append(f"junit.xml's verdict is {verdict_of(junit)!r}")
    if not html.exists() or "<img" not in html.read_text():
        out.append("no certificate.html with its plots")
    certificates = sorted(p.name for p in where.glob("certificate*.json"))
    if certificates != ["certificate.fixture-test_greedy_output_is_the_targets.json", "certificate.json"]:
        out.append(f"certificates written: {certificates}")
    elif stored_text(run["venv"], where / "certificate.json") != (where / STORED).read_text():
        out.append(f"{STORED} is not what an update would store now: regenerate it (--specverify-update-baseline)")
    return out


def stored_text(venv: Path, certificate: Path) -> str:
    """What ``--specverify-update-baseline`` stores for the decoder whose certificate file this is (computed by the
    specverify installed in ``venv``)."""
    code = (
        "import sys; from specverify.report import load_certificate; "
        "from specverify.testing.baseline import baseline_text; "
        "sys.stdout.write(baseline_text(load_certificate(sys.argv[1])))"
    )
    python = str(Path(venv) / "bin" / "python")
    return subprocess.run([python, "-c", code, str(certificate)], capture_output=True, text=True, check=True).stdout


def main(argv: list) -> int:
    if len(argv) != 1:
        print("usage: python tests/plugin/example_workflow.py WORKDIR", file=sys.stderr)
        return 2
    started = time.perf_counter()
    run = run_workflow(Path(argv[0]), log=lambda line: print(line, flush=True))
    found = problems(run)
    print(run["output"][-3000:] if found else run["output"].splitlines()[-1])
    print(f"example workflow: {time.perf_counter() - started:.0f} s in all; " + ("; ".join(found) or "green"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
