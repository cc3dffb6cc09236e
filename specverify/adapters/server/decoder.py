"""``ServerDecoder``: a server as a specverify decoder, managed (started from a template per γ) or attached (a running
deployment at a URL), speaking one dialect (``dialects``).

Set-up (verdict ``error`` when it fails): start or reach the first server, wait for its health path, read its name
and version, find the model name (OpenAI: ``GET /v1/models``), then run the honour check (``honour``) and declare
``capabilities`` = the dialect's fields the server honours, plus ``batch``, plus ``seed`` when honoured. A call sends
each request as one body through the client (``client``: at most ``max_in_flight`` in flight, the retry rule, faults
as ``invalid``) and turns each answer into a ``Completion`` by the finish rule every adapter shares
(``boundary.finish``: tokens past an end are reported, never cut; an early stop raises). ``reported_metrics()``: the
server's Prometheus spec-decode counters (vLLM) over this decoder's calls, or the per-request counts a dialect
returns (llama.cpp's ``draft_n`` / ``draft_n_accepted``). Nothing here imports an engine.
"""

from __future__ import annotations

import os
import re
import shlex
from collections import OrderedDict
from typing import Optional, Sequence

import numpy as np

from specverify.adapters.boundary.finish import finish
from specverify.adapters.server.client import Client, Post, ServerFault, ServerUnavailable, host_of
from specverify.adapters.server.dialects import Answer, Dialect
from specverify.adapters.server.honour import PROBED, honour_check
from specverify.adapters.server.metrics import spec_counters
from specverify.adapters.server.process import HOST, MODEL, ManagedServer, free_port, template_fields
from specverify.errors import InvalidArgument, check
from specverify.protocol import Completion, Request

__all__ = ["ServerDecoder", "identify"]

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|AUTH", re.IGNORECASE)  # environment names never recorded

_IDENTITY = {  # dialect -> (path, server name, how the version is read from the JSON)
    "openai": ("/version", "vllm", lambda j: j.get("version")),
    "sglang": ("/get_server_info", "sglang", lambda j: j.get("version")),
    "llamacpp": ("/props", "llama-server", lambda j: j.get("build_info")),
    "tgi": ("/info", "text-generation-inference", lambda j: j.get("version")),
}


def identify(client: Client, dialect: Dialect) -> tuple:
    """(server name, version) as the server reports them; (the dialect's name, None) when it does not say."""
    path, name, version_of = _IDENTITY[dialect.name]
    try:
        answer = client.get_json(path)
        version = version_of(answer) if isinstance(answer, dict) else None
        return name, None if version is None else str(version)
    except ServerFault:
        return f"{dialect.name}-compatible", None


def _packed(requests: list) -> list:
    """Indices of ``requests`` in groups sent as one body each: identical unseeded sampling requests together (one
    body with ``n`` = the group's size: ``n`` independent samples of one law), every seeded or greedy request alone
    (a server may derive the seeds of ``n`` samples from one seed, and refuse ``n`` > 1 at temperature 0)."""
    groups: list = []
    shared: dict = {}
    for i, request in enumerate(requests):
        if request.seed is not None or request.params.temperature == 0:
            groups.append([i])
            continue
        key = (request.prompt, request.params, request.num_draft_tokens)
        if key not in shared:
            shared[key] = len(groups)
            groups.append([])
        groups[shared[key]].append(i)
    return groups


_LRU: "OrderedDict[tuple, ServerDecoder]" = OrderedDict()  # (id(decoder), key) of every live managed server, LRU first
MAX_LIVE_ENV = "SPECVERIFY_SERVER_MAX_LIVE"


def max_live_servers() -> int:
    """How many managed servers may run at once in this process (``$SPECVERIFY_SERVER_MAX_LIVE``, default 2)."""
    value = os.environ.get(MAX_LIVE_ENV, "2")
    if not value.isdigit() or int(value) < 1:
        raise InvalidArgument(f"{MAX_LIVE_ENV}={value!r} must be an int >= 1.")
    return int(value)


def _touch(decoder, key) -> None:
    if decoder.template is not None and decoder.max_live is None:
        _LRU.pop((id(decoder), key), None)
        _LRU[(id(decoder), key)] = decoder


def _make_room() -> None:
    """Stop the least recently used managed servers until one more fits under ``max_live_servers()``."""
    while len(_LRU) >= max_live_servers():
        (_, key), decoder = next(iter(_LRU.items()))
        decoder._retire(key)
        decoder.state["stopped_for_room"] = decoder.state.get("stopped_for_room", 0) + 1


