"""Managed servers: one process per (pair, γ, options) started from a command template on 127.0.0.1, stopped with
``close()`` (and at exit); and the launch line as a certificate may record it (secrets removed).

**Template placeholders** (``str.format`` names; each optional): ``{target}`` and ``{draft}`` the checkpoint
directories (safetensors + tokenizer), ``{target_gguf}`` / ``{draft_gguf}`` their GGUF files (written on first use),
``{gamma}`` the drafts per round, ``{port}`` a free port, ``{host}`` ``127.0.0.1``, ``{model}`` the name the server
is asked to serve (the OpenAI ``model`` field: ``target``). A template without ``{gamma}`` starts one server for
every γ; with it, one per γ. The server is asked to listen on ``{host}:{port}``; a template without ``{port}`` is
refused (two servers cannot share one).

The process runs in its own session (its children, e.g. vLLM's engine core, are stopped with it) and gets SIGTERM
when the certifier's process dies (Linux). Its output goes to a temporary log, quoted when it fails to start.
"""

from __future__ import annotations

import atexit
import os
import re
import shlex
import signal
import socket
import subprocess
import tempfile
from string import Formatter
from typing import Optional

from specverify.errors import InvalidArgument, check

__all__ = ["PLACEHOLDERS", "ManagedServer", "template_fields", "redact", "close_all", "free_port"]

PLACEHOLDERS = ("target", "draft", "target_gguf", "draft_gguf", "gamma", "port", "host", "model")
HOST = "127.0.0.1"
MODEL = "target"
_LIVE: list = []
#: flags whose value is a secret (the value is replaced by ``***`` in a recorded launch line)
_SECRET_FLAG = re.compile(r"^--?[\w-]*(api[-_]?key|token|secret|password|passwd|auth)[\w-]*$", re.IGNORECASE)


def template_fields(template: object) -> frozenset:
    """The placeholders ``template`` uses; ``InvalidArgument`` for an unknown one, a missing ``{port}`` or a
    template that is not a string."""
    check(
        isinstance(template, str) and template.strip() != "",
        f"template={template!r} must be a command line with placeholders, e.g. "
        "--engine-option template='vllm serve {target} --port {port} --dtype float32'.",
    )
    try:
        names = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise InvalidArgument(
            f"template={template!r} is not a valid format string ({exc}); write {{ as {{{{."
        ) from None
    unknown = sorted(names - set(PLACEHOLDERS))
    check(not unknown, f"template={template!r} uses {unknown!r}; the placeholders are {list(PLACEHOLDERS)!r}.")
    check("port" in names, f"template={template!r} must pass {{port}} to the server (each server gets a free port).")
    return frozenset(names)


def redact(argv, secrets=()) -> str:
    """The launch line with every secret removed: the value after a flag that names a key, token, secret or
    password (``--api-key X``, ``--api-key=X``), and any of ``secrets`` (values of the environment) anywhere.

    >>> redact(["vllm", "serve", "m", "--api-key", "s3cr3t", "--hf-token=abc", "--port", "8000"])
    'vllm serve m --api-key *** --hf-token=*** --port 8000'
    """
    out, hide_next = [], False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if _SECRET_FLAG.match(flag):
            if eq:
                out.append(f"{flag}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    line = " ".join(a if "***" in a else shlex.quote(a) for a in out)
    for secret in secrets:
        if secret:
            line = line.replace(secret, "***")
    return line


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort (not Linux)
        pass


class ManagedServer:
    """One server process from ``argv`` (the template filled in), listening on 127.0.0.1:``port``."""

    def __init__(self, argv: list, port: int, *, env: Optional[dict] = None, secrets=()):
        self.argv, self.port = list(argv), port
        self.url = f"http://{HOST}:{port}"
        self.launch = redact(self.argv, secrets)
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="specverify-server-", suffix=".log", delete=False)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,  # a server reads no input; never the certifier's terminal
                env={**os.environ, **(env or {})},
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            self.log.close()
            os.unlink(self.log.name)
            from specverify.adapters.server.client import ServerUnavailable

            raise ServerUnavailable(f"cannot start the server ({exc}): {self.launch}") from None
        _LIVE.append(self)

    def dead(self) -> Optional[str]:
        """None while the process runs; else its exit status and the end of its log."""
        code = self.proc.poll()
        return None if code is None else f"exit status {code}; log tail: {self.tail()}"

    def tail(self, n: int = 1500) -> str:
        try:
            with open(self.log.name, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def close(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        self.log.close()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)


def close_all() -> None:
    """Stop every server this process started (registered with atexit)."""
    for server in list(_LIVE):
        server.close()


atexit.register(close_all)
