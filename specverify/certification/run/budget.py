"""Budgets that allocate: a wall-clock budget or a total number of samples, shared out before the run.

``--max-samples N`` (or ``--budget SECONDS``, turned into samples by a pilot that measures the decoder's
throughput) is allocated across the chosen scenarios in matrix order, from the sizes their checks plan
(``checks.CHECKS[kind].planned_size``; this module knows no scenario kind): the core scenarios get their planned N
first, the rest share what is left in proportion to their plans. A scenario that gets less than its plan still runs (its
result states the TV it could detect at the N it got); one that gets less than ``MIN_USEFUL`` is not run. The
verdict is ``exact`` only if every covered scenario reached its plan; otherwise ``inconclusive``.

The allocation is redone as the run goes (:class:`Allocation`): what a scenario did not use — a sequential
decision that stopped early (sequential looks, the default; not ``--fixed``), a scenario not covered — goes to the
scenarios after it, so sequential looks under ``--budget`` / ``--max-samples`` certify more scenarios at their plan
instead of leaving their savings unspent.
(The wall clock itself is enforced between calls; the allocation does not re-read it.)
"""

from __future__ import annotations

import math
import time

__all__ = ["MIN_USEFUL", "PILOT_DRAWS", "SAFETY", "Allocation", "allocate", "allotted", "pilot_rate"]

MIN_USEFUL = 200  # fewer outcomes than this detect nothing a certificate should claim
PILOT_DRAWS = 512
SAFETY = 0.8  # share of the measured throughput the allocation counts on (calls vary; overhead is not free)


def allocate(sizes: dict, core: set, total: int) -> dict:
    """Share ``total`` outcomes out over ``sizes`` (in order): core scenarios first, the rest pro rata.

    Returns the share of each scenario as a fraction of its plan in [0, 1]."""
    share = {name: 0.0 for name in sizes}
    left = float(total)
    for group in ([n for n in sizes if n in core], [n for n in sizes if n not in core]):
        need = sum(sizes[n] for n in group)
        if need == 0:
            continue
        fraction = min(1.0, left / need)
        for name in group:
            share[name] = fraction
        left -= fraction * need
    return share


class Allocation:
    """A budget shared out as the run goes: each scenario's share is :func:`allocate` over the scenarios not yet
    run, with what is left of ``total``. Scenarios that use their whole share leave every later share as the
    allocation at the start had it; one that stops early hands the rest on.

    ``fraction(name)`` is asked when a scenario starts, ``spend(name, n)`` tells what it drew.
    """

    def __init__(self, sizes: dict, core: set, total: int):
        self.sizes, self.core, self.total = dict(sizes), set(core), int(total)
        self.spent, self.done = 0, set()

    def fraction(self, name: str) -> float:
        if name not in self.sizes:
            return 1.0
        if name in self.done:
            return 0.0
        todo = {n: size for n, size in self.sizes.items() if n not in self.done}
        return allocate(todo, self.core, max(0, self.total - self.spent))[name]

    def spend(self, name: str, n: int) -> None:
        self.spent += max(0, int(n))
        self.done.add(name)


def pilot_rate(session: object, scenario: object, seed: int) -> float:
    """Outcomes per second of the decoder on ``scenario`` (a pilot of ``PILOT_DRAWS`` draws with their own seed,
    not used as evidence)."""
    from specverify.certification.run.collect import scenario_seed
    from specverify.protocol import Request

    handle = session.decoder(scenario)
    seed = scenario_seed(seed, scenario.name, salt=1) if handle.seeded else None
    request = Request(scenario.prompt, scenario.params, scenario.num_draft_tokens, seed=seed)
    started = time.perf_counter()
    session.draw(handle, request, PILOT_DRAWS)
    return PILOT_DRAWS / max(time.perf_counter() - started, 1e-6)


def allotted(planned: int, fraction: float) -> int:
    """Outcomes a scenario draws at ``fraction`` of its plan (0 when below ``MIN_USEFUL``); a plan no larger than
    ``MIN_USEFUL`` is drawn whole whenever it has a share (a part of it would detect nothing, all of it costs
    little)."""
    if planned <= MIN_USEFUL:
        return planned if fraction > 0 else 0
    n = planned if fraction >= 1.0 else int(math.floor(planned * fraction))
    return n if n >= MIN_USEFUL else 0
