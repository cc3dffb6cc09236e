"""Engine × (before, after): a quick vLLM certification with the plan of a git ref against the working tree's.

    .venv-vllm/bin/python benchmarks/vllm_plan_ab.py --before REF [--after REF] [--method plain ngram draft_model]
        [--level quick] [--before-without batch-composition] [--after-without NAME ...] [--out DIR]

For each method, one run with the code of ``REF`` (checked out in a temporary git worktree and put first on
``PYTHONPATH``) and one with this checkout's (``--after REF``: that ref's, in a worktree too, so other uncommitted
work in the checkout is left out), one after the other, never two vLLM runs at once: each is
``benchmarks/vllm_certify.py --method M --level L --sequential`` from this checkout (the same script on both sides),
default engine options. Printed per run: the load (``uptime``'s 1-minute average) before and after, the elapsed
seconds, the verdict, the outcomes drawn and the engine starts; then the table and the after/before ratio of the
elapsed time. ``--before-without`` leaves scenarios out of the before runs only (batch-composition: the plan of
before issue #24 restarted an engine per γ in nearly every one of its calls), so the before figure is the matrix
without them, as the table says. Certificates go to ``DIR/before`` and ``DIR/after``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load() -> float:
    return os.getloadavg()[0]


def certify_run(tree: str, method: str, level: str, without: list, json_dir: str) -> dict:
    """One ``vllm_certify.py`` run on the code of ``tree``: elapsed, verdict, outcomes, engine starts, load."""
    cmd = [sys.executable, os.path.join(HERE, "vllm_certify.py"), "--method", method, "--level", level]
    cmd += ["--sequential", "--json-dir", json_dir] + (["--without", *without] if without else [])
    env = dict(os.environ, PYTHONPATH=tree)
    before = load()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    text = done.stdout
    verdict = re.search(rf"{method}: verdict (\S+), elapsed (\d+) s, outcomes drawn (\d+)", text)
    starts = re.search(rf"{method}: engine starts (\d+) \(([\d.]+) s\)", text)
    if done.returncode or not verdict:
        raise SystemExit(f"{method} on {tree} failed (exit {done.returncode}):\n{text[-3000:]}\n{done.stderr[-3000:]}")
    return dict(
        verdict=verdict[1],
        elapsed=int(verdict[2]),
        outcomes=int(verdict[3]),
        starts=int(starts[1]) if starts else None,
        start_s=float(starts[2]) if starts else None,
        load=(before, load()),
        without=list(without),
    )


def row(method: str, side: str, r: dict) -> str:
    left_out = f" without {', '.join(r['without'])}" if r["without"] else " full matrix"
    return (
        f"{method:14s} {side:6s} {r['elapsed']:6d} s  {r['verdict']:13s} {r['outcomes']:8d} outcomes  "
        f"{r['starts']} engine starts ({r['start_s']:.0f} s)  load {r['load'][0]:.1f}->{r['load'][1]:.1f}{left_out}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="git ref of the plan to compare with (e.g. HEAD~5)")
    ap.add_argument("--after", default=None, help="git ref of the after side (default: this checkout as it is)")
    ap.add_argument("--method", nargs="+", default=["plain", "ngram", "draft_model"])
    ap.add_argument("--level", default="quick")
    ap.add_argument("--before-without", nargs="*", default=[])
    ap.add_argument("--after-without", nargs="*", default=[])
    ap.add_argument("--out", default=None, help="certificates (default: a temporary folder)")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="vllm-plan-ab-")
    tree = tempfile.mkdtemp(prefix="vllm-plan-before-")
    subprocess.run(["git", "worktree", "add", "--detach", tree, args.before], cwd=ROOT, check=True, capture_output=True)
    after = ROOT
    if args.after:
        after = tempfile.mkdtemp(prefix="vllm-plan-after-")
        subprocess.run(
            ["git", "worktree", "add", "--detach", after, args.after], cwd=ROOT, check=True, capture_output=True
        )
    results = {}
    try:
        for method in args.method:
            for side, code, without in (("before", tree, args.before_without), ("after", after, args.after_without)):
                r = certify_run(code, method, args.level, without, os.path.join(out, side))
                results[(method, side)] = r
                print(row(method, side, r), flush=True)
    finally:
        for made in {tree, after} - {ROOT}:
            subprocess.run(["git", "worktree", "remove", "--force", made], cwd=ROOT, capture_output=True)
    names = f"before = {args.before}, after = {args.after or 'this checkout'}"
    print(f"\nquick vLLM certifications, --sequential, default options; {names}; certificates in {out}")
    for method in args.method:
        b, a = results[(method, "before")], results[(method, "after")]
        print(row(method, "before", b))
        print(row(method, "after", a))
        print(f"{method:14s} after/before elapsed {a['elapsed'] / max(b['elapsed'], 1):.2f}")


if __name__ == "__main__":
    main()
