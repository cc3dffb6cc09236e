"""The before/after protocol of the in-process benchmarks (bench_decoders, certifier_overhead): ``--before TREE``
measures another checkout against this one, each side a child process of the same script started with
``--tree TREE --json`` (that tree first on ``sys.path``), whose JSON figures the parent compares."""

from __future__ import annotations

import argparse
import sys


def add_tree_arguments(ap: argparse.ArgumentParser, rounds: int) -> None:
    """``--before TREE`` and ``--rounds`` for the user; ``--tree`` and ``--json`` for the child processes."""
    ap.add_argument("--before", help="another checkout to measure against this one")
    ap.add_argument("--rounds", type=int, default=rounds, help="processes per tree with --before")
    ap.add_argument("--tree", help=argparse.SUPPRESS)  # child process: import specverify from this checkout
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)


def enter_tree(args) -> None:
    """In a child process, import specverify from its ``--tree`` (before anything imports it)."""
    if args.tree:
        sys.path.insert(0, args.tree)
