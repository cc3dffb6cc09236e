"""The oracle's answers a certification asks for, computed once per process: the exact law of a request shape and
the greedy outcome of a prompt, keyed by model pair spec, prompt and params.

The law of a shape is asked for by its planned size (budgets), its run and its evidence; a test session or a
pytest plugin session certifies the same scenarios many times. The values are the oracle's, unchanged
(``specverify.oracles.law``); only the repeats are saved.
"""

from __future__ import annotations

__all__ = ["law_of", "greedy_of", "greedy_many"]

_MAX = 4096  # entries per table; the oldest go first
_LAWS: dict = {}
_GREEDY: dict = {}


def _key(spec, prompt, params) -> tuple:
    try:
        hash(params)
        return spec, tuple(prompt), params
    except TypeError:  # a grammar holds dicts: its repr names every transition
        return spec, tuple(prompt), repr(params)


def _memo(table: dict, key: tuple, compute):
    if key not in table:
        if len(table) >= _MAX:
            table.pop(next(iter(table)))
        table[key] = compute()
    return table[key]


def law_of(scenario, prompt=None, params=None) -> object:
    """``exact_law`` of ``scenario``'s request shape (or of ``prompt``/``params`` on its model pair)."""
    from specverify.oracles.law import exact_law

    prompt = scenario.prompt if prompt is None else prompt
    params = scenario.params if params is None else params
    target = scenario.models().target
    return _memo(_LAWS, _key(scenario.pair, prompt, params), lambda: exact_law(target, prompt, params))


def greedy_of(scenario, prompt, params) -> tuple:
    """``greedy_outcome`` of ``prompt`` under ``params`` on ``scenario``'s model pair."""
    from specverify.oracles.law import greedy_outcome

    target = scenario.models().target
    return _memo(_GREEDY, _key(scenario.pair, prompt, params), lambda: greedy_outcome(target, prompt, params))


def greedy_many(scenario, prompts, params) -> list:
    """:func:`greedy_of` of each of ``prompts``; those not known yet are enumerated together in one batched oracle
    walk (``oracles.law.greedy_outcomes``: the same outcomes as one prompt at a time)."""
    from specverify.oracles.law import greedy_outcome, greedy_outcomes

    target = scenario.models().target
    keys = [_key(scenario.pair, p, params) for p in prompts]
    todo = list(dict.fromkeys(tuple(p) for p, k in zip(prompts, keys) if k not in _GREEDY))
    fresh = dict(zip(todo, greedy_outcomes(target, todo, params))) if todo else {}

    def one(prompt):  # a key evicted since the look-up above is computed alone
        return fresh[tuple(prompt)] if tuple(prompt) in fresh else greedy_outcome(target, prompt, params)

    return [_memo(_GREEDY, k, lambda p=p: one(p)) for p, k in zip(prompts, keys)]
