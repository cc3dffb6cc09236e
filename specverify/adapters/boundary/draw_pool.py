"""Worker processes that draw a request's samples for an adapter's ``decoder.sample(request, n, start)``.

Batch-size-1 engines (transformers' assisted ``generate()``, llama-cpp-python's ``generate()``) answer one request
at a time on one core. ``DrawPool`` runs ``workers`` copies of the decoder, each in its own Python process (its own
model, its own engine state), and splits a ``sample`` call's per-draw seeds between them: worker k runs a
contiguous slice of the seeds, one ``generate`` per seed, and returns its counts, which the pool adds up.

**Why the law cannot depend on the worker.** Each draw is one request with its own seed, run alone through the
engine (no neighbour shares its call), and the engine's sampler is seeded from that seed only (transformers: the
global torch generator re-seeded per request; llama-cpp-python: a fresh sampler chain per ``generate`` seeded from
``Llama.set_seed``). So draw i's outcome is a function of its seed and the model, whichever process ran it; the
split only decides where it runs. Unseeded requests get fresh 63-bit seeds from the parent's own generator.

The workers are plain ``python -m specverify.adapters.boundary.draw_pool`` subprocesses speaking pickled frames over
their stdin/stdout (the certifier's worker is a daemonic process, which ``multiprocessing`` forbids to have children).
A worker reads until its stdin closes, so workers end with the process that owns them, also when the certifier
kills it for a hang. A worker's set-up failure or exception is re-raised in the parent as ``RuntimeError`` with
the worker's traceback (the engine's message, verdict ``invalid``).

**Engine state.** A worker's decoder may count the engine states its draws reached (an engine configuration's
evidence, ``engine_info["state"]``): a decoder with ``take_state()`` hands over, after each slice of draws, the
counts since the last take, and :meth:`DrawPool.counts` adds them into the ``state`` Counter it is given, so the
parent's decoder reports the states its workers reached (a worker switching decoders loses nothing untaken).
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
from collections import Counter
from typing import Callable, Optional, Sequence

from specverify.errors import check

__all__ = ["DrawPool", "shared_pool", "count_draws", "default_workers", "merge_counts"]

_HEADER = struct.Struct("<Q")


def default_workers() -> int:
    """Two workers where the process may run on two cores or more, else 0 (draw in-process)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 0


def count_draws(generate: Callable, request, seeds: Sequence[int]) -> tuple:
    """``(outcomes, first, rounds, unrounded)`` over one ``generate(request with seed s)`` per seed: outcome
    counts, first-round accepted counts, all-round accepted counts (None when ``accepted`` is not reported) and the
    draws that had no round (finished before their first round)."""
    from dataclasses import replace

    outcomes, first, rounds, unrounded, reported = Counter(), Counter(), Counter(), 0, True
    for seed in seeds:
        completion = generate(replace(request, seed=int(seed)))
        outcomes[completion.tokens, completion.finish_reason] += 1
        if completion.accepted is None:
            reported = False
        elif completion.accepted:
            first[completion.accepted[0]] += 1
            rounds.update(completion.accepted)
        else:
            unrounded += 1
    if not reported:
        return dict(outcomes), None, None, unrounded
    return dict(outcomes), dict(first), dict(rounds), unrounded


def merge_counts(parts: Sequence[tuple]) -> tuple:
    """The sum of ``count_draws`` results (acceptance None when any part did not report it)."""
    outcomes, first, rounds, unrounded = Counter(), Counter(), Counter(), 0
    reported = all(part[1] is not None for part in parts)
    for part_outcomes, part_first, part_rounds, part_unrounded in parts:
        outcomes.update(part_outcomes)
        unrounded += part_unrounded
        if reported:
            first.update(part_first)
            rounds.update(part_rounds)
    if not reported:
        return dict(outcomes), None, None, unrounded
    return dict(outcomes), dict(first), dict(rounds), unrounded


def _send(stream, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the stream closed")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the stream closed mid-message")
    return pickle.loads(data)


