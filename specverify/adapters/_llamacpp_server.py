"""One ``llama-server`` process and what is read back from it, for ``ServerDecoder`` in
``specverify.adapters._llamacpp_bin`` (its docstring has the mapping, the engine configurations and their evidence):
start-up on 127.0.0.1 and a free port (``-np`` slots, ``N_CTX`` context tokens per slot, F32 KV caches, the draft's
flags from ``spec_args``), ``/health``, ``POST /completion``, ``/metrics`` (``parse_metrics``), shutdown (``close_all``
at exit), and ``ServerEvidence``, the engine states the responses and counters show. Kept apart so that
``_llamacpp_bin`` holds the two decoders' mappings; nothing here imports llama_cpp.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from typing import Sequence

from specverify.adapters._llamacpp_common import LONG_PREFIX, executable

__all__ = ["N_CTX", "N_PARALLEL", "ServerEvidence", "close_all", "parse_metrics", "spec_args"]

N_CTX = 64
N_PARALLEL = 4
_LIVE: list = []


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM when the process that started it dies (a killed certifier worker)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort (not Linux)
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec_args(draft, gamma: int) -> list:
    """The speculative flags of one server: a draft model (``draft`` a GGUF path); none for ``draft`` None."""
    if draft is None:
        return []
    # without --spec-type the draft model is loaded and never used ("speculative.types": "none")
    args = ["--spec-type", "draft-simple", "--spec-draft-model", draft, "--spec-draft-n-max", str(gamma)]
    return args + ["--spec-draft-n-min", "0", "--spec-draft-p-min", "0", "-ctkd", "f32", "-ctvd", "f32"]


class _Server:
    """One ``llama-server`` process on 127.0.0.1 with ``slots`` slots (``draft`` None: no speculation)."""

    def __init__(self, target: str, draft, gamma: int, timeout_s: float = 60.0, *, slots: int = N_PARALLEL):
        self.port = _free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="specverify-llama-server-", suffix=".log", delete=False)
        args = [executable("llama-server"), "-m", target, "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["-c", str(N_CTX * slots), "-np", str(slots), "-t", "1", "-tb", "1", "--no-webui", "--metrics"]
        args += ["-ctk", "f32", "-ctv", "f32"]  # the default F16 KV cache moves logits by up to 5e-3
        args += spec_args(draft, gamma)
        self.args = args
        self.proc = subprocess.Popen(
            args, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent
        )
        self.local = threading.local()
        _LIVE.append(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode} at start-up: {self.tail()}")
            try:
                status, _ = self._request("GET", "/health", None, 2.0)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"llama-server did not answer /health within {timeout_s:g} s: {self.tail()}")

    def tail(self, n: int = 1500) -> str:
        try:
            with open(self.log.name, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return "(no log)"

    def _request(self, method: str, path: str, body, timeout: float) -> tuple:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(
                method,
                path,
                body=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            return response.status, response.read()
        except Exception:
            conn.close()
            self.local.conn = None
            raise

    def complete(self, body: dict, timeout: float = 60.0) -> dict:
        if self.proc.poll() is not None:
            raise RuntimeError(f"llama-server died (exit {self.proc.returncode}): {self.tail()}")
        try:
            status, raw = self._request("POST", "/completion", body, timeout)
        except (OSError, http.client.HTTPException) as exc:
            raise RuntimeError(f"llama-server request failed ({exc!r}) for {body!r}: {self.tail()}") from None
        if status != 200:
            raise RuntimeError(f"llama-server answered {status}: {raw[:500]!r} for {body!r}")
        try:
            out = json.loads(raw)
            tokens = [int(t) for t in out["tokens"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise RuntimeError(f"llama-server's response is malformed ({exc!r}): {raw[:500]!r}") from None
        answer = {"tokens": tokens, "timings": out.get("timings") or {}, "stop_type": out.get("stop_type")}
        answer["id_slot"] = out.get("id_slot")
        return answer

    def metrics(self) -> dict:
        """The server's Prometheus counters (``GET /metrics``, ``--metrics``): ``{name without 'llamacpp:': value}``."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10.0)  # fresh: a kept-alive one may be
        try:  # closed by the server while idle
            conn.request("GET", "/metrics")
            response = conn.getresponse()
            status, raw = response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise RuntimeError(f"llama-server /metrics failed ({exc!r}): {self.tail()}") from None
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError(f"llama-server /metrics answered {status}: {raw[:300]!r}")
        return parse_metrics(raw.decode("utf-8", "replace"))

    def close(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)


