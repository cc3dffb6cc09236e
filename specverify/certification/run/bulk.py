"""What the certifier does to many small objects at once: hold or narrow the garbage collector's work, copy
requests, recognise clean results (``collect.py`` and ``runner.py`` use these)."""

from __future__ import annotations

import collections
import gc
import itertools
import operator
from typing import Iterable, Optional

from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request

__all__ = ["gc_paused", "reseeded", "GcFreeze", "FREEZE", "clean_outcomes", "clean_completions"]


class gc_paused:  # noqa: N801 - used as a context manager, like contextlib's lower-case ones
    """Hold the cyclic garbage collector while the certifier builds or checks many small acyclic objects (requests,
    the keys of a call's completions): each collection the allocations trigger walks every object of the process
    (torch's included), which cost more than the work itself. Restores the previous state. A class, not a
    generator: it wraps every decoder call, some of which return one completion."""

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.enabled:
            gc.enable()


def reseeded(templates: Iterable[Request], seeds: Iterable[Optional[int]]) -> list:
    """``Request(t.prompt, t.params, t.num_draft_tokens, seed=s, tree=t.tree)`` for each template and seed, built
    without re-running the constructor's checks: the templates already passed them, and the seeds are checked here
    in bulk (a check builds a few hundred thousand requests; the constructor costs ~4 µs each, this ~0.5 µs)."""
    templates, seeds = list(templates), list(seeds)
    check(len(templates) == len(seeds), f"len(seeds)={len(seeds)!r} must equal len(templates)={len(templates)!r}.")
    odd = set(map(type, templates)) - {Request}
    check(not odd, f"templates hold {sorted(t.__name__ for t in odd)!r}: expected specverify Requests.")
    kinds = set(map(type, seeds))
    ok = kinds <= {int, type(None)}
    if ok and int in kinds:
        given = seeds if type(None) not in kinds else [s for s in seeds if s is not None]
        ok = min(given) >= 0 and max(given) < 2**63
    if not ok:  # the message only on failure: an f-string passed to check() is built on every call
        names = sorted(k.__name__ for k in kinds)
        raise InvalidArgument(f"seeds must be None or ints in [0, 2**63); got types {names!r}.")
    with gc_paused():  # every step a C-level map, no Python frame per request (~0.7 µs a request, was ~1.3)
        fields = list(map(dict.copy, map(_DICT, templates)))
        _drain(map(dict.__setitem__, fields, itertools.repeat("seed"), seeds))
        out = list(map(object.__new__, itertools.repeat(Request, len(fields))))
        _drain(map(object.__setattr__, out, itertools.repeat("__dict__"), fields))
    return out


_DICT = operator.attrgetter("__dict__")


def _drain(iterator) -> None:
    collections.deque(iterator, maxlen=0)


class GcFreeze:
    """``gc.freeze()`` once a decoder is set up, ``gc.unfreeze()`` when the last holder closes.

    What set-up leaves behind (torch, the models, the decoder, the certifier's modules) lives to the end of the run,
    yet every full collection that the run's millions of small objects trigger walks all of it (~0.3 s a time in a
    certifier process, several times per standard run). Frozen, the collector skips it. Before a decoder is released
    everything is thawed (``thaw``), so what it held — an engine's objects — can be collected; the next set-up freezes
    again. A freeze this process already had (the user's) is left as it is and never undone."""

    def __init__(self):
        self.holders, self.ours = set(), False

    def hold(self, holder: object) -> None:
        if not self.ours and gc.get_freeze_count():
            return  # frozen by someone else: not ours to manage
        gc.freeze()  # again after each set-up: the new decoder joins what is frozen
        self.ours = True
        self.holders.add(id(holder))

    def thaw(self) -> None:
        if self.ours:
            gc.unfreeze()
            self.ours = False

    def release(self, holder: object) -> None:
        self.holders.discard(id(holder))
        if not self.holders:
            self.thaw()


FREEZE = GcFreeze()


def clean_outcomes(outcomes) -> bool:
    """Every key a (tuple of Python ints, str) pair and every count an int: the common case, checked in bulk."""
    keys = list(outcomes.keys())
    if set(map(type, keys)) - {tuple} or set(map(len, keys)) - {2}:
        return False
    tokens = list(map(operator.itemgetter(0), keys))
    if set(map(type, tokens)) - {tuple} or set(map(type, map(operator.itemgetter(1), keys))) - {str}:
        return False
    ints = itertools.chain(itertools.chain.from_iterable(tokens), outcomes.values())
    return not set(map(type, ints)) - {int}


_TOKENS, _STREAM, _ACCEPTED = (operator.attrgetter(name) for name in ("tokens", "stream", "accepted"))


_FEW = 4  # up to this many completions a plain loop beats the bulk sets (~1.5 µs a completion instead of ~9 a call)


def _ints(values) -> bool:
    if type(values) is not tuple:
        return False
    for value in values:  # a loop: ~2x cheaper than all() over a generator for the few ints of a completion
        if type(value) is not int:
            return False
    return True


def _clean_few(items: list) -> bool:
    for item in items:
        if type(item) is not Completion or not _ints(item.tokens):
            return False
        if item.accepted is not None and not _ints(item.accepted):
            return False
        stream = item.stream
        if stream is not None:
            if type(stream) is not tuple:
                return False
            for chunk in stream:
                if not _ints(chunk):
                    return False
    return True


def clean_completions(items: list) -> bool:
    """Every item a ``Completion`` whose tokens, ``accepted`` and stream chunks are tuples of Python ints: the
    common case, checked in bulk (a call returns up to thousands of them) instead of field by field."""
    if len(items) <= _FEW:  # a call of one or two requests (batch composition's): field by field is cheaper
        return _clean_few(items)
    items = list(dict(zip(map(id, items), items)).values())  # each object once (a decoder may share equal ones)
    if set(map(type, items)) - {Completion}:
        return False
    accepted = [a for a in map(_ACCEPTED, items) if a is not None]
    streams = [s for s in map(_STREAM, items) if s is not None]
    chunks = list(itertools.chain.from_iterable(streams))
    ints = list(map(_TOKENS, items)) + accepted + chunks
    if set(map(type, ints)) - {tuple} or set(map(type, streams)) - {tuple}:
        return False
    return not set(map(type, itertools.chain.from_iterable(ints))) - {int}