class DrawPool:
    """``workers`` subprocesses that draw for any number of decoders, one at a time: a worker holds the decoder
    ``make(*args)`` (a module-level callable building an in-process decoder with a ``generate(request)`` method)
    of the last key it was asked to draw for, and builds another when the key changes. Started on the first
    :meth:`counts` call; :func:`shared_pool` gives the process's pool, so a certification's model pairs share one
    start-up of the workers (importing torch or an engine costs seconds; loading a tiny model does not)."""

    def __init__(self, workers: int):
        check(
            isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1,
            f"workers={workers!r} must be an int >= 1 (0 draws in-process, without a pool).",
        )
        self.workers = workers
        self._procs: list = []
        self._held: list = []  # the key of the decoder each worker holds (None: none)

    def __repr__(self) -> str:
        return f"DrawPool(workers={self.workers}, started={bool(self._procs)})"

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the parent's imports, also a user's factory
        for _ in range(self.workers):
            self._procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "specverify.adapters.boundary.draw_pool"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
            )
            self._held.append(None)

    def _send(self, i: int, message) -> None:
        try:
            _send(self._procs[i].stdin, message)
        except OSError as exc:
            code = self._procs[i].poll()
            self.close()
            raise RuntimeError(f"a draw worker is gone (exit code {code}): {exc}") from None

    def _reply(self, i: int, what: str):
        proc = self._procs[i]
        try:
            status, value = _receive(proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            code = proc.poll()
            self.close()
            raise RuntimeError(f"a draw worker died during {what} (exit code {code}): {exc}") from None
        if status != "ok":
            self.close()
            raise RuntimeError(f"a draw worker failed during {what}:\n{value}")
        return value

    def counts(self, key, make: Callable, args: tuple, request, seeds: Sequence[int], state=None) -> tuple:
        """``count_draws`` over ``seeds`` with the decoder ``make(*args)`` (built once per worker for ``key``),
        the seeds split into contiguous slices, one per worker; the slices' counts merged. ``state``: a Counter the
        workers' engine-state counts of these draws are added into (module docstring), or None."""
        check(callable(make), f"make={make!r} must be a module-level callable.")
        if not self._procs:
            self._start()
        seeds = [int(s) for s in seeds]
        step = max(1, -(-len(seeds) // self.workers))
        slices = [seeds[i : i + step] for i in range(0, len(seeds), step)] or [[]]
        busy = range(len(slices))
        loading = [i for i in busy if self._held[i] != key]
        for i in loading:  # every worker builds its decoder at once
            self._held[i] = None
            self._send(i, ("load", make, tuple(args), _torch_threads()))
        for i in loading:
            self._reply(i, "set-up")
            self._held[i] = key
        for i, part in zip(busy, slices):
            self._send(i, ("draw", request, part))
        replies = [self._reply(i, "a sample call") for i in busy]
        if state is not None:
            for _, worker_state in replies:
                state.update(worker_state)
        return merge_counts([counts for counts, _ in replies])

    def forget(self, key) -> None:
        """Drop the decoder of ``key`` wherever a worker holds it (``decoder.close()``: engines hold memory)."""
        for i, held in enumerate(self._held):
            if held == key and self._procs:
                self._send(i, ("unload",))
                self._reply(i, "unload")
                self._held[i] = None

    def close(self) -> None:
        """End the workers (closing their stdin ends them; a worker that does not end within 10 s is killed)."""
        procs, self._procs, self._held = self._procs, [], []
        for proc in procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


_POOLS: dict = {}


def shared_pool(workers: int) -> DrawPool:
    """This process's pool of ``workers`` draw workers (made on first use, ended at exit)."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = DrawPool(workers)
        if len(_POOLS) == 1:
            atexit.register(_close_pools)
    return pool


def _close_pools() -> None:
    for pool in list(_POOLS.values()):
        pool.close()


def _torch_threads() -> Optional[int]:
    """The parent's torch thread count when torch is loaded (the certifier's worker sets it), else None."""
    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def _handle(message, held: list):
    """One message to a worker: ``("load", make, args, threads)``, ``("draw", request, seeds)`` or ``("unload",)``;
    ``held`` is the one-slot list of the decoder it holds."""
    kind = message[0]
    if kind == "load":
        _, make, args, threads = message
        held[0] = None
        held[0] = make(*args)
        if threads is not None and "torch" in sys.modules:  # the parent's torch threads, where make loaded torch
            sys.modules["torch"].set_num_threads(threads)
        return None
    if kind == "draw":
        _, request, seeds = message
        if held[0] is None:
            raise RuntimeError("draw before load: the worker holds no decoder")
        counts = count_draws(held[0].generate, request, seeds)
        take = getattr(held[0], "take_state", None)
        return counts, (dict(take()) if take is not None else {})
    if kind == "unload":
        close = getattr(held[0], "close", None)
        held[0] = None
        if close is not None:
            close()
        return None
    raise RuntimeError(f"unknown message kind {kind!r}")


def _serve(stdin, stdout) -> None:
    """A worker: answer each message (``_handle``) with ``("ok", value)`` or ``("error", traceback)`` until stdin
    closes."""
    import traceback

    held: list = [None]
    while True:
        try:
            message = _receive(stdin)
        except EOFError:
            return
        try:
            reply = ("ok", _handle(message, held))
        except BaseException:  # noqa: BLE001 - reported to the parent, which raises
            reply = ("error", traceback.format_exc())
        try:
            _send(stdout, reply)
        except OSError:  # the parent is gone
            return


def _main() -> None:
    # the protocol owns the real stdout; anything an engine prints (C code included) goes to stderr instead
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, protocol_out)


if __name__ == "__main__":
    _main()