class _Live:
    """One server the decoder talks to: its client, the managed process (None when attached), counters at start."""

    def __init__(self, client: Client, process: Optional[ManagedServer]):
        self.client, self.process = client, process
        self.base: dict = {}


class ServerDecoder:
    """A server as a decoder (module docstring). Exactly one of ``template`` (managed) and ``url`` (attached)."""

    def __init__(
        self,
        target,
        draft,
        *,
        dialect: Dialect,
        method: str,
        template: Optional[str] = None,
        url: Optional[str] = None,
        speculative: bool = True,
        max_in_flight: int = 4,
        timeout_s: float = 60.0,
        retries: int = 2,
        api_key_env: Optional[str] = None,
        startup_timeout_s: float = 300.0,
        honour: bool = True,
        token_ids: str = "return_token_ids",
        model: Optional[str] = None,
        env: Optional[dict] = None,
        declared: Optional[dict] = None,
        parallel_n: bool = False,
        stream: bool = False,
        evidence_line: Optional[str] = None,
        declare_seed: bool = True,
        extra_fields: Optional[dict] = None,
        max_live: Optional[int] = None,
        watch=None,
    ):
        check(
            (template is None) != (url is None),
            f"template={template!r}, url={url!r}: give exactly one (template: specverify starts the server; url: a "
            "running deployment, attached).",
        )
        check(
            token_ids in ("return_token_ids", "logprobs"),
            f"token_ids={token_ids!r} must be 'return_token_ids' or 'logprobs' (return_tokens_as_token_ids).",
        )
        check(isinstance(honour, bool), f"honour={honour!r} must be a bool (run the honour check).")
        check(
            parallel_n is False or (parallel_n is True and dialect.takes_n),
            f"parallel_n={parallel_n!r} must be a bool, and True only for a dialect that takes n (openai), not "
            f"{dialect.name!r}.",
        )
        self.parallel_n = parallel_n
        check(
            stream is False or (stream is True and dialect.stream is not None),
            f"stream={stream!r} must be a bool, and True only for a dialect that streams (openai, llamacpp), not "
            f"{dialect.name!r}.",
        )
        self.streamed = stream
        self.evidence_line = evidence_line  # a managed server's log must show it once started (a bound workaround)
        check(isinstance(declare_seed, bool), f"declare_seed={declare_seed!r} must be a bool.")
        self.declare_seed = declare_seed
        check(
            extra_fields is None or (isinstance(extra_fields, dict) and all(isinstance(k, str) for k in extra_fields)),
            f"extra_fields={extra_fields!r} must be None or a dict of JSON fields sent with every request (fields that "
            "are no sampling field, e.g. llama-server's cache_prompt).",
        )
        self.extra_fields = dict(extra_fields or {})
        check(
            max_live is None or (isinstance(max_live, int) and not isinstance(max_live, bool) and max_live >= 1),
            f"max_live={max_live!r} must be None (the process-wide ${MAX_LIVE_ENV}) or an int >= 1 (this decoder's "
            "own managed servers, outside the process-wide count).",
        )
        self.max_live = max_live
        self.watch = watch  # optional: .observe(live, answers) after each γ group of a call, .retire(live)
        # what the server's drafts are is its own business (a draft model, n-grams, heads): never compared with an
        # exact acceptance law; no dialect reports per-round acceptance anyway
        self.draft_law = "unmodelled"
        self.vocab, self.dialect, self.method = target.vocab, dialect, method
        self.target, self.draft, self.speculative = target, draft, speculative
        self.template, self.url, self.env = template, url, dict(env or {})
        self.fields = template_fields(template) if template is not None else frozenset()
        self.fixed_gamma = "gamma" in self.fields
        self.client_options = dict(
            max_in_flight=max_in_flight, timeout_s=timeout_s, retries=retries, api_key_env=api_key_env
        )
        self.startup_timeout_s, self.model, self.token_ids = float(startup_timeout_s), model, token_ids
        self.declared = dict(declared or {})
        self.rng = np.random.default_rng()
        self.servers: dict = {}
        self.retired_counters: dict = {}
        self.request_counts = {"draft_n": 0, "draft_n_accepted": 0, "spec_verify_ct": 0}
        self.state = {"requests": 0, "retried": 0, "discarded": 0, "servers_started": 0, "restarts": 0}
        self.not_covered: dict = {}
        self.seed_probe = "not probed"
        self.name, self.version, self.launch = dialect.name, None, None
        try:
            first = self._server(3)
            self.name, self.version = identify(first.client, dialect)
            if dialect.name == "openai" and self.model is None:
                self.model = self._model_name(first.client)
            self.capabilities = self._capabilities(first, honour) | ({"stream"} if stream else set())
            if not declare_seed:  # every request then reaches the server unseeded (and parallel_n can pack them)
                self.capabilities = self.capabilities - {"seed"}
            first = next(iter(self.servers.values()))  # a probe may have restarted it
            first.base = self._counters(first)
        except BaseException:
            self.close()  # a managed server never outlives a failed set-up
            raise

    # ---- servers ------------------------------------------------------------------------------------------------
    def _key(self, gamma: int) -> int:
        return gamma if self.fixed_gamma else 0

    def _server(self, gamma: int) -> _Live:
        """The live server for γ (least recently used last), started on demand; a managed start first stops the
        least recently used servers beyond ``max_live_servers()`` of the whole process (each holds an engine's
        memory; one is started again when it is needed again, its counters kept)."""
        key = self._key(gamma)
        if key in self.servers:
            self.servers[key] = self.servers.pop(key)  # most recently used last
            _touch(self, key)
            return self.servers[key]
        if self.template is not None and self.max_live is None:
            _make_room()
        while self.max_live is not None and len(self.servers) >= self.max_live:
            self._retire(next(iter(self.servers)))  # least recently used first
        self.servers[key] = self._start(gamma)
        _touch(self, key)
        return self.servers[key]

    def _start(self, gamma: int) -> _Live:
        if self.url is not None:
            client = Client(self.url, **self.client_options)
            client.wait_ready(self.dialect.health, timeout_s=min(self.startup_timeout_s, 30.0))
            return _Live(client, None)
        port = free_port()
        argv = shlex.split(self.template.format(**self._values(gamma, port)))
        key_env = self.client_options["api_key_env"]
        secrets = [os.environ.get(key_env, "")] if key_env else []
        process = ManagedServer(argv, port, env=self.env, secrets=secrets)
        self.launch = process.launch
        client = Client(process.url, alive=process.dead, **self.client_options)
        try:
            client.wait_ready(self.dialect.health, timeout_s=self.startup_timeout_s, alive=process.dead)
        except ServerUnavailable as exc:
            tail = process.tail()
            process.close()
            raise ServerUnavailable(f"{exc}; launch: {process.launch}; log tail: {tail}") from None
        self.state["servers_started"] += 1
        if self.evidence_line is not None:
            seen = process.tail(1 << 20).count(self.evidence_line)
            if not seen:
                tail = process.tail()
                process.close()
                raise ServerUnavailable(f"the server's log never says {self.evidence_line!r}: {tail}")
            self.state["evidence_lines"] = self.state.get("evidence_lines", 0) + seen
        return _Live(client, process)

    def _values(self, gamma: int, port: int) -> dict:
        values = {"gamma": gamma, "port": port, "host": HOST, "model": MODEL}
        values["target"] = str(getattr(self.target, "path", ""))
        values["draft"] = str(getattr(self.draft, "path", ""))
        if "target_gguf" in self.fields or "draft_gguf" in self.fields:
            from specverify.adapters.boundary.gguf_export import gguf_file

            values["target_gguf"] = str(gguf_file(self.target, "toy"))
            values["draft_gguf"] = str(gguf_file(self.draft, "toy")) if "draft_gguf" in self.fields else ""
        for name in ("target", "draft"):
            if name in self.fields and not values[name]:
                raise InvalidArgument(
                    f"template uses {{{name}}} but {name}={getattr(self, name)!r} has no .path: a managed server "
                    "loads checkpoints from disk; run with --models checkpoint."
                )
        return {k: shlex.quote(str(v)) for k, v in values.items()}

    def _retire(self, key) -> None:
        _LRU.pop((id(self), key), None)
        live = self.servers.pop(key)
        try:
            if self.watch is not None:
                self.watch.retire(live)
            self._add_counters(live)
        finally:
            if live.process is not None:
                live.process.close()

    def _restart_dead(self, exc: BaseException) -> None:
        """After a fault on an honour probe: a managed server is started again (recorded), whether or not it has
        exited yet (vLLM's API server answers 500 when its engine core dies, then shuts down a few seconds later);
        an attached one must still answer its health path."""
        for key, live in list(self.servers.items()):
            if live.process is not None:
                live.process.close()
                self.servers[key] = self._start(key or 3)
                _touch(self, key)
                self.state["restarts"] += 1
            else:
                try:  # attached: a deployment that no longer answers cannot be restarted from here
                    live.client.wait_ready(self.dialect.health, timeout_s=10.0)
                except ServerUnavailable:
                    raise ServerUnavailable(
                        f"the attached server stopped answering after an honour probe: {exc}"
                    ) from None

    def _model_name(self, client: Client) -> str:
        listing = client.get_json("/v1/models")
        try:
            return str(listing["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise ServerUnavailable(
                f"GET /v1/models gave no model: {listing!r}; pass --engine-option model=NAME"
            ) from None

    # ---- capabilities -------------------------------------------------------------------------------------------
    def _capabilities(self, first: _Live, honour: bool) -> frozenset:
        maps = set(self.dialect.maps)
        if not honour:
            self.not_covered["honour check"] = "skipped (honour=False): every mapped field declared unchecked"
            return frozenset(maps | {"seed", "batch"})
        probed = [f for f in PROBED if f in maps or f == "seed"]
        reasons = honour_check(self._probe_send, self.vocab, probed, on_fault=self._restart_dead)
        if reasons.get("temperature"):
            raise ServerUnavailable(
                f"the server does not honour temperature ({reasons['temperature']}): nothing can be certified"
            )
        # a seed changes no law: one the server does not reproduce stays declared (seeded requests may take another
        # code path, whose law is tested), and the certifier's reproducibility check reports it; the probe's answer
        # is recorded as evidence
        self.seed_probe = reasons.pop("seed", "") or "reproducible"
        self.not_covered.update({f: r for f, r in reasons.items() if r})
        honoured = {f for f, r in reasons.items() if not r}
        return frozenset((maps - set(PROBED)) | honoured | {"temperature", "max_tokens", "batch", "seed"})

    def _probe_send(self, requests: Sequence[Request]) -> list:
        live = next(iter(self.servers.values()))
        return [answer.tokens for answer in self._send(live, list(requests))]

    # ---- calls --------------------------------------------------------------------------------------------------
    def _context(self) -> dict:
        return {
            "model": self.model,
            "vocab_size": self.vocab.size,
            "strings": tuple(self.vocab.strings),
            "rng": self.rng,
            "token_ids": self.token_ids,
        }

    def _send(self, live: _Live, requests: list) -> list:
        """One ``Answer`` per request, in order; identical unseeded requests packed into one body with ``n``
        where ``parallel_n`` is on (``_packed``)."""
        ctx = self._context()
        groups = _packed(requests) if self.parallel_n else [[i] for i in range(len(requests))]
        posts = []
        for group in groups:
            request = requests[group[0]]
            body = {**self.dialect.body(request, ctx), **self.extra_fields}
            if len(group) > 1:
                body["n"] = len(group)
            posts.append(Post(self.dialect.path, body, seeded=request.seed is not None))
        raw = live.client.post_many(posts)
        answers: list = [None] * len(requests)
        for post, group, answer in zip(posts, groups, raw):
            try:
                parsed = self.dialect.parse(answer, len(group))
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                raise live.client._fault(
                    f"the answer is malformed ({exc}): {str(answer)[:400]!r}", post.path, post.body
                )
            prompt = requests[group[0]].prompt
            prefill = parsed[0].spec.get("prefill")
            if prefill and tuple(prefill)[-len(prompt) :] != tuple(prompt):
                raise live.client._fault(
                    f"the server tokenised the prompt text into {prefill!r}, not {prompt!r}", post.path, post.body
                )
            for i, one in zip(group, parsed):
                answers[i] = one
        return answers

    def stream_one(self, request: Request) -> tuple:
        """(chunks as (token ids, text) pairs, the server's finish reason, its per-request counts) of ``request`` sent
        with ``stream``."""
        live = self._server(request.num_draft_tokens)
        body = {**self.dialect.body(request, self._context()), **self.extra_fields, "stream": True}
        post = Post(self.dialect.path, body, seeded=request.seed is not None)
        events = live.client.stream(post)
        try:
            return self.dialect.stream(events)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise live.client._fault(f"the stream is malformed ({exc}): {str(events)[:400]!r}", post.path, body)

    def whole_one(self, request: Request) -> object:
        """The ``Answer`` of ``request`` sent without streaming."""
        return self._send(self._server(request.num_draft_tokens), [request])[0]

    def _streamed(self, requests: list) -> list:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(self.client_options["max_in_flight"], max(1, len(requests)))) as pool:
            return list(pool.map(self.stream_one, requests))

    def _check(self, request: Request) -> None:
        extra = sorted(n for n in request.params.active() if n not in self.capabilities)
        if extra:
            raise InvalidArgument(
                f"params={request.params!r} set {extra!r}, which this server does not honour or the "
                f"{self.dialect.name} dialect does not map (not declared: {self.not_covered or 'not in the dialect'})."
            )
        refused = self.dialect.refuse(request) if self.dialect.refuse is not None else None
        if refused:
            raise InvalidArgument(f"params={request.params!r}: {refused}.")

    def _finish(self, answer: Answer, params, finished: dict):
        """The finish rule on one answer; a call's many draws of one law repeat few outcomes, so each distinct
        (tokens, server reason, params) is decided once per call (``params`` outlive the call: ``id`` is safe)."""
        key = (answer.tokens, answer.finish_reason, id(params))
        if key not in finished:
            detail = f"the server's {self.dialect.reason_field} {answer.finish_reason!r}"
            finished[key] = finish(answer.tokens, self.vocab, params, engine=self.name, detail=detail)
        return finished[key]

    def __call__(self, requests: Sequence[Request]) -> list:
        requests = list(requests)
        for r in requests:
            self._check(r)
        out: list = [None] * len(requests)
        finished: dict = {}  # (tokens, the server's reason, id(params)) -> the finish rule's answer, within this call
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.num_draft_tokens, []).append(i)
        for gamma, indices in groups.items():
            live = self._server(gamma)
            chunks: list = [None] * len(indices)
            if self.streamed:
                streamed = self._streamed([requests[i] for i in indices])
                answers = [
                    Answer(tuple(t for ids, _ in c for t in ids), reason, None, spec) for c, reason, spec in streamed
                ]
                chunks = [tuple(tuple(ids) for ids, _ in c if ids) for c, _, _ in streamed]
            else:
                answers = self._send(live, [requests[i] for i in indices])
            if self.watch is not None:
                self.watch.observe(live, answers)
            for i, answer, stream in zip(indices, answers, chunks):
                for key in self.request_counts:
                    self.request_counts[key] += int(answer.spec.get(key, 0) or 0)
                done = self._finish(answer, requests[i].params, finished)
                out[i] = Completion(done.tokens, done.finish_reason, stream=stream)
        self.state["requests"] += len(requests)
        return out

    # ---- evidence -----------------------------------------------------------------------------------------------
    def _counters(self, live: _Live) -> dict:
        try:
            status, text = live.client.get_text("/metrics", timeout_s=10.0)
        except OSError:
            return {}
        return spec_counters(text) if status == 200 else {}

    def _add_counters(self, live: _Live) -> None:
        from specverify.adapters.vllm.counters import add_counters, counter_delta

        now = self._counters(live)
        if now:
            add_counters(self.retired_counters, counter_delta(live.base, now))
        for name in ("retried", "discarded"):
            self.state[name] += getattr(live.client, name)
            setattr(live.client, name, 0)

    def reported_metrics(self) -> Optional[object]:
        """The server's own speculative counters over this decoder's calls (module docstring); None when the server
        does not speculate or reports none."""
        from specverify.adapters.vllm.counters import add_counters, counter_delta, reported
        from specverify.metrics.counters import ReportedMetrics

        if not self.speculative:
            return None
        total = {k: (list(v) if isinstance(v, list) else v) for k, v in self.retired_counters.items()}
        for live in self.servers.values():
            now = self._counters(live)
            if now:
                add_counters(total, counter_delta(live.base, now))
        if total:
            return reported(total)
        if self.request_counts["draft_n"]:
            return ReportedMetrics(
                num_draft_tokens=self.request_counts["draft_n"],
                num_accepted_tokens=self.request_counts["draft_n_accepted"],
            )
        return None

    @property
    def engine_info(self) -> dict:
        """docs/adapters.md: the server as it reports itself, how it was reached (host only; the launch line with
        secrets removed), what it honours, and the states its answers show."""
        state = dict(self.state)
        for live in self.servers.values():
            state["retried"] += live.client.retried
            state["discarded"] += live.client.discarded
        requested = {
            "method": self.method,
            "mode": "managed" if self.template is not None else "attached",
            "dialect": self.dialect.name,
            "host": host_of(self.url) if self.url is not None else HOST,
            "launch": self.launch,
            "max_in_flight": self.client_options["max_in_flight"],
            "parallel_n": self.parallel_n,
            "declare_seed": self.declare_seed,
            "stream": self.streamed,
            **({"extra_fields": dict(self.extra_fields)} if self.extra_fields else {}),
            "env": {k: v for k, v in self.env.items() if k != "PYTHONPATH" and not _SECRET_NAME.search(k)},
            "timeout_s": self.client_options["timeout_s"],
            "not_covered": dict(self.not_covered),
            "seed_probe": self.seed_probe,
            "dialect_cannot_cover": self.dialect.cannot_cover,
            **({"declared": self.declared} if self.declared else {}),
        }
        out = {"name": self.name, "requested": requested, "state": state}
        if self.version is not None:
            out["version"] = self.version
        return out

    def close(self) -> None:
        for key in list(self.servers):
            self._retire(key)
