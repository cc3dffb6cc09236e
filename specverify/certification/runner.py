"""Run the decoder under test, in a worker process with a per-call timeout (or in-process for tests).

Whatever the decoder does — raise, hang, return the wrong type — comes back as ``DecoderFailure`` with a reason;
the certifier turns it into an ``invalid`` verdict and never crashes or passes because of it.
"""

from __future__ import annotations

import importlib
import multiprocessing
import traceback
from typing import Callable, Union

from specverify.errors import InvalidArgument, ProtocolViolation, check
from specverify.protocol import Completion, SampleCounts, capabilities_of

__all__ = ["DecoderFailure", "resolve_factory", "factory_name", "InProcessRunner", "ProcessRunner", "make_runner"]


class DecoderFailure(ProtocolViolation):
    """The decoder under test misbehaved (exception, hang, malformed return value); ``reason`` says how."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def resolve_factory(spec: Union[str, Callable]) -> Callable:
    """``module:attr`` (or a callable) -> the factory. Import problems raise ``InvalidArgument`` with hints."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    check(
        isinstance(spec, str) and spec.count(":") == 1 and all(spec.split(":")),
        f"factory={spec!r} must be 'module:attr', e.g. 'specverify.reference:make_decoder'.",
    )
    module_name, attr = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(
            f"factory={spec!r}: cannot import module {module_name!r} ({exc}). Is it installed and on PYTHONPATH?"
        ) from exc
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            import difflib

            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=3)
            hint = f" Did you mean {', '.join(repr(f'{module_name}:{c}') for c in close)}?" if close else ""
            raise InvalidArgument(f"factory={spec!r}: {module_name!r} has no attribute {part!r}.{hint}")
        obj = getattr(obj, part)
    check(callable(obj), f"factory={spec!r} is not callable; expected factory(target, draft) -> decoder.")
    return obj


def factory_name(spec) -> str:
    """The ``module:attr`` that names ``spec`` on the command line (best effort for callables)."""
    if isinstance(spec, str):
        return spec
    return f"{getattr(spec, '__module__', '?')}:{getattr(spec, '__qualname__', getattr(spec, '__name__', '?'))}"


def _summary(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    tail = "".join(lines[-4:]).strip()
    return f"{type(exc).__name__}: {exc}\n{tail}"


def _as_completions(result, count: int) -> list:
    if result is None or isinstance(result, (str, bytes)):
        raise DecoderFailure(f"decoder returned {type(result).__name__}, expected a sequence of {count} Completions")
    try:
        items = list(result)
    except TypeError:
        raise DecoderFailure(f"decoder returned {type(result).__name__}, expected a sequence of Completions") from None
    out = []
    for i, c in enumerate(items):
        if not hasattr(c, "tokens") or not hasattr(c, "finish_reason"):
            raise DecoderFailure(f"completion {i} is {type(c).__name__}, without tokens/finish_reason")
        stream = getattr(c, "stream", None)
        accepted = getattr(c, "accepted", None)
        try:
            out.append(
                Completion(
                    tokens=tuple(c.tokens),
                    finish_reason=c.finish_reason,
                    stream=None if stream is None else tuple(tuple(s) for s in stream),
                    accepted=None if accepted is None else tuple(accepted),
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
        clean = {(tuple(tokens), reason): int(n) for (tokens, reason), n in outcomes.items()}
        accepted = getattr(result, "accepted", None)
        accepted = None if accepted is None else {int(k): int(v) for k, v in accepted.items()}
    except (TypeError, ValueError) as exc:
        raise DecoderFailure(f"decoder.sample returned malformed counts: {exc}") from None
    return SampleCounts(outcomes=clean, accepted=accepted)


class _Host:
    """Holds decoders keyed by model pair; used in-process and inside the worker."""

    def __init__(self, factory):
        self.factory = factory
        self.decoders = {}

    def make(self, key, target, draft):
        self.decoders[key] = decoder = self.factory(target, draft)
        return sorted(capabilities_of(decoder)), callable(getattr(decoder, "sample", None))

    def call(self, key, requests):
        return _as_completions(self.decoders[key](list(requests)), len(requests))

    def sample(self, key, request, n):
        return _as_counts(self.decoders[key].sample(request, n))


class InProcessRunner:
    """Runs the decoder in this process (no hang protection): fast, for tests and trusted decoders."""

    def __init__(self, spec, *, timeout_s: float = 0):
        self._host = _Host(resolve_factory(spec))

    def request(self, op: str, *args: object) -> object:
        try:
            return getattr(self._host, op)(*args)
        except DecoderFailure:
            raise
        except Exception as exc:  # the decoder's own failure: report it, never crash
            raise DecoderFailure(_summary(exc)) from None

    def close(self) -> None:
        pass


def _worker_main(conn, spec):
    try:
        host = _Host(resolve_factory(spec))
    except BaseException as exc:  # noqa: BLE001 - report anything, the parent decides
        conn.send(("error", _summary(exc)))
        return
    conn.send(("ok", None))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        if op == "quit":
            return
        try:
            conn.send(("ok", getattr(host, op)(*args)))
        except DecoderFailure as exc:
            conn.send(("error", exc.reason))
        except BaseException as exc:  # noqa: BLE001
            conn.send(("error", _summary(exc)))


class ProcessRunner:
    """Runs the decoder in a spawned worker process; a call past ``timeout_s`` kills it (a hang is invalid)."""

    def __init__(self, spec, *, timeout_s: float = 120.0):
        check(timeout_s > 0, f"timeout_s={timeout_s!r} must be > 0.")
        ctx = multiprocessing.get_context("spawn")
        self.timeout_s = timeout_s
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child, spec), daemon=True)
        self._proc.start()
        child.close()
        self._receive(max(timeout_s, 120.0), "starting the worker")

    def _receive(self, timeout, what):
        if not self._conn.poll(timeout):
            self.close()
            raise DecoderFailure(
                f"hang: no answer within {timeout:g} s while {what} (a slow decoder needs a longer --timeout; "
                "a hung one is invalid)"
            )
        try:
            status, payload = self._conn.recv()
        except EOFError:
            code = self._proc.exitcode
            self.close()
            raise DecoderFailure(f"the worker process died while {what} (exit code {code})") from None
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
            what = f"running decoder.sample(request, n={args[2]})"
        else:
            what = f"running decoder.{op}"
        return self._receive(self.timeout_s, what)

    def close(self) -> None:
        if self._proc.is_alive():
            try:
                self._conn.send(("quit", ()))
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)


def make_runner(
    spec: object, *, isolation: str = "process", timeout_s: float = 120.0
) -> InProcessRunner | ProcessRunner:
    check(isolation in ("process", "none"), f"isolation={isolation!r} must be 'process' or 'none'.")
    resolve_factory(spec)  # import errors surface here, before any worker starts
    return ProcessRunner(spec, timeout_s=timeout_s) if isolation == "process" else InProcessRunner(spec)
