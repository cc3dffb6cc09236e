"""Write the reference's baseline certificate (tests/certification/test_baseline.py) for one look rule.

    python tests/data/make_baseline.py --sequential   # the default look rule
    python tests/data/make_baseline.py --fixed        # the fixed plan

Run it only when a change is meant to change what a seed gives (a new scenario, a new α plan), in a commit of its
own that says why; the comment inside the file keeps that history.
"""

import argparse
import json
import pathlib

import specverify as sv

FIELDS = ("name", "kind", "passed", "n", "planned_n", "statistic", "df", "pvalue", "tv_estimate", "num_outcomes")
HERE = pathlib.Path(__file__).parent


def path_for(sequential: bool) -> pathlib.Path:
    return HERE / f"baseline_reference_quick_seed12345{'_sequential' if sequential else ''}.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    rule = ap.add_mutually_exclusive_group(required=True)
    rule.add_argument("--sequential", action="store_true")
    rule.add_argument("--fixed", action="store_true")
    ap.add_argument("--comment", required=True, help="why it is regenerated (appended to the file's history)")
    args = ap.parse_args()
    out = path_for(args.sequential)
    old = json.loads(out.read_text())["comment"] + " " if out.exists() else ""
    factory, level, seed, alpha = "specverify.reference:make_decoder", "quick", 12345, 1e-6
    cert = sv.certify(factory, level=level, seed=seed, alpha=alpha, isolation="none", sequential=args.sequential)
    doc = dict(
        comment=old + args.comment, factory=factory, level=level, seed=seed, alpha=alpha,
        sequential=args.sequential, verdict=str(cert.verdict),
        scenarios=[{k: getattr(s, k) for k in FIELDS} for s in cert.scenarios],
    )  # fmt: skip
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{out}: {cert.verdict}, {len(doc['scenarios'])} scenarios")


if __name__ == "__main__":
    main()
