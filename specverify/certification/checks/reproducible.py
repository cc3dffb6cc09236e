"""The run-level reproducibility check: same seed → same output, alone, inside a mixed batch (when the decoder
declares ``batch``) and again. Not part of the law (docs/design.md): its own named check, binding with
``--require-reproducible``."""

from __future__ import annotations

from dataclasses import replace

from specverify.certification.run.collect import scenario_seed
from specverify.protocol import Request

__all__ = ["REPRODUCIBILITY_SCENARIO", "check_reproducible"]

REPRODUCIBILITY_SCENARIO = "temperature-1"


def check_reproducible(run, scenario) -> tuple:
    """(ok, note) for 4 seeds of ``scenario``'s request shape; never sends more requests per call than the decoder
    declared."""
    session = run.session
    handle = session.decoder(scenario)
    if not handle.seeded:
        return None, "not checked: the decoder does not declare the 'seed' capability"
    batched = "batch" in handle.capabilities
    # a decoder that fixes γ per engine (decoder.fixed_gamma) gets same-γ neighbours: others would run on another
    # engine, never in the same batch as the seeded request
    gammas = (scenario.num_draft_tokens,) * 2 if handle.fixed_gamma else (1, 2)
    # neighbours of every kind: a seeded one ahead of the request (a call's generator seeded by its first seed shows),
    # and a greedy unseeded one after it
    others = [
        Request(
            scenario.prompt, replace(scenario.params, temperature=0.7), gammas[0], seed=scenario_seed(run.seed, "nb")
        ),
        Request(scenario.prompt[:1], replace(scenario.params, temperature=0.0), gammas[1]),
    ]
    for i in range(4):
        req = Request(
            scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=scenario_seed(run.seed, "repro", i)
        )
        runs = [session.call(handle, [req])[0]]
        if batched:
            runs.append(session.call(handle, [others[0], req, others[1]])[1])
        runs.append(session.call(handle, [req])[0])
        outs = {(c.tokens, c.finish_reason) for c in runs}
        if len(outs) > 1:
            where = "alone / in a batch / again" if batched else "alone / again"
            return False, f"seed {req.seed}: outputs differ {where}: {sorted(outs)}"
    if batched:
        return True, "4 seeds gave identical outputs alone, in a mixed batch and on a second call"
    return True, "4 seeds gave identical outputs alone and on a second call (no 'batch': not checked in a batch)"
