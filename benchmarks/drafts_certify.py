"""Draft families, trees and block verification: every reference certified, every draft-family zoo entry tagged.

    python benchmarks/drafts_certify.py [--level standard] [--families heads markov ...] [--zoo] [--seed 0]

Prints, per family and decoder, the verdict, seconds, outcomes drawn and the measured accepted tokens per target
call beside the exact value and its 1e-6 interval (``specverify.oracles.acceptance_rounds``); with ``--zoo`` the
verdict of each zoo entry of ``specverify.zoo.drafts`` on its family's matrix next to its tag.
"""

from __future__ import annotations

import argparse
import time


def measured_tokens_per_call(factory, drafts: str, n: int = 20000) -> tuple:
    """(measured, exact, low, high) accepted tokens per target call on the family's temperature-1 scenario."""
    from specverify.certification.matrix.scenarios import matrix
    from specverify.oracles.acceptance_rounds import acceptance_law
    from specverify.protocol import Request
    from specverify.reference import make_block_decoder

    scenario = matrix("toy", drafts)["temperature-1"]
    pair = scenario.models()
    decoder = factory(pair.target, pair.draft)
    counts = decoder.sample(Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=1), n)
    rule = "block" if factory is make_block_decoder else None
    law = acceptance_law(
        pair.target, pair.draft, scenario.prompt, scenario.params, scenario.num_draft_tokens, rule=rule
    )
    tokens = sum(len(o[0]) * c for o, c in counts.outcomes.items())
    low, high = law.tokens_per_call_interval(n)
    return tokens / sum(counts.rounds.values()), law.tokens_per_call, low, high


def main(argv: list | None = None) -> None:
    import specverify as sv
    from specverify.enums import DraftFamily
    from specverify.reference import make_block_decoder, make_decoder

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--level", default="standard", choices=("quick", "standard", "thorough"))
    p.add_argument("--families", nargs="*", default=[f.value for f in DraftFamily if f != DraftFamily.AR])
    p.add_argument("--zoo", action="store_true", help="also certify the draft-family zoo entries")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    head = f"{'family':8s} {'decoder':20s} {'verdict':12s} {'s':>6s} {'N':>9s}"
    print(f"{head}  tokens/call measured  exact [1e-6 interval]")
    for drafts in args.families:
        for name, factory in (("make_decoder", make_decoder), ("make_block_decoder", make_block_decoder)):
            if drafts == "tree" and name == "make_block_decoder":
                continue
            started = time.perf_counter()
            cert = sv.certify(f"specverify.reference:{name}", level=args.level, drafts=drafts, seed=args.seed)
            seconds = time.perf_counter() - started
            drawn = sum(r.n for r in cert.scenarios if r.n)
            measured, exact, low, high = measured_tokens_per_call(factory, drafts)
            print(
                f"{drafts:8s} {name:20s} {cert.verdict:12s} {seconds:6.1f} {drawn:9d}  {measured:19.4f}  "
                f"{exact:.4f} [{low:.4f}, {high:.4f}]"
            )
    if args.zoo:
        from specverify.zoo import ZOO
        from specverify.zoo.drafts import __all__ as entries

        print(f"\n{'zoo entry':36s} {'family':8s} {'tag':12s} {'verdict':12s} first failing scenario (TV estimate)")
        for entry in (ZOO[n] for n in entries):
            cert = sv.certify(f"specverify.zoo:{entry.name}", level=args.level, drafts=entry.drafts, seed=args.seed)
            failing = next((r for r in cert.scenarios if r.passed is False), None)
            where = f"{failing.name} ({failing.tv_estimate})" if failing else "-"
            print(f"{entry.name:36s} {entry.drafts:8s} {entry.verdict:12s} {cert.verdict:12s} {where}")


if __name__ == "__main__":
    main()
