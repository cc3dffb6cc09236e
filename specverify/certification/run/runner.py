"""Run the decoder under test, in a worker process with a per-call timeout (or in-process for tests).

Whatever the decoder does — raise, hang, return the wrong type — comes back as ``DecoderFailure`` with a reason;
the certifier turns it into an ``invalid`` verdict and never crashes or passes because of it.
"""

from __future__ import annotations

import importlib.util
import inspect
import multiprocessing
import os
import pickle
import sys
import traceback
import warnings

from specverify.certification.config.run_config import factory_name
from specverify.certification.run.bulk import FREEZE as _FREEZE
from specverify.certification.run.bulk import clean_completions, clean_outcomes, gc_paused
from specverify.certification.run.factory import SetupFailure, factory_options, resolve_factory, user_traceback
from specverify.enums import Isolation
from specverify.errors import InvalidArgument, ProtocolViolation, check
from specverify.protocol import (
    TIMING_PHASES,
    Completion,
    SampleCounts,
    call_size_of,
    capabilities_of,
    draft_law_of,
    engine_of,
    fixed_gamma_of,
    prefill_tokens_of,
)

__all__ = [
    "DecoderCloseWarning",
    "DecoderFailure",
    "InProcessRunner",
    "ProcessRunner",
    "each_call",
    "make_runner",
]


class DecoderCloseWarning(RuntimeWarning):
    """A decoder's ``close()`` raised after its run was decided (the certificate stands; the engine may leak)."""


