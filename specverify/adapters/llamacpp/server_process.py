"""One ``llama-server`` process and what is read back from it, for ``ServerDecoder`` (``server``): start-up on
127.0.0.1 and a free port (``-np`` slots, ``N_CTX`` context tokens per slot, F32 KV caches, the draft's flags from
``spec_args``), ``/health``, ``POST /completion``, ``/metrics`` (``parse_metrics``) and shutdown (``close_all`` at
exit). Nothing here imports llama_cpp.
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

from specverify.adapters.llamacpp.common import N_CTX, executable

__all__ = ["N_PARALLEL", "Server", "close_all", "parse_metrics", "spec_args"]

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


class Server:
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
