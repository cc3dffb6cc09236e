"""What the engine certification scripts (transformers_certify, vllm_certify, llamacpp_certify) print and write for
one certificate: the verdict, a line per scenario, reproducibility, the draws' rate; the JSON document on request."""

from __future__ import annotations

import os


def print_certificate(label: str, cert, wall: float, setup: str = "") -> None:
    """The verdict, each scenario's result, N (planned N), p-value, TV estimate and seconds, then draws per second
    over ``wall`` (``setup``: a leading phrase such as "engine start 2.9 s")."""
    draws = sum(r.n for r in cert.scenarios if r.covered and r.n)
    print(f"== {label}: verdict {cert.verdict} ({cert.reason.splitlines()[0] if cert.reason else ''})")
    for r in cert.scenarios:
        if not r.covered:
            print(f"   {r.name:26s} not covered: {r.note}")
            continue
        p = "-" if r.pvalue is None else f"{r.pvalue:.3g}"
        status = {True: "pass", False: "FAIL", None: "-"}[r.passed]
        extra = f" violation: {r.violation}" if r.violation else ""
        tv = "" if r.tv_estimate is None else f" TV~{r.tv_estimate:.3f}"
        print(f"   {r.name:26s} {status} N={r.n} (planned {r.planned_n}) p={p}{tv} {r.elapsed_s:.0f}s{extra}")
    print(f"   reproducible={cert.reproducible} ({cert.reproducibility_note}) speculation={cert.speculation_observed}")
    lead = f"{setup}; " if setup else ""
    print(f"   {lead}{draws} draws, {draws / wall:.1f} samples/s, wall {wall:.0f} s", flush=True)


def write_certificate(cert, json_dir, name: str) -> None:
    """``json_dir/name.json`` (``specverify report`` renders it); nothing without ``json_dir``."""
    if not json_dir:
        return
    from specverify.report import render_json

    os.makedirs(json_dir, exist_ok=True)
    with open(os.path.join(json_dir, f"{name}.json"), "w") as fh:
        fh.write(render_json(cert))