class DecoderFailure(ProtocolViolation):
    """The decoder under test misbehaved (exception, hang, malformed return value); ``reason`` says how."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def takes_start(sample) -> bool:
    """Whether a decoder's ``sample`` takes the draw offset ``start`` (a parameter of that name, or ``**kwargs``)."""
    if not callable(sample):
        return False
    try:
        params = inspect.signature(sample).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature: the two-argument form
        return False
    return any(p.name == "start" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _summary(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(lines[-4:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"


def _as_int(x: object) -> object:
    """An integer type (``np.int64`` from argmax, a 0-d tensor) as ``int``; anything else (bools too) unchanged."""
    if type(x) is int or isinstance(x, bool) or type(x).__name__ == "bool_":
        return x
    try:
        return int(x.__index__())
    except (AttributeError, TypeError):
        return x


def _ints(seq) -> tuple:
    return tuple(_as_int(t) for t in seq)


def _as_completions(result, count: int) -> list:
    if result is None or isinstance(result, (str, bytes)):
        raise DecoderFailure(f"decoder returned {type(result).__name__}, expected a sequence of {count} Completions")
    try:
        items = list(result)
    except TypeError:
        raise DecoderFailure(f"decoder returned {type(result).__name__}, expected a sequence of Completions") from None
    if clean_completions(items):
        return items
    out = []
    for i, c in enumerate(items):
        if not hasattr(c, "tokens") or not hasattr(c, "finish_reason"):
            raise DecoderFailure(f"completion {i} is {type(c).__name__}, without tokens/finish_reason")
        stream = getattr(c, "stream", None)
        accepted = getattr(c, "accepted", None)
        try:
            out.append(
                Completion(
                    tokens=_ints(c.tokens),
                    finish_reason=c.finish_reason,
                    stream=None if stream is None else tuple(_ints(s) for s in stream),
                    accepted=None if accepted is None else _ints(accepted),
                )
            )
        except TypeError as exc:
            raise DecoderFailure(f"completion {i} has malformed fields: {exc}") from None
    return out


def _as_counts(result) -> SampleCounts:
    outcomes = getattr(result, "outcomes", None)
    if not hasattr(outcomes, "items"):
        raise DecoderFailure(f"decoder.sample returned {type(result).__name__}, expected SampleCounts(outcomes=...)")
    try:
        clean = dict(outcomes) if clean_outcomes(outcomes) else None
        if clean is None:
            clean = {(_ints(tokens), reason): _as_int(n) for (tokens, reason), n in outcomes.items()}
        if not all(type(n) is int for n in clean.values()):
            raise TypeError(f"counts {sorted(set(map(repr, clean.values())))[:3]} must be integers")
        accepted = getattr(result, "accepted", None)
        accepted = None if accepted is None else {_as_int(k): _as_int(v) for k, v in accepted.items()}
        rounds = getattr(result, "rounds", None)  # all-round acceptance (docs/metrics.md), optional
        rounds = None if rounds is None else {_as_int(k): _as_int(v) for k, v in rounds.items()}
        positions = getattr(result, "positions", None)
        positions = None if positions is None else tuple((_as_int(v), _as_int(a)) for v, a in positions)
    except (TypeError, ValueError) as exc:
        raise DecoderFailure(f"decoder.sample returned malformed counts: {exc}") from None
    return SampleCounts(outcomes=clean, accepted=accepted, rounds=rounds, positions=positions)


class _Host:
    """Holds decoders keyed by model pair; used in-process and inside the worker. ``options`` are the factory's
    keyword arguments (``--engine-option``)."""

    def __init__(self, factory, options=None):
        self.factory, self.options = factory, dict(options or {})
        self.decoders = {}

    def make(self, key, target, draft) -> dict:
        """Build the decoder for one model pair; what it declares (capabilities, fast path, draft law, prefill
        tokens, engine description), checked: a failure here is the factory's, so a set-up failure."""
        try:
            decoder = self.factory(target, draft, **self.options)
        except Exception as exc:  # noqa: BLE001 - the factory's own failure: a set-up failure, shown once
            raise SetupFailure(f"the factory raised {user_traceback(exc)}") from None
        if not callable(decoder):
            raise SetupFailure(
                f"the factory returned {type(decoder).__name__}, not a decoder: expected decoder(requests) -> "
                "completions (docs/adapters.md)"
            )
        try:
            declared = dict(
                capabilities=sorted(capabilities_of(decoder)),
                has_sample=callable(getattr(decoder, "sample", None)),
                sample_start=takes_start(getattr(decoder, "sample", None)),
                draft_law=draft_law_of(decoder),
                prefill_tokens=prefill_tokens_of(decoder),
                engine=engine_of(decoder),
                reports_metrics=callable(getattr(decoder, "reported_metrics", None)),
                fixed_gamma=fixed_gamma_of(decoder),
                call_size=call_size_of(decoder),
            )
        except InvalidArgument as exc:
            raise SetupFailure(str(exc)) from None
        self.decoders[key] = decoder
        _FREEZE.hold(self)
        return declared

    def call(self, key, requests):
        result = self.decoders[key](list(requests))
        with gc_paused():
            return _as_completions(result, len(requests))

    def release(self, key):
        """``decoder.close()`` where the decoder has one (the certifier is done with its pair)."""
        _FREEZE.thaw()  # what the decoder held must be collectable once it is gone
        decoder = self.decoders.pop(key, None)
        close = getattr(decoder, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:  # noqa: BLE001 - the decoder's own failure
                raise DecoderFailure(f"decoder.close() raised {_summary(exc)}") from None

    def release_all(self):
        """Close every decoder still held (end of the run); a failing close is a ``DecoderCloseWarning`` only: the
        certificate is already decided."""
        try:
            for key in list(self.decoders):
                try:
                    self.release(key)
                except DecoderFailure as exc:
                    warnings.warn(f"specverify: {exc.reason}", DecoderCloseWarning, stacklevel=2)
        finally:
            _FREEZE.release(self)

    def sample(self, key, request, n, start=0):
        """``decoder.sample(request, n)``, or ``(request, n, start=start)`` for a decoder whose ``sample`` takes the
        draw offset (docs/adapters.md); the certifier never passes a nonzero ``start`` to one that does not."""
        if start:
            return _as_counts(self.decoders[key].sample(request, n, start=start))
        return _as_counts(self.decoders[key].sample(request, n))

    def engine_info(self, key):
        """The decoder's optional ``engine_info`` now (after its calls: the effective configuration), checked."""
        try:
            return engine_of(self.decoders.get(key))
        except InvalidArgument as exc:
            raise DecoderFailure(str(exc)) from None

    def reported_metrics(self, key):
        """The decoder's ``reported_metrics()`` (docs/adapters.md), checked: a ``ReportedMetrics`` or None."""
        from specverify.metrics.counters import as_reported_metrics

        try:
            return as_reported_metrics(self.decoders[key].reported_metrics())
        except InvalidArgument as exc:
            raise DecoderFailure(str(exc)) from None

    def timings(self, key):
        """The decoder's optional per-phase times (``decoder.timings()``, docs/adapters.md), checked; None without."""
        report = getattr(self.decoders.get(key), "timings", None)
        if not callable(report):
            return None
        got = report()
        if got is None:
            return None
        if not isinstance(got, dict) or not set(got) <= set(TIMING_PHASES):
            raise DecoderFailure(f"decoder.timings() returned {got!r}: expected a dict with keys among {TIMING_PHASES}")
        try:
            out = {str(k): float(v) for k, v in got.items()}
        except (TypeError, ValueError):
            raise DecoderFailure(f"decoder.timings() returned {got!r}: values must be milliseconds") from None
        if not all(v >= 0 and v == v for v in out.values()):
            raise DecoderFailure(f"decoder.timings() returned {got!r}: milliseconds must be finite and >= 0")
        return out


class InProcessRunner:
    """Runs the decoder in this process (no hang protection): fast, for tests and trusted decoders."""

    def __init__(self, spec, *, timeout_s: float = 0, options=None):
        self._host = _Host(resolve_factory(spec), options)

    def request(self, op: str, *args: object) -> object:
        try:
            return getattr(self._host, op)(*args)
        except (DecoderFailure, SetupFailure):
            raise
        except Exception as exc:  # the decoder's own failure: report it, never crash
            raise DecoderFailure(_summary(exc)) from None

    def calls(self, key, batches: list) -> tuple:
        """Several decoder calls, one after another (:meth:`ProcessRunner.calls`' contract): ``(completion lists
        of the calls that succeeded, the first failure or None)``."""
        return each_call(lambda requests: self.request("call", key, requests), batches)

    def close(self) -> None:
        self._host.release_all()


def each_call(call, batches: list) -> tuple:
    """``call`` on each batch in turn until one raises ``DecoderFailure`` (or ``SetupFailure``): ``(answers,
    failure or None)``, the contract of a runner's ``calls``."""
    check(callable(call), f"call={call!r} must be callable: one decoder call, requests -> completions.")
    answers = []
    for requests in batches:
        try:
            answers.append(call(requests))
        except (DecoderFailure, SetupFailure) as exc:
            return answers, exc
    return answers, None


def set_threads(threads: int) -> None:
    """The worker's thread policy: ``threads`` OpenMP / torch threads (tiny tensors: more threads cost more)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(threads)


def _worker_main(conn, spec, path=None, threads=1, options=None):
    if path and path not in sys.path:
        sys.path.insert(0, path)
    try:
        set_threads(threads)
        host = _Host(resolve_factory(spec), options)
    except SetupFailure as exc:
        conn.send(("setup", exc.reason))
        return
    except BaseException as exc:  # noqa: BLE001 - report anything, the parent decides
        conn.send(("setup", user_traceback(exc)))
        return
    conn.send(("ok", None))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        if op == "quit":
            host.release_all()
            return
        if op == "calls":  # several calls in one message: an answer each, none after the first failure
            key, batches = args
            for requests in batches:
                if not _answer(conn, host, "call", (key, requests)):
                    break
            continue
        _answer(conn, host, op, args)


def _answer(conn, host, op, args) -> bool:
    """Run ``host.op(*args)`` and send its answer (or the failure); whether it succeeded."""
    try:
        conn.send(("ok", getattr(host, op)(*args)))
        return True
    except SetupFailure as exc:
        conn.send(("setup", exc.reason))
    except DecoderFailure as exc:
        conn.send(("error", exc.reason))
    except BaseException as exc:  # noqa: BLE001
        conn.send(("error", _summary(exc)))
    return False


class ProcessRunner:
    """Runs the decoder in a spawned worker process; a call past ``timeout_s`` kills it (a hang is invalid)."""

    def __init__(self, spec, *, timeout_s: float = 120.0, threads: int = 1, options=None):
        check(timeout_s > 0, f"timeout_s={timeout_s!r} must be > 0.")
        ctx = multiprocessing.get_context("spawn")
        self.timeout_s = timeout_s
        self._conn, child = ctx.Pipe()
        args = (child, spec, os.getcwd(), threads, dict(options or {}))
        self._proc = ctx.Process(target=_worker_main, args=args, daemon=True)
        try:
            self._proc.start()
        except (pickle.PicklingError, AttributeError, TypeError) as exc:  # a lambda or local function
            child.close()
            raise InvalidArgument(
                f"factory={factory_name(spec)!r} cannot be sent to the worker process ({type(exc).__name__}: {exc}): "
                "use a module-level function (named as module:attr) or --isolation none (isolation='none')."
            ) from None
        child.close()
        self._receive(max(timeout_s, 120.0), "starting the worker", setup=True)

    def _receive(self, timeout, what, *, setup=False):
        if not self._conn.poll(timeout):
            self.kill()  # hung: asking it to quit would wait out close()'s grace period for nothing
            raise DecoderFailure(
                f"hang: no answer within {timeout:g} s while {what} (a slow decoder needs a longer --timeout; "
                "a hung one is invalid)"
            )
        try:
            status, payload = self._conn.recv()
        except EOFError:
            self._proc.join(5)
            code = self._proc.exitcode
            self.close()
            if setup:  # inside the factory (or importing it): the decoder was never made
                raise SetupFailure(f"the worker process died while {what} (exit code {code})") from None
            raise DecoderFailure(f"the worker process died while {what} (exit code {code})") from None
        if status == "setup":
            raise SetupFailure(payload)
        if status == "error":
            raise DecoderFailure(payload)
        return payload

    def request(self, op: str, *args: object) -> object:
        if not self._proc.is_alive():
            raise DecoderFailure("the worker process is gone (an earlier call hung or crashed)")
        self._conn.send((op, args))
        if op == "call":
            what = f"running decoder.__call__ on {len(args[1])} requests"
        elif op == "sample":
            start = args[3] if len(args) > 3 else 0
            what = f"running decoder.sample(request, n={args[2]}" + (f", start={start})" if start else ")")
        elif op == "make":
            what = "running the factory"
        else:
            what = f"running decoder.{op}"
        answer = self._receive(max(self.timeout_s, 120.0) if op == "make" else self.timeout_s, what, setup=op == "make")
        if op == "make":
            _FREEZE.hold(self)  # this process's set-up (the oracle's models, imports) is done too
        return answer

    def calls(self, key, batches: list) -> tuple:
        """Several decoder calls in one message: the worker makes them one after another and answers each as it
        ends, so its next call starts while this process checks the last one's answer, with no round trip between
        them (batch composition's thousands of calls of one or two requests; docs/design.md says what it saves).
        Each answer is awaited within the per-call timeout, as a single call's is. Returns ``(completion lists of
        the calls that succeeded, in order; the first failure, a DecoderFailure or SetupFailure, or None)``: the
        worker makes no call after a failure, so no answer is left in the pipe."""
        batches = [list(b) for b in batches]
        if not self._proc.is_alive():
            return [], DecoderFailure("the worker process is gone (an earlier call hung or crashed)")
        self._conn.send(("calls", (key, batches)))
        answers = []
        for i, requests in enumerate(batches):
            what = f"running decoder.__call__ on {len(requests)} requests (call {i + 1} of {len(batches)} sent at once)"
            try:
                answers.append(self._receive(self.timeout_s, what))
            except (DecoderFailure, SetupFailure) as exc:
                return answers, exc
        return answers, None

    def close(self) -> None:
        _FREEZE.release(self)
        if self._proc.is_alive():
            try:
                self._conn.send(("quit", ()))
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(30)  # the worker closes its decoders first (an engine may take seconds)
            self.kill()

    def kill(self) -> None:
        """Kill the worker now (SIGKILL): a hung call's worker, which would never answer ``quit``."""
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(2)


def make_runner(spec: object, config) -> InProcessRunner | ProcessRunner:
    """The runner for ``config.isolation`` (a ``RunConfig``, already validated); the worker runs ``config.threads``
    threads (default 1), in-process only when given; the factory gets :func:`factory_options`."""
    options = factory_options(resolve_factory(spec), config)  # import errors surface here, before any worker starts
    if config.isolation == Isolation.PROCESS:
        return ProcessRunner(spec, timeout_s=config.timeout_s, threads=config.threads or 1, options=options)
    if config.threads is not None:
        set_threads(config.threads)
    return InProcessRunner(spec, options=options)
