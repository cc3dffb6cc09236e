"""What batch composition costs the decoder: calls by size, requests, tested draws and seconds, before and after.

    python benchmarks/composition_cost.py [--levels quick standard thorough] [--before REF] [--seed 0]

Certifies the reference decoder (in-process) on the ``batch-composition`` scenario alone at each level, through a
wrapper that counts the decoder calls by size: calls of one request, of two, and of more (each call of one or two is a
full engine call on a real engine). With ``--before REF`` (e.g. ``HEAD~1``) it does the same with the package of
that commit, checked out in a temporary git worktree and run in a child process, and prints the two side by side
with the after/before ratios. Only public names are used (``specverify.certify``, ``specverify.reference``), so the
script runs against older trees too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

CALLS: Counter = Counter()  # call size -> calls, filled by the counting factory below


class _Counted:
    """The reference decoder, counting its calls by size (every other attribute passes through)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __call__(self, requests):
        requests = list(requests)
        CALLS[len(requests)] += 1
        return self._inner(requests)


def counted_reference(target, draft):
    from specverify.reference import make_decoder

    return _Counted(make_decoder(target, draft))


def measure(level: str, seed: int) -> dict:
    from specverify import certify

    CALLS.clear()
    started = time.perf_counter()
    cert = certify(counted_reference, level=level, seed=seed, scenarios=["batch-composition"], isolation="none")
    seconds = time.perf_counter() - started
    results = [r for r in cert.scenarios if r.name.startswith("batch-composition")]
    return dict(
        level=level,
        calls_1=CALLS[1],
        calls_2=CALLS[2],
        calls_more=sum(c for size, c in CALLS.items() if size > 2),
        requests=sum(size * c for size, c in CALLS.items()),
        # distinct tested draws: ``alone``'s draws are part of ``small``'s where both exist
        tested=sum(r.n for r in results if not (r.member == "alone" and any(x.member == "small" for x in results))),
        seconds=seconds,
        members=" ".join(f"{r.member}:{r.n}@{r.detectable_tv:.3f}" for r in results),
    )


def _before(ref: str, levels: list, seed: int) -> list:
    """The same figures for the package at commit ``ref`` (a temporary worktree, a child process)."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(tree), ref], check=True,
                       capture_output=True)  # fmt: skip
        try:
            env = dict(os.environ, PYTHONPATH=str(tree))
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--seed", str(seed), "--levels", *levels],
                env=env, check=True, capture_output=True, text=True, cwd=tree,
            )  # fmt: skip
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(tree)], check=False)
    return json.loads(out.stdout.strip().splitlines()[-1])


ROW = "{:<8} {:<9} {:>8} {:>8} {:>6} {:>9} {:>8} {:>8}  {}"


def _print(tag: str, rows: list) -> None:
    for r in rows:
        print(ROW.format(tag, r["level"], r["calls_1"], r["calls_2"], r["calls_more"], r["requests"], r["tested"],
                         f"{r['seconds']:.1f}", r["members"]))  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", nargs="+", default=["quick", "standard", "thorough"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", default=None, help="a git revision to compare with (e.g. HEAD~1)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    after = [measure(level, args.seed) for level in args.levels]
    if args.child:
        print(json.dumps(after))
        return
    print(ROW.format("tree", "level", "calls 1", "calls 2", "> 2", "requests", "tested", "s", "member:N@detectable TV"))
    before = _before(args.before, args.levels, args.seed) if args.before else None
    if before:
        _print(f"{args.before}", before)
    _print("after", after)
    if before:
        for b, a in zip(before, after):
            small_b, small_a = b["calls_1"] + b["calls_2"], a["calls_1"] + a["calls_2"]
            print(f"{a['level']}: calls of one or two {small_a} / {small_b} = {small_a / small_b:.2f}×, requests "
                  f"{a['requests'] / b['requests']:.2f}×, seconds {a['seconds'] / b['seconds']:.2f}×")  # fmt: skip


if __name__ == "__main__":
    main()
