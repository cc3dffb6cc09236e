"""Engine × (before, after) for the engine certification scripts (transformers_certify, llamacpp_certify): one run of
the script with the code of a git ref (a detached worktree under /tmp, first on ``PYTHONPATH``) and one with this
checkout's, one after the other, each a subprocess of the same script from this checkout. Per run: the load
(``uptime``'s 1-minute average) before and after, the wall time, the verdict and the draws, parsed from the
script's own ``print_certificate`` lines; then the table and the after/before ratio."""

from __future__ import annotations

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worktree(ref: str) -> str:
    """A detached worktree of ``ref`` at /tmp/wt-ab-REF (made once, reused)."""
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True, check=True)
    path = f"/tmp/wt-ab-{sha.stdout.strip()}"
    if not os.path.isdir(path):
        subprocess.run(["git", "worktree", "add", "--detach", path, ref], cwd=ROOT, check=True, capture_output=True)
    return path


def run_side(script: str, argv: list, label: str, tree: str) -> dict:
    """One run of ``script argv`` on the code of ``tree``: verdict, draws, wall, load before and after."""
    env = dict(os.environ, PYTHONPATH=tree)
    before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, script, *argv], env=env, capture_output=True, text=True, cwd=tree)
    after = os.getloadavg()[0]
    text = done.stdout
    verdict = re.search(rf"== {re.escape(label)}: verdict (\S+)", text)
    totals = re.search(r"(\d+) draws, [\d.]+ samples/s, wall (\d+) s", text[verdict.end() :] if verdict else "")
    if done.returncode or not verdict or not totals:
        raise SystemExit(f"{label} on {tree} failed (exit {done.returncode}):\n{text[-3000:]}\n{done.stderr[-3000:]}")
    return dict(verdict=verdict[1], draws=int(totals[1]), wall=int(totals[2]), load=(before, after), text=text)


def ab(script: str, runs: list, before_ref: str, out_dir=None, after_ref=None) -> None:
    """``runs``: ``(label, argv)`` pairs; each runs on ``before_ref`` then on ``after_ref`` (None: this checkout,
    uncommitted changes included); prints the table."""
    tree, after = worktree(before_ref), (ROOT if after_ref is None else worktree(after_ref))
    names = {"before": before_ref, "after": after_ref or "this checkout"}
    rows = []
    for label, argv in runs:
        for side, path in (("before", tree), ("after", after)):
            r = run_side(script, argv, label, path)
            print(f"{label} {side} ({names[side]}):", flush=True)
            print("\n".join(line for line in r["text"].splitlines() if not line.startswith("   ") or "draws," in line))
            if out_dir:
                os.makedirs(out_dir, exist_ok=True)
                with open(os.path.join(out_dir, f"{label.replace(' / ', '-')}-{side}.txt"), "w") as fh:
                    fh.write(r["text"])
            rows.append((label, side, r))
    print(f"\nengine × (before = {names['before']}, after = {names['after']}), wall seconds:")
    for label, side, r in rows:
        print(
            f"  {label:28s} {side:6s} {r['wall']:6d} s  {r['verdict']:13s} {r['draws']:8d} draws  "
            f"load {r['load'][0]:.1f}->{r['load'][1]:.1f}"
        )
    for label in dict.fromkeys(label for label, _, _ in rows):
        walls = {side: r["wall"] for lab, side, r in rows if lab == label}
        print(f"  {label}: after/before {walls['after'] / max(walls['before'], 1):.2f}")
    sys.stdout.flush()
