"""Path statistics and cost of the fuzz strategies: how often each interesting path is reached, examples per second.

    python benchmarks/fuzz_stats.py [--examples 200] [--seed 0] [--only reference,paged]

For each property the script runs ``--examples`` random examples (seeded, so reruns agree) and prints the share of
examples reaching each path (``rejection``, ``bonus``, ``finish inside block``, ``rollback after fault``, ...), the
wall time and examples per second. The issue's bar: every interesting path in >= 10 % of the examples.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from specverify.fuzz.whitebox import reference_runs, run_schedule
from specverify.fuzz.whitebox.paged import check_paged_operations, paged_cases
from specverify.fuzz.whitebox.recurrent import check_recurrent_rounds, recurrent_rounds
from specverify.oracles import make_vocab
from specverify.reference.recurrent import RecurrentCache, ToySSM

MUST_REACH = ("rejection", "bonus", "finish inside block", "stop or EOS inside block", "rollback after fault")


def reference_paths(run) -> set:
    return set(run_schedule(*run).paths)


def paged_paths(case) -> set:
    counts = check_paged_operations(case)
    return {f"block_size {case['block_size']}"} | {name for name, count in counts.items() if count}


def recurrent_paths(case) -> set:
    seed, rounds = case
    check_recurrent_rounds(RecurrentCache, ToySSM(make_vocab(5), dim=3, seed=seed), (0,), rounds)
    return {
        "aborted branch" if any(r.abort for r in rounds) else "no abort",
        "partial acceptance" if any(r.accepted < len(r.drafts) for r in rounds) else "all accepted",
    }


def grammar_paths(case) -> set:
    from specverify.fuzz.grammars import check_matcher_rollback, example_grammars

    name, seed = case
    history = check_matcher_rollback(example_grammars()[name], seed)
    paths = {f"grammar {name}"}
    if any(accepted < len(drafts) for drafts, accepted, _ in history):
        paths.add("rollback after rejection")
    return paths


def properties() -> dict:
    out = {
        "reference": (reference_runs(), reference_paths),
        "paged": (paged_cases(), paged_paths),
        "recurrent": (st.tuples(st.integers(0, 50), recurrent_rounds(5)), recurrent_paths),
    }
    try:
        import xgrammar  # noqa: F401

        from specverify.fuzz.grammars import matcher_cases

        out["xgrammar"] = (matcher_cases(), grammar_paths)
    except ImportError:
        pass
    return out


def run(name: str, strategy, paths_of, examples: int, seed: int) -> tuple[Counter, int, float]:
    reached, count = Counter(), [0]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def body(value):
        count[0] += 1
        reached.update(paths_of(value))

    body._hypothesis_internal_use_seed = seed
    start = time.perf_counter()
    body()
    return reached, count[0], time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated property names")
    args = ap.parse_args()
    torch.set_num_threads(1)
    wanted = set(filter(None, args.only.split(",")))
    for name, (strategy, paths_of) in properties().items():
        if wanted and name not in wanted:
            continue
        reached, count, seconds = run(name, strategy, paths_of, args.examples, args.seed)
        print(f"{name}: {count} examples in {seconds:.1f} s ({count / seconds:.0f}/s)")
        for path, hits in sorted(reached.items(), key=lambda kv: -kv[1]):
            flag = "  <-- below 10 %" if path in MUST_REACH and hits < 0.1 * count else ""
            print(f"    {hits / count:6.1%}  {path}{flag}")


if __name__ == "__main__":
    main()