def parse_metrics(text: str) -> dict:
    """``llamacpp:NAME VALUE`` lines of a /metrics answer as ``{NAME: float}`` (comments skipped).

    >>> parse_metrics("# HELP x\\nllamacpp:n_decode_total 12\\nllamacpp:n_busy_slots_per_decode 1.5\\n")
    {'n_decode_total': 12.0, 'n_busy_slots_per_decode': 1.5}
    """
    out = {}
    for line in text.splitlines():
        if line.startswith("llamacpp:"):
            name, _, value = line[len("llamacpp:") :].partition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                continue
    return out


def close_all() -> None:
    """Stop every llama-server this process started (registered with atexit)."""
    for server in list(_LIVE):
        server.close()


atexit.register(close_all)


class ServerEvidence:
    """The engine states a ``ServerDecoder``'s servers reached (``_llamacpp_bin``'s docstring, engine
    configurations): from each response, ``timings.cache_n`` (prompt tokens reused from the slot's cache) and
    ``id_slot``; from each server's ``/metrics``, read after every call and when it is retired, ``n_decode_total``
    and ``n_busy_slots_per_decode``."""

    def __init__(self):
        self.requests = self.cache_hits = self.cached_tokens = self.long_hits = 0
        self.slot_ids: set = set()
        self.retired = {"decodes": 0.0, "parallel": 0.0}  # counters of the servers already closed
        self.latest: dict = {}  # id(server) -> its last /metrics reading

    def observe(self, server, answers: Sequence[dict]) -> None:
        for answer in answers:
            cached = int(answer["timings"].get("cache_n", 0) or 0)
            self.requests += 1
            self.cache_hits += cached > 0
            self.cached_tokens += cached
            self.long_hits += cached >= LONG_PREFIX
            if answer.get("id_slot") is not None:
                self.slot_ids.add(int(answer["id_slot"]))
        self.latest[id(server)] = server.metrics()

    def retire(self, server) -> None:
        reading = self.latest.pop(id(server), None)
        if reading is not None:
            decodes, parallel = _decodes(reading)
            self.retired["decodes"] += decodes
            self.retired["parallel"] += parallel

    def state(self, live) -> dict:
        """``engine_info["state"]``: requests, cache_hit_requests, cached_prompt_tokens, long_prefix_hits (requests
        whose ``cache_n`` is at least ``LONG_PREFIX``), distinct_slots,
        decode_calls and parallel_slot_decodes (the busy slots beyond one summed over decode calls, from the mean
        the server reports: > 0 only when some llama_decode served two slots or more)."""
        decodes, parallel = self.retired["decodes"], self.retired["parallel"]
        for server in live:
            reading = self.latest.get(id(server))
            if reading is not None:
                d, p = _decodes(reading)
                decodes, parallel = decodes + d, parallel + p
        return {
            "requests": self.requests,
            "cache_hit_requests": self.cache_hits,
            "cached_prompt_tokens": self.cached_tokens,
            "long_prefix_hits": self.long_hits,
            "distinct_slots": len(self.slot_ids),
            "decode_calls": int(decodes),
            "parallel_slot_decodes": int(round(parallel)),
        }


def _decodes(reading: dict) -> tuple:
    """(decode calls, busy slots beyond one summed over them) of one /metrics reading. The server prints the mean
    with 6 significant digits, so the second is good to about decode calls × 5e-6."""
    decodes = float(reading.get("n_decode_total", 0.0))
    mean_busy = float(reading.get("n_busy_slots_per_decode", 0.0))
    return decodes, max(0.0, (mean_busy - 1.0) * decodes)
