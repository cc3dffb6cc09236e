"""The HTTP client of the server adapter: stdlib only (``http.client``), a bounded number of requests in flight,
per-request timeouts, the retry rule, and the faults a server can show, each mapped once.

**Concurrency.** ``Client.post_many`` sends a call's bodies through a pool of ``max_in_flight`` threads, each with its
own kept-alive connection: at most that many requests are in flight at once (the server's batch, by default the
decoder's ``max_in_flight`` option), and the answers come back in request order.

**Retry rule** (docs/servers.md). Only a connection failure *before any response byte* (refused, reset or closed
before the status line) is ever retried, and only for a request that carries a seed: a seeded request's law given
its seed is one outcome, so sending it again cannot bias the law. An unseeded request is never retried (a failure that
depends on the outcome, a server dying on some tokens, would otherwise condition the law on the survivors); its draw
is discarded and counted (``Client.discarded``), and, since the protocol answers every request, the call then fails:
``ServerFault`` (verdict ``invalid``). A timeout, a status other than 200, a body that is not the JSON the dialect
expects, or a connection dropped after the status line is never retried.

**Faults** (``ServerFault``, a ``ProtocolViolation``: verdict ``invalid``): the message names the request (its path
and JSON body) and a ``curl`` line that sends it again. ``ServerUnavailable`` is a server that cannot be reached at
set-up (verdict ``error`` where the factory raises it).

**API key**: read from the environment variable the caller names (``api_key_env``), sent as ``Authorization: Bearer``;
it never enters a message, a ``curl`` line (which reads ``$NAME`` instead), ``repr`` or ``engine_info``.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence
from urllib.parse import urlsplit

from specverify.errors import ProtocolViolation, SpecverifyError, check

__all__ = ["Client", "ServerFault", "ServerUnavailable", "Post", "curl_line", "host_of"]

BODY_LIMIT = 600  # characters of a response body quoted in a message
#: a kept-alive connection idle this long is closed and a fresh one opened: a server that closed it meanwhile would
#: fail the next request before any response, which the retry rule may not resend (an unseeded draw)
IDLE_S = 1.0


class ServerFault(ProtocolViolation, RuntimeError):
    """The server failed one request (5xx or another status, malformed JSON, a dropped connection, a dead server, a
    timeout): verdict ``invalid``; the message names the request and a ``curl`` line that reproduces it."""


class ServerUnavailable(SpecverifyError, RuntimeError):
    """The server cannot be reached or started (set-up: verdict ``error``)."""


class Post:
    """One request to send: ``path``, JSON ``body``, whether it may be retried (``seeded``, the retry rule)."""

    __slots__ = ("path", "body", "seeded")

    def __init__(self, path: str, body: dict, *, seeded: bool):
        self.path, self.body, self.seeded = path, body, seeded


def host_of(url: str) -> str:
    """The host (and port) of ``url``, what a certificate records of it (no scheme, path, query or credentials).

    >>> host_of("https://user:pw@gpu-7.example:8000/v1?k=1")
    'gpu-7.example:8000'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def curl_line(url: str, path: str, body: Optional[dict], api_key_env: Optional[str] = None) -> str:
    """A shell line that sends the request again (the key as ``$NAME``, never its value).

    >>> print(curl_line("http://h:80", "/v1/completions", {"prompt": [0]}, "MY_KEY"))  # doctest: +NORMALIZE_WHITESPACE
    curl -sS -X POST http://h:80/v1/completions -H 'Content-Type: application/json'
      -H "Authorization: Bearer $MY_KEY" -d '{"prompt": [0]}'
    """
    parts = ["curl -sS", "-X POST" if body is not None else "", shlex.quote(url.rstrip("/") + path)]
    parts.append("-H " + shlex.quote("Content-Type: application/json"))
    if api_key_env:
        parts.append(f'-H "Authorization: Bearer ${api_key_env}"')
    if body is not None:
        parts.append("-d " + shlex.quote(json.dumps(body)))
    return " ".join(p for p in parts if p)


class _Dropped(Exception):
    """The connection failed; ``before_response``: no byte of a response had arrived."""

    def __init__(self, exc: BaseException, before_response: bool):
        super().__init__(repr(exc))
        self.exc, self.before_response = exc, before_response


class Client:
    """HTTP to one server at ``url`` (``http://host:port``): ``post``, ``post_many``, ``get``.

    ``timeout_s`` bounds each request (connect and every read); ``max_in_flight`` the requests sent at once;
    ``retries`` the resends of a seeded request whose connection failed before any response (module docstring);
    ``api_key_env`` the environment variable holding the API key (None: no key); ``alive`` an optional callable
    returning None while the server lives, else why it is dead (a managed process's exit), checked when a request
    fails so the fault says the server died."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 60.0,
        max_in_flight: int = 4,
        retries: int = 2,
        api_key_env: Optional[str] = None,
        alive=None,
    ):
        parts = urlsplit(url)
        check(
            parts.scheme in ("http", "https") and bool(parts.hostname),
            f"url={url!r} must be http://HOST:PORT or https://HOST:PORT, e.g. --engine-option url=http://gpu-7:8000.",
        )
        check(
            parts.username is None and parts.password is None,
            "url must not carry credentials: put the API key in an environment variable and name it with "
            "--engine-option api_key_env=NAME.",
        )
        check(
            isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool) and timeout_s > 0,
            f"timeout_s={timeout_s!r} must be a number of seconds > 0, e.g. --engine-option timeout_s=60.",
        )
        check(
            isinstance(max_in_flight, int) and not isinstance(max_in_flight, bool) and 1 <= max_in_flight <= 1024,
            f"max_in_flight={max_in_flight!r} must be an int in [1, 1024] (requests in flight at once).",
        )
        check(
            isinstance(retries, int) and not isinstance(retries, bool) and 0 <= retries <= 10,
            f"retries={retries!r} must be an int in [0, 10] (resends of a seeded request).",
        )
        if api_key_env is not None:
            check(
                isinstance(api_key_env, str) and api_key_env.isidentifier(),
                f"api_key_env={api_key_env!r} must name an environment variable (the key itself is never an option).",
            )
            check(
                bool(os.environ.get(api_key_env)),
                f"api_key_env={api_key_env!r}: the environment variable is not set or empty; export it first.",
            )
        self.url = f"{parts.scheme}://{parts.netloc}"
        self.secure = parts.scheme == "https"
        self.host, self.port = parts.hostname, parts.port or (443 if self.secure else 80)
        self.timeout_s, self.max_in_flight, self.retries = float(timeout_s), max_in_flight, retries
        self.api_key_env, self.alive = api_key_env, alive
        self.local = threading.local()
        self.lock = threading.Lock()
        self.retried = self.discarded = self.sent = 0

    def __repr__(self) -> str:
        return f"Client({self.url!r}, max_in_flight={self.max_in_flight}, timeout_s={self.timeout_s:g})"

    def _headers(self) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.api_key_env, "")
        return headers

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        now = time.monotonic()
        if conn is not None and now - getattr(self.local, "used", now) > IDLE_S:
            self._drop()  # servers close idle kept-alive connections (uvicorn after 5 s): never reuse a stale one
            conn = None
        self.local.used = now
        if conn is None:
            kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
            conn = self.local.conn = kind(self.host, self.port, timeout=self.timeout_s)
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _drop(self) -> None:
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
        self.local.conn = None

    def _once(self, method: str, path: str, body: Optional[dict]) -> tuple:
        """(status, raw body) of one exchange; ``_Dropped`` when the connection fails, ``socket.timeout`` on a
        timeout (the connection is closed either way)."""
        # bytes, so http.client sends headers and body in one segment (a str body goes in a second send, which
        # meets the peer's delayed ACK: ~40 ms a request)
        payload = None if body is None else json.dumps(body).encode()
        started = False
        try:
            conn = self._connection()
            conn.request(method, path, body=payload, headers=self._headers())
            response = conn.getresponse()
            started = True
            raw = response.read()
            self.local.used = time.monotonic()
            return response.status, raw
        except (TimeoutError, socket.timeout):
            self._drop()
            raise
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            # a kept-alive connection the server closed while idle fails at once with no response: the same
            # before-response case as a refused connection
            raise _Dropped(exc, before_response=not started) from None

    def _fault(self, what: str, path: str, body: Optional[dict]) -> ServerFault:
        dead = self.alive() if self.alive is not None else None
        if dead:
            what = f"{what}; the server is dead: {dead}"
        line = curl_line(self.url, path, body, self.api_key_env)
        shown = json.dumps(body) if body is not None else "(none)"
        return ServerFault(f"{what} for POST {path} with body {shown}. Reproduce: {line}")

    def request(self, method: str, path: str, body: Optional[dict] = None, *, seeded: bool = False) -> dict:
        """The JSON answer of one request, by the retry rule; ``ServerFault`` otherwise."""
        attempt = 0
        while True:
            try:
                status, raw = self._once(method, path, body)
                break
            except (TimeoutError, socket.timeout):
                raise self._fault(f"no answer within timeout_s={self.timeout_s:g} s", path, body) from None
            except _Dropped as dropped:
                if dropped.before_response and seeded and attempt < self.retries and not self._dead():
                    attempt += 1
                    with self.lock:
                        self.retried += 1
                    time.sleep(0.05 * 2**attempt)
                    continue
                if not seeded:
                    with self.lock:
                        self.discarded += 1
                when = "before any response" if dropped.before_response else "after the status line"
                rule = "" if seeded else " (unseeded: never retried, the draw is discarded and counted)"
                raise self._fault(f"the connection failed {when} ({dropped.exc!r}){rule}", path, body) from None
        with self.lock:
            self.sent += 1
        if status != 200:
            text = raw[:BODY_LIMIT].decode("utf-8", "replace")
            raise self._fault(f"the server answered HTTP {status}: {text!r}", path, body)
        try:
            return json.loads(raw)
        except ValueError as exc:
            text = raw[:BODY_LIMIT].decode("utf-8", "replace")
            raise self._fault(f"the server's answer is not JSON ({exc}): {text!r}", path, body) from None

    def stream(self, post: Post) -> list:
        """The JSON events of one streamed request (server-sent events: ``data: {...}`` lines up to ``data: [DONE]``
        or the end of the answer), never retried once the status line came; faults as :meth:`request`."""
        kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        conn = kind(self.host, self.port, timeout=self.timeout_s)
        payload = json.dumps(post.body).encode()
        try:
            try:
                conn.request("POST", post.path, body=payload, headers=self._headers())
                response = conn.getresponse()
            except (TimeoutError, socket.timeout):
                raise self._fault(f"no answer within timeout_s={self.timeout_s:g} s", post.path, post.body) from None
            except (OSError, http.client.HTTPException) as exc:
                raise self._fault(f"the connection failed ({exc!r})", post.path, post.body) from None
            if response.status != 200:
                text = response.read()[:BODY_LIMIT].decode("utf-8", "replace")
                raise self._fault(f"the server answered HTTP {response.status}: {text!r}", post.path, post.body)
            return self._events(response, post)
        finally:
            conn.close()

    def _events(self, response, post: Post) -> list:
        events = []
        while True:
            try:
                line = response.readline()
            except (TimeoutError, socket.timeout):
                raise self._fault(
                    f"the stream stalled past timeout_s={self.timeout_s:g} s", post.path, post.body
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                raise self._fault(f"the stream was cut ({exc!r})", post.path, post.body) from None
            if not line:
                return events
            text = line.decode("utf-8", "replace").strip()
            if not text.startswith("data:"):
                continue
            data = text[len("data:") :].strip()
            if data == "[DONE]":
                return events
            try:
                events.append(json.loads(data))
            except ValueError:
                raise self._fault(
                    f"a streamed event is not JSON: {data[:BODY_LIMIT]!r}", post.path, post.body
                ) from None

    def _dead(self) -> bool:
        return bool(self.alive() if self.alive is not None else None)

    def post(self, post: Post) -> dict:
        return self.request("POST", post.path, post.body, seeded=post.seeded)

    def post_many(self, posts: Sequence[Post]) -> list:
        """The JSON answers of ``posts`` in order, at most ``max_in_flight`` in flight; the first fault raises."""
        posts = list(posts)
        if len(posts) <= 1 or self.max_in_flight == 1:
            return [self.post(p) for p in posts]
        with ThreadPoolExecutor(min(self.max_in_flight, len(posts))) as pool:
            return list(pool.map(self.post, posts))

    def get_text(self, path: str, *, timeout_s: Optional[float] = None) -> tuple:
        """(status, text) of ``GET path`` on a fresh connection (health and metrics: never retried); raises
        ``OSError`` / ``http.client.HTTPException`` when the server cannot be reached."""
        kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        conn = kind(self.host, self.port, timeout=timeout_s or self.timeout_s)
        try:
            conn.request("GET", path, headers=self._headers())
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def get_json(self, path: str) -> dict:
        """The JSON of ``GET path``; ``ServerFault`` when it fails or is not JSON."""
        try:
            status, text = self.get_text(path)
        except (OSError, http.client.HTTPException) as exc:
            raise self._fault(f"GET failed ({exc!r})", path, None) from None
        if status != 200:
            raise self._fault(f"the server answered HTTP {status}: {text[:BODY_LIMIT]!r}", path, None)
        try:
            return json.loads(text)
        except ValueError:
            raise self._fault(f"the server's answer is not JSON: {text[:BODY_LIMIT]!r}", path, None) from None

    def wait_ready(self, path: str, *, timeout_s: float, alive=None) -> None:
        """Poll ``GET path`` until it answers 200; ``ServerUnavailable`` after ``timeout_s`` or when ``alive()``
        says the server died."""
        check(timeout_s > 0, f"timeout_s={timeout_s!r} must be > 0.")
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            dead = alive() if alive is not None else None
            if dead:
                raise ServerUnavailable(f"the server at {self.url} exited before it was ready: {dead}")
            try:
                status, text = self.get_text(path, timeout_s=5.0)
                if status == 200:
                    return
                last = f"HTTP {status}: {text[:200]!r}"
            except (OSError, http.client.HTTPException) as exc:
                last = repr(exc)
            time.sleep(0.2)
        raise ServerUnavailable(f"the server at {self.url} did not answer GET {path} within {timeout_s:g} s ({last})")
